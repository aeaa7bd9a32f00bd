import CairnCore
import Foundation
import Testing

@Suite("CairnVersion: a build is named by its CHANGELOG")
struct CairnVersionTests {
    @Test("Given CHANGELOG.md, then CairnVersion.date is the newest date in its section headings: a change dated later than the build's name fails here until the name is moved on")
    func dateFollowsTheChangelog() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let headings = text.split(separator: "\n").filter { $0.hasPrefix("## ") || $0.hasPrefix("### ") }
        let dates = headings.flatMap { line in
            line.matches(of: /\d{4}-\d{2}-\d{2}/).map { String(line[$0.range]) }
        }
        #expect(dates.max() == CairnVersion.date, "\(dates.max() ?? "no date")")
    }
}
