#!/usr/bin/env python3
"""Peers for Benchmarks/bench-query: the same vectors and texts as Cairn's snapshot, searched by
faiss-cpu (dense, IndexFlatIP) and by bm25s and tantivy (lexical). Prints one JSON object.

  bench_query_peers.py dense --vectors V.f32 --queries Q.f32 --dimension 384 --threads 1 2
  bench_query_peers.py lexical --corpus corpus.jsonl --replicate N --queries queries.jsonl

Dense: per-query IndexFlatIP.search of one query vector for the 100 best (Cairn's candidate
list for k = 10), with faiss.omp_set_num_threads(T). With --approximate: also IndexHNSWFlat
(M = 32, efConstruction 40) at efSearch 16 … 512 and IndexScalarQuantizer (8 bit, a flat scan
of codes), each with its recall@10 against IndexFlatIP and its per-query top-10 time on T threads (the
last --threads value), so that Cairn's narrowed search is compared at equal recall. Lexical: the corpus replicated by Cairn's
rule (chunk i = document i % D, copy i // D; text = title and text), top-10 per query, one
query at a time, query tokenisation included; tantivy also loads the 10 hits' stored ids.
"""
import argparse
import json
import re
import sys
import time

import numpy as np


def percentile(values, fraction):
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(np.ceil(fraction * len(ordered))) - 1))
    return ordered[rank]


def timed(calls):
    """Per-call milliseconds of `calls` (callables), after ten unmeasured warm-up calls."""
    for call in calls[:10]:
        call()
    times = []
    for call in calls:
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return {"p50_ms": percentile(times, 0.5), "p99_ms": percentile(times, 0.99)}


def dense(args):
    import faiss

    vectors = np.fromfile(args.vectors, dtype="<f4").reshape(-1, args.dimension)
    queries = np.fromfile(args.queries, dtype="<f4").reshape(-1, args.dimension)
    index = faiss.IndexFlatIP(args.dimension)
    index.add(vectors)
    result = {"chunks": int(vectors.shape[0]), "queries": int(queries.shape[0]), "faiss": faiss.__version__}
    for threads in args.threads:
        faiss.omp_set_num_threads(threads)
        rows = [queries[i : i + 1] for i in range(queries.shape[0])]
        result[f"faiss_flatip_{threads}"] = timed([lambda q=q: index.search(q, 100) for q in rows])
    if args.approximate:
        threads = args.threads[-1]
        faiss.omp_set_num_threads(threads)
        rows = [queries[i : i + 1] for i in range(queries.shape[0])]
        _, exact = index.search(queries, 10)

        def recall(found):
            return float(np.mean([len(set(f) & set(e)) / 10 for f, e in zip(found, exact)]))

        start = time.perf_counter()
        hnsw = faiss.IndexHNSWFlat(args.dimension, 32, faiss.METRIC_INNER_PRODUCT)
        hnsw.add(vectors)
        result["hnsw_build_seconds"] = time.perf_counter() - start
        sweep = []
        for ef in (16, 32, 64, 128, 256, 512):
            hnsw.hnsw.efSearch = ef
            _, found = hnsw.search(queries, 10)
            sweep.append(dict(timed([lambda q=q: hnsw.search(q, 10) for q in rows]), ef_search=ef, recall_at_10=recall(found)))
        result["hnsw"] = sweep
        start = time.perf_counter()
        sq8 = faiss.IndexScalarQuantizer(args.dimension, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        sq8.train(vectors)
        sq8.add(vectors)
        result["sq8_build_seconds"] = time.perf_counter() - start
        _, found = sq8.search(queries, 10)
        result["sq8"] = dict(timed([lambda q=q: sq8.search(q, 10) for q in rows]), recall_at_10=recall(found))
        result["approximate_threads"] = threads
    return result


def replicated_texts(corpus, count):
    documents = []
    with open(corpus, encoding="utf-8") as handle:
        if corpus.endswith(".json"):
            documents = [(c.get("title", ""), c.get("content", "")) for c in json.load(handle)]
        else:
            for line in handle:
                row = json.loads(line)
                documents.append((row.get("title", ""), row.get("text", "")))
    return [documents[i % len(documents)] for i in range(count)]


def read_queries(path):
    with open(path, encoding="utf-8") as handle:
        if path.endswith(".json"):
            return [c["title"] for c in json.load(handle)]
        return [json.loads(line)["text"] for line in handle if line.strip()]


def lexical(args):
    import bm25s
    import tantivy

    chunks = replicated_texts(args.corpus, args.replicate)
    queries = read_queries(args.query_file)
    result = {"chunks": len(chunks), "queries": len(queries)}

    start = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([f"{t}\n{x}" for t, x in chunks], stopwords="en", show_progress=False),
                    show_progress=False)
    build = time.perf_counter() - start

    def bm25s_query(text):
        tokens = bm25s.tokenize(text, stopwords="en", return_ids=False, show_progress=False)
        if tokens and tokens[0]:
            retriever.retrieve(tokens, k=min(10, len(chunks)), show_progress=False, n_threads=1)

    result["bm25s"] = dict(timed([lambda q=q: bm25s_query(q) for q in queries]), index_seconds=build)

    start = time.perf_counter()
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True)
    builder.add_text_field("title")
    builder.add_text_field("body")
    index = tantivy.Index(builder.build())
    writer = index.writer(heap_size=256_000_000, num_threads=1)
    for i, (title, text) in enumerate(chunks):
        writer.add_document(tantivy.Document(id=str(i), title=title, body=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()
    build = time.perf_counter() - start

    def tantivy_query(text):
        # Words only, lower case: the query parser's syntax (AND, field:, quotes) never applies.
        words = " ".join(re.findall(r"\w+", text.lower()))
        if not words:
            return
        hits = searcher.search(index.parse_query(words, ["title", "body"]), 10).hits
        for _, address in hits:
            searcher.doc(address)["id"]

    result["tantivy"] = dict(timed([lambda q=q: tantivy_query(q) for q in queries]), index_seconds=build)
    return result


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    d = sub.add_parser("dense")
    d.add_argument("--vectors", required=True)
    d.add_argument("--queries", required=True)
    d.add_argument("--dimension", type=int, default=384)
    d.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    d.add_argument("--approximate", action="store_true")
    lx = sub.add_parser("lexical")
    lx.add_argument("--corpus", required=True)
    lx.add_argument("--replicate", type=int, required=True)
    lx.add_argument("--queries", dest="query_file", required=True)
    args = parser.parse_args()
    result = dense(args) if args.what == "dense" else lexical(args)
    json.dump(result, sys.stdout, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
