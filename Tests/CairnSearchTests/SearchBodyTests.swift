import CairnSearch
import Testing

@Suite("The search body's k")
struct SearchBodyTests {
    @Test("Given k written as 3, 3.0 or 1e1, when the body is parsed, then it is the whole number it names (JSON has one kind of number: Python writes a float as 3.0); 2.5, \"3\", 0 and 101 are bad_k")
    func wholeNumbers() throws {
        for (written, k) in [("3", 3), ("3.0", 3), ("1e1", 10), ("100", 100)] {
            #expect(try SearchBody.parse(Array(#"{"query": "water", "k": \#(written)}"#.utf8)).k == k, "\(written)")
        }
        for written in ["2.5", #""3""#, "0", "101", "1e3"] {
            let error = #expect(throws: APIError.self, "\(written)") { try SearchBody.parse(Array(#"{"query": "water", "k": \#(written)}"#.utf8)) }
            #expect(error?.code == "bad_k", "\(written)")
        }
    }
}
