@testable import CairnIndex
import Testing

@Suite struct RankFusionTests {
    // Lexical A 10, B 6, C 2; dense B 0.9, D 0.5 (rows 0–3).
    let lexical = [ScoredRow(row: 0, id: "A", score: 10), ScoredRow(row: 1, id: "B", score: 6),
                   ScoredRow(row: 2, id: "C", score: 2)]
    let dense = [ScoredRow(row: 1, id: "B", score: 0.9), ScoredRow(row: 3, id: "D", score: 0.5)]

    @Test func givenScores_whenTakingMoments_thenMeanAndDeviationMatchHandComputedValues() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population standard deviation 2.
        let moments = ScoreMoments(scores: [2, 4, 4, 4, 5, 5, 7, 9])
        #expect(moments.mean == 5 && moments.standardDeviation == 2)
        #expect(moments.standardized(9) == 2 && moments.standardized(4) == -0.5)

        // 6 and 2 among four rows (two score 0): mean 2, variance (36 + 4) / 4 − 4 = 6.
        let padded = ScoreMoments(scores: [6, 2], zeros: 2)
        #expect(padded.count == 4 && padded.mean == 2)
        #expect(abs(padded.standardDeviation - 6.0.squareRoot()) < 1e-12)

        #expect(ScoreMoments(scores: [3, 3, 3]).standardized(3) == 0)
        #expect(ScoreMoments(scores: [1]).standardized(7) == 0)
        #expect(ScoreMoments().standardized(1) == 0)
    }

    @Test func givenTwoListsAndEveryCosine_whenFusingStandardised_thenScoresMatchHandComputedValues() {
        // Five rows. Lexical A 10, B 6, C 2, D and E unmatched: over five rows mean 3.6,
        // standard deviation sqrt((100 + 36 + 4) / 5 − 12.96) = sqrt(15.04).
        // Cosines A 0.1, B 0.9, C 0.3, D 0.5, E 0.2: mean 0.4, sd sqrt((0.01 + 0.81 + 0.09 + 0.25
        // + 0.04) / 5 − 0.16) = sqrt(0.08). E is in neither list, so it is no candidate.
        let cosines: [Double] = [0.1, 0.9, 0.3, 0.5, 0.2]
        let lexicalMoments = ScoreMoments(scores: [10, 6, 2], zeros: 2)
        let denseMoments = ScoreMoments(scores: cosines)
        let fused = RankFusion.standardized(lexical: lexical, lexicalMoments: lexicalMoments,
                                            dense: dense, denseMoments: denseMoments, denseScore: { cosines[$0] },
                                            lexicalWeight: 0.3, denseWeight: 0.7)

        let lexicalSD = 15.04.squareRoot(), denseSD = 0.08.squareRoot()
        func expected(_ lexical: Double, _ cosine: Double) -> Double {
            0.3 * (lexical - 3.6) / lexicalSD + 0.7 * (cosine - 0.4) / denseSD
        }
        let want = ["A": expected(10, 0.1), "B": expected(6, 0.9), "C": expected(2, 0.3), "D": expected(0, 0.5)]
        // B ≈ 1.42, D ≈ −0.03, A ≈ −0.25, C ≈ −0.37.
        #expect(fused.map(\.id) == ["B", "D", "A", "C"])
        for row in fused {
            #expect(abs(row.fused - want[row.id]!) < 1e-12, "\(row.id)")
            #expect(row.dense == cosines[row.row])
        }
        #expect(fused.first { $0.id == "D" }?.lexical == nil)
        #expect(fused.first { $0.id == "C" }?.lexical == 2)
    }

    @Test func givenTwoLists_whenFusingByReciprocalRank_thenScoresMatchHandComputedValues() {
        let fused = RankFusion.reciprocalRank(lexical: lexical, dense: dense, constant: 60)

        #expect(fused.map(\.id) == ["B", "A", "D", "C"])
        #expect(abs(fused[0].fused - (1.0 / 62 + 1.0 / 61)) < 1e-15)
        #expect(abs(fused[1].fused - 1.0 / 61) < 1e-15)
        #expect(abs(fused[2].fused - 1.0 / 62) < 1e-15)
        #expect(abs(fused[3].fused - 1.0 / 63) < 1e-15)
    }

    @Test func givenScores_whenJudgingDegeneracy_thenOnlyHighAndFlatScoresAreDegenerate() {
        #expect(RankFusion.isDegenerate(topScores: [0.95, 0.93, 0.90], minimum: 0.88, maximumSpread: 0.06))
        #expect(!RankFusion.isDegenerate(topScores: [0.95, 0.93, 0.87], minimum: 0.88, maximumSpread: 0.06))
        #expect(!RankFusion.isDegenerate(topScores: [0.99, 0.92], minimum: 0.88, maximumSpread: 0.06))
        #expect(!RankFusion.isDegenerate(topScores: [0.99], minimum: 0.88, maximumSpread: 0.06))
    }
}
