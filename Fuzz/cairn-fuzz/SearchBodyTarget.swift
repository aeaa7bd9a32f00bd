// The socket request decoder, SearchBody.parse, lives in CairnSearch (shared by cairnd and cairn-server).
@testable import CairnSearch
import CairnIndex
import Foundation

extension FuzzTarget {
    /// The socket's request decoder (`POST /v1/search` bodies). Property: what it accepts is a
    /// request the index can run (k in range, a query of bounded, non-blank text, a finite
    /// similarity floor).
    static let searchBody = FuzzTarget(name: "search-body") { input in
        guard let request = try? SearchBody.parse(Data(input)) else { return }
        require(SearchRequest.kRange.contains(request.k), "accepted k outside its range")
        require(request.query.utf8.count <= SearchBody.maximumQueryBytes, "accepted an over-long query")
        require(!request.query.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "accepted a blank query")
        require(request.minSimilarity.map { $0.isFinite && (-1...1).contains($0) } ?? true, "accepted a bad min_similarity")
    }
}
