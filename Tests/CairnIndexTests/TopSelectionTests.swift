@testable import CairnIndex
import Testing

@Suite struct TopSelectionTests {
    @Test("Given streams with many tied scores, when keeping the best k in one pass, then the rows and their order equal a full sort's first k")
    func selectionEqualsSortedPrefix() {
        var generator = SystemRandomNumberGenerator()
        for trial in 0..<200 {
            let count = Int.random(in: 0...300, using: &generator)
            let capacity = Int.random(in: 0...40, using: &generator)
            // Scores from a handful of values, so ties (broken by id) are common.
            let stream = (0..<count).shuffled(using: &generator).map { row in
                ScoredRow(row: row, id: "c\(row)", score: Double(Int.random(in: 0...6, using: &generator)) / 4)
            }
            var selection = TopSelection(capacity: capacity)
            for row in stream where selection.admits(row.score) { selection.offer(row) }
            #expect(selection.sorted == Array(RankFusion.sorted(stream).prefix(capacity)), "trial \(trial)")
        }
    }
}
