#!/usr/bin/env python3
"""Reference points for `cairn eval`: BM25 from bm25s and exact dense search with the numpy
reference of all-MiniLM-L6-v2 (embed_ref.py), scored by the same metric formulas as Cairn's
Swift code (Sources/CairnCore/Evaluation/RetrievalMetrics.swift).

- BM25: bm25s, Lucene variant, k1 = 0.9, b = 0.4, English stop words, Snowball stemming
  (PyStemmer); a document is "title text" (BEIR's convention).
- Dense: every document embedded as Cairn embeds a chunk (title, blank line, text; title
  omitted when empty; 256 tokens), the query as is; cosine against all documents, no floor.
  Document vectors are cached in ${XDG_CACHE_HOME:-~/.cache}/cairn/quality-ref/.
- Reference fusion: 0.4 x bm25s score / its per-query maximum + 0.6 x the dense cosine min-max
  normalised over all documents (issue 16's bar for Cairn's hybrid).
- Metrics: nDCG@10 (linear gains, ideal from all judged grades > 0), Recall@10, Recall@100,
  MRR@10, averaged over the queries with at least one judgment > 0; a repeated id counts once.

Documents with empty text are left out, as `cairn eval` leaves them out (they cannot be published).
Prints one JSON object: {collection, documents, modes: [{mode, queries, ndcg@10, ...}]}.

    . scripts/lib/python-env.sh
    cairn_venv numpy==2.4.6 tokenizers==0.23.3 bm25s==0.3.16 PyStemmer==3.1.0
    "$CAIRN_PYTHON" Benchmarks/peers/bench_quality_peers.py BEIR_DIR [--corpus FILE] [--split test]
    "$CAIRN_PYTHON" Benchmarks/peers/bench_quality_peers.py --self-test
"""
import argparse
import hashlib
import json
import math
import os
import sys

# The reference model and tokenizer are the test oracles (Tests/Reference/).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "Reference"))


# ---- metrics (the same definitions as RetrievalMetrics.swift) ----

def _unique(ranking, cutoff):
    seen, out = set(), []
    for doc in ranking:
        if len(out) >= cutoff:
            break
        if doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out


def _dcg(gains, cutoff):
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains[:cutoff]))


def ndcg(ranking, grades, cutoff):
    ideal = _dcg(sorted((g for g in grades.values() if g > 0), reverse=True), cutoff)
    if ideal <= 0:
        return 0.0
    return _dcg([max(0, grades.get(d, 0)) for d in _unique(ranking, cutoff)], cutoff) / ideal


def recall(ranking, grades, cutoff):
    relevant = sum(1 for g in grades.values() if g > 0)
    if relevant == 0:
        return 0.0
    return sum(1 for d in _unique(ranking, cutoff) if grades.get(d, 0) > 0) / relevant


def reciprocal_rank(ranking, grades, cutoff):
    for i, d in enumerate(_unique(ranking, cutoff)):
        if grades.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def query_metrics(ranking, grades):
    return {"ndcg@10": ndcg(ranking, grades, 10), "recall@10": recall(ranking, grades, 10),
            "recall@100": recall(ranking, grades, 100), "mrr@10": reciprocal_rank(ranking, grades, 10)}


def mean_metrics(rows):
    n = max(1, len(rows))
    return {key: sum(r[key] for r in rows) / n for key in ("ndcg@10", "recall@10", "recall@100", "mrr@10")}


def self_test():
    """The hand-computed values of Tests/CairnCoreTests/EvaluationTests.swift."""
    grades = {"d1": 3, "d2": 1, "d3": 2, "d9": 0}
    checks = [
        (ndcg(["d2", "d9", "d1", "x", "d3"], grades, 10), 0.6874847),
        (ndcg(["d3", "x", "d1"], grades, 2), 0.4692787),
        (ndcg(["d1", "d1", "d3"], grades, 2), 1.0),
        (recall(["d9", "d3", "d1"], grades, 2), 1 / 3),
        (recall(["d9", "d3", "d1"], grades, 10), 2 / 3),
        (reciprocal_rank(["x", "d9", "d2", "d1"], grades, 10), 1 / 3),
        (reciprocal_rank([f"x{i}" for i in range(10)] + ["d1"], grades, 10), 0.0),
    ]
    bad = [(got, want) for got, want in checks if abs(got - want) > 1e-6]
    print("metrics self-test", "passed" if not bad else f"FAILED {bad}")
    return not bad


# ---- collection ----

def load_collection(folder, corpus_path, split):
    queries = [json.loads(line) for line in open(os.path.join(folder, "queries.jsonl"), encoding="utf-8") if line.strip()]
    qrels = {}
    with open(os.path.join(folder, "qrels", f"{split}.tsv"), encoding="utf-8") as f:
        for n, line in enumerate(f):
            fields = line.rstrip("\r\n").split("\t")
            if (n == 0 and fields[0] == "query-id") or len(fields) != 3:
                continue
            qrels.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    docs = []
    if corpus_path.endswith(".jsonl"):
        for line in open(corpus_path, encoding="utf-8"):
            if line.strip():
                d = json.loads(line)
                docs.append((d["_id"], d.get("title") or "", d["text"]))
    else:
        for d in json.load(open(corpus_path, encoding="utf-8")):
            docs.append((d.get("id", d.get("_id")), d.get("title") or "", d.get("content", d.get("text"))))
    docs = [d for d in docs if d[2].strip()]
    judged = [q for q in queries if any(g > 0 for g in qrels.get(q["_id"], {}).values())]
    return judged, qrels, docs


# ---- peers ----

def run_bm25(docs, queries):
    """bm25s's rankings (its own top-k retrieval) and its score of every document per query."""
    import bm25s
    import numpy as np
    import Stemmer
    stemmer = Stemmer.Stemmer("english")
    corpus = [(title + " " + text).strip() for _, title, text in docs]
    retriever = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    texts = [q["text"] for q in queries]
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    k = min(100, len(docs))
    results, scores = retriever.retrieve(tokens, k=k, show_progress=False)
    ids = [d[0] for d in docs]
    # bm25s returns k documents even when fewer match: keep only positive scores.
    rankings = [[ids[j] for j, s in zip(row, srow) if s > 0] for row, srow in zip(results, scores)]
    words = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
    known = set(retriever.vocab_dict)
    every = np.zeros((len(queries), len(docs)), dtype=np.float64)
    for i, query_words in enumerate(words):
        query_words = [w for w in query_words if w in known]
        if query_words:
            every[i] = retriever.get_scores(query_words)
    return rankings, every


def run_dense(docs, queries, model_dir):
    import numpy as np
    from embed_ref import MiniLM
    model = MiniLM(model_dir)
    texts = [text if not title else title + "\n\n" + text for _, title, text in docs]
    key = hashlib.sha256(("\x00".join(texts) + model_dir).encode()).hexdigest()[:24]
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "cairn", "quality-ref")
    path = os.path.join(cache, f"{key}.npy")
    if os.path.exists(path):
        matrix = np.load(path)
    else:
        print(f"bench_quality_peers: embedding {len(texts)} documents with the numpy reference", file=sys.stderr)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = model.embed([texts[i] for i in order])
        matrix = np.empty_like(vectors)
        matrix[order] = vectors
        os.makedirs(cache, exist_ok=True)
        np.save(path, matrix)
    q = model.embed([x["text"] for x in queries])
    scores = (q @ matrix.T).astype(np.float64)
    return top_ids(scores, [d[0] for d in docs]), scores


def top_ids(scores, ids):
    """Each row's best 100 ids, higher score first (ties in document order)."""
    import numpy as np
    k = min(100, len(ids))
    out = []
    for row in scores:
        top = np.argsort(-row, kind="stable")[:k]
        out.append([ids[j] for j in top])
    return out


def reference_fusion(lexical, dense, lexical_weight=0.4, dense_weight=0.6):
    """The plain fusion issue 16 names as the bar: BM25 divided by its per-query maximum, dense
    min-max normalised over all documents, 0.4 / 0.6. Both arguments: queries x documents."""
    import numpy as np
    top = lexical.max(axis=1, keepdims=True)
    lexical_part = np.divide(lexical, top, out=np.zeros_like(lexical), where=top > 0)
    low, high = dense.min(axis=1, keepdims=True), dense.max(axis=1, keepdims=True)
    spread = high - low
    dense_part = np.divide(dense - low, spread, out=np.ones_like(dense), where=spread > 0)
    return lexical_weight * lexical_part + dense_weight * dense_part


def main():
    from tokenize_ref import default_model_dir
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--corpus")
    ap.add_argument("--split", default="test")
    ap.add_argument("--model-dir", default=default_model_dir())
    ap.add_argument("--per-query", help="write per-query JSONL here")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        sys.exit(0 if self_test() else 1)
    if not args.folder:
        ap.error("give BEIR_DIR or --self-test")
    corpus = args.corpus or os.path.join(args.folder, "corpus.jsonl")
    queries, qrels, docs = load_collection(args.folder, corpus, args.split)
    rows, per_query = [], []
    bm25_rankings, bm25_scores = run_bm25(docs, queries)
    dense_rankings, dense_scores = run_dense(docs, queries, args.model_dir)
    fused = top_ids(reference_fusion(bm25_scores, dense_scores), [d[0] for d in docs])
    for mode, rankings in (("bm25s", bm25_rankings), ("numpy-dense", dense_rankings), ("reference-fusion", fused)):
        scores = []
        for query, ranking in zip(queries, rankings):
            m = query_metrics(ranking, qrels[query["_id"]])
            scores.append(m)
            per_query.append({"query_id": query["_id"], "mode": mode, **m, "top10": ranking[:10]})
        rows.append({"mode": mode, "queries": len(scores), **mean_metrics(scores)})
    if args.per_query:
        with open(args.per_query, "w") as f:
            for entry in per_query:
                f.write(json.dumps(entry, sort_keys=True) + "\n")
    name = os.path.basename(os.path.normpath(args.folder))
    print(json.dumps({"collection": name, "documents": len(docs), "modes": rows}, indent=2))


if __name__ == "__main__":
    main()
