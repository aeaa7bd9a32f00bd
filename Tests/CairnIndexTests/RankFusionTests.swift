@testable import CairnIndex
import Testing

@Suite struct RankFusionTests {
    // Lexical A 10, B 6, C 2 → normalised 1, 0.5, 0. Dense B 0.9, D 0.5 → normalised 1, 0.
    let lexical = [ScoredRow(row: 0, id: "A", score: 10), ScoredRow(row: 1, id: "B", score: 6),
                   ScoredRow(row: 2, id: "C", score: 2)]
    let dense = [ScoredRow(row: 1, id: "B", score: 0.9), ScoredRow(row: 3, id: "D", score: 0.5)]

    @Test func givenTwoLists_whenFusingWithWeights_thenScoresMatchHandComputedValues() {
        let fused = RankFusion.weighted(lexical: lexical, dense: dense, lexicalWeight: 0.4, denseWeight: 0.6)

        // B = 0.6·1 + 0.4·0.5 = 0.8; A = 0.4·1 = 0.4; C = 0; D = 0.6·0 = 0 (tie: C before D by id).
        #expect(fused.map(\.id) == ["B", "A", "C", "D"])
        #expect(abs(fused[0].fused - 0.8) < 1e-12)
        #expect(abs(fused[1].fused - 0.4) < 1e-12)
        #expect(fused[2].fused == 0 && fused[3].fused == 0)
        #expect(fused[0].lexical == 6 && fused[0].dense == 0.9)
        #expect(fused[1].dense == nil && fused[3].lexical == nil)
    }

    @Test func givenTwoLists_whenFusingByReciprocalRank_thenScoresMatchHandComputedValues() {
        let fused = RankFusion.reciprocalRank(lexical: lexical, dense: dense, constant: 60)

        #expect(fused.map(\.id) == ["B", "A", "D", "C"])
        #expect(abs(fused[0].fused - (1.0 / 62 + 1.0 / 61)) < 1e-15)
        #expect(abs(fused[1].fused - 1.0 / 61) < 1e-15)
        #expect(abs(fused[2].fused - 1.0 / 62) < 1e-15)
        #expect(abs(fused[3].fused - 1.0 / 63) < 1e-15)
    }

    @Test func givenOneScoreOrNoSpread_whenNormalising_thenEveryScoreIsOne() {
        #expect(RankFusion.minMaxNormalized([5]) == [1])
        #expect(RankFusion.minMaxNormalized([3, 3]) == [1, 1])
        #expect(RankFusion.minMaxNormalized([]) == [])
        #expect(RankFusion.minMaxNormalized([2, 4, 3]) == [0, 1, 0.5])
    }

    @Test func givenScores_whenJudgingDegeneracy_thenOnlyHighAndFlatScoresAreDegenerate() {
        #expect(RankFusion.isDegenerate(topScores: [0.95, 0.93, 0.90], minimum: 0.88, maximumSpread: 0.06))
        #expect(!RankFusion.isDegenerate(topScores: [0.95, 0.93, 0.87], minimum: 0.88, maximumSpread: 0.06))
        #expect(!RankFusion.isDegenerate(topScores: [0.99, 0.92], minimum: 0.88, maximumSpread: 0.06))
        #expect(!RankFusion.isDegenerate(topScores: [0.99], minimum: 0.88, maximumSpread: 0.06))
    }
}
