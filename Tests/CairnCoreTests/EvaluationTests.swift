import Foundation
import Testing
@testable import CairnCore

/// The metrics against values computed by hand (each computation is written out beside it).
@Suite struct EvaluationTests {
    /// One query judged: d1 grade 3, d2 grade 1, d3 grade 2, d9 grade 0 (judged not relevant).
    static let grades = ["d1": 3, "d2": 1, "d3": 2, "d9": 0]

    @Test("Given a graded ranking, when nDCG@10 is computed, then it equals the hand-computed linear-gain value")
    func ndcgLinearGains() {
        // Ranking d2, d9, d1, x, d3 → gains 1, 0, 3, 0, 2 at ranks 1…5.
        // DCG  = 1/log2(2) + 0 + 3/log2(4) + 0 + 2/log2(6) = 1 + 1.5 + 0.7737056 = 3.2737056
        // IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4)          = 3 + 1.2618595 + 0.5  = 4.7618595
        // nDCG = 3.2737056 / 4.7618595 = 0.6874847
        let value = RetrievalMetrics.ndcg(ranking: ["d2", "d9", "d1", "x", "d3"], grades: Self.grades, cutoff: 10)
        #expect(abs(value - 0.6874847) < 1e-6)
    }

    @Test("Given relevant documents beyond the cut-off, when nDCG@2 is computed, then the ideal uses all judged grades but the ranking only its top 2")
    func ndcgCutoff() {
        // Top 2 of d3, x, d1: gains 2, 0 → DCG = 2.
        // IDCG@2 = 3 + 2/log2(3) = 4.2618595 → nDCG@2 = 2 / 4.2618595 = 0.4692787
        let value = RetrievalMetrics.ndcg(ranking: ["d3", "x", "d1"], grades: Self.grades, cutoff: 2)
        #expect(abs(value - 0.4692787) < 1e-6)
        #expect(RetrievalMetrics.ndcg(ranking: ["d1", "d3", "d2"], grades: Self.grades, cutoff: 10) == 1)
    }

    @Test("Given a ranking that repeats a document, when scored, then only its first position counts")
    func duplicatesCountOnce() {
        // d1, d1, d3 → distinct d1, d3 at ranks 1, 2: DCG = 3 + 2/log2(3) = IDCG@2 → nDCG@2 = 1.
        #expect(RetrievalMetrics.ndcg(ranking: ["d1", "d1", "d3"], grades: Self.grades, cutoff: 2) == 1)
        // Recall@2: d1 and d3 of 3 relevant = 2/3.
        #expect(abs(RetrievalMetrics.recall(ranking: ["d1", "d1", "d3"], grades: Self.grades, cutoff: 2) - 2.0 / 3) < 1e-12)
    }

    @Test("Given a ranking, when recall is computed, then it is relevant retrieved in the top k over all relevant (grade > 0)")
    func recall() {
        // Relevant: d1, d2, d3 (d9 has grade 0). Top 2 of d9, d3, d1: only d3 → 1/3. Top 10: d3, d1 → 2/3.
        let ranking = ["d9", "d3", "d1"]
        #expect(abs(RetrievalMetrics.recall(ranking: ranking, grades: Self.grades, cutoff: 2) - 1.0 / 3) < 1e-12)
        #expect(abs(RetrievalMetrics.recall(ranking: ranking, grades: Self.grades, cutoff: 10) - 2.0 / 3) < 1e-12)
        #expect(RetrievalMetrics.recall(ranking: ranking, grades: ["d9": 0], cutoff: 10) == 0)
    }

    @Test("Given a ranking, when the reciprocal rank is computed, then it is 1 over the first relevant rank within 10, else 0")
    func reciprocalRank() {
        // First relevant (d2) at rank 3 → 1/3.
        #expect(abs(RetrievalMetrics.reciprocalRank(ranking: ["x", "d9", "d2", "d1"], grades: Self.grades, cutoff: 10) - 1.0 / 3) < 1e-12)
        // First relevant at rank 11 → beyond the cut-off → 0.
        let late = (1...10).map { "x\($0)" } + ["d1"]
        #expect(RetrievalMetrics.reciprocalRank(ranking: late, grades: Self.grades, cutoff: 10) == 0)
        #expect(RetrievalMetrics.reciprocalRank(ranking: [], grades: Self.grades, cutoff: 10) == 0)
    }

    @Test("Given per-query scores, when averaged, then each metric is the plain mean over the queries given")
    func averages() {
        // Query A: d1 at rank 1 of one relevant → nDCG 1, R@10 1, R@100 1, RR 1.
        // Query B: nothing retrieved → all 0 (counted, as trec_eval -c).
        // Means: 0.5 each, over 2 queries.
        let a = QueryMetrics(ranking: ["d1"], grades: ["d1": 2])
        let b = QueryMetrics(ranking: [], grades: ["d7": 1])
        let mean = MetricAverages([a, b])
        #expect(mean.queries == 2)
        #expect(mean.means == QueryMetrics(ndcg10: 0.5, recall10: 0.5, recall100: 0.5, reciprocalRank10: 0.5))
    }

    @Test("Given BEIR queries and qrels, when parsed, then every query and grade is kept and unjudged queries are not evaluated")
    func parseCollection() throws {
        let queries = """
            {"_id": "q1", "text": "first query", "metadata": {"x": 1}}

            {"_id": "q2", "text": "second"}
            {"_id": "q3", "text": "never judged"}
            """
        let qrels = "query-id\tcorpus-id\tscore\r\nq1\td1\t2\r\nq1\td2\t0\nq2\td5\t1\n"
        let collection = try TestCollection.parse(queriesJSONL: Array(queries.utf8), qrelsTSV: Array(qrels.utf8))
        #expect(collection.queries.map(\.id) == ["q1", "q2", "q3"])
        #expect(collection.queries[0].text == "first query")
        #expect(collection.judgments == ["q1": ["d1": 2, "d2": 0], "q2": ["d5": 1]])
        #expect(collection.judgedQueries.map(\.id) == ["q1", "q2"])
    }

    @Test("Given a malformed qrels or queries line, when parsed, then the error names the line and not its text")
    func malformedInput() {
        let qrels = coreError { _ = try TestCollection.parse(queriesJSONL: [], qrelsTSV: Array("q1\td1\tsecret-grade\n".utf8)) }
        #expect(qrels?.message.contains("line 1") == true)
        #expect(qrels?.message.contains("secret") == false)
        let queries = coreError {
            _ = try TestCollection.parse(queriesJSONL: Array("{\"_id\":\"q\",\"text\":\"a\"}\n{\"text\":\"secret\"}".utf8), qrelsTSV: [])
        }
        #expect(queries?.message.contains("line 2") == true)
        #expect(queries?.message.contains("secret") == false)
    }
}
