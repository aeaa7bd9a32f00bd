#!/usr/bin/env python3
"""Compares hybrid fusion methods on several test collections at once, by replaying Cairn's two
ranked parts (tune_ranking.Replay: the snapshot's own FTS5 bm25 and stored vectors) and fusing
them in Python. Chooses by the mean over collections, with the standard error of each method's
per-query difference from a baseline, not by the best single collection.

    cairn eval COLLECTION --keep        # for each collection; prints the kept folder
    "$CAIRN_PYTHON" Benchmarks/tools/fusion_study.py \\
        NAME=BEIR_DIR=KEPT/data/current/index.sqlite[=CORPUS] ... [--baseline NAME] [--k 10]

Every method here ranks from candidate lists of a fixed depth (DEPTH), so its answer does not
depend on k; "list-minmax@k" is the old rule (min-max over max(100, 10k) candidates) for the
comparison. Prints a Markdown table: nDCG@10 per collection, the mean, and the mean per-query
difference from the baseline with its standard error, per collection.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tune_ranking import DEFAULT, Replay, zscore  # noqa: E402
from bench_quality_peers import load_collection, ndcg  # noqa: E402

DEPTH = 1000
FLOOR = 0.2


def ranked_ids(scores, ids, candidates, k):
    """The best k of `candidates` (row indices) by score, ties by id bytes."""
    order = sorted(candidates, key=lambda r: (-scores[r], ids[r].encode()))
    return [ids[r] for r in order[:k]]


def minmax(values):
    lo, hi = values.min(), values.max()
    return np.ones_like(values) if hi - lo <= 0 else (values - lo) / (hi - lo)


WINDOW_WORDS, WINDOW_STEP, MODEL_TOKENS = 180, 150, 256


def window_vectors(model, docs, tokenizer):
    """For each record whose embedded text (title, blank line, text) exceeds the model's 256
    tokens: vectors of its later windows, title + words [i*150, i*150 + 180) for i >= 1 (the
    first window is the record's own vector). Returns (matrix, owner id per row); cached."""
    import hashlib
    texts, owners = [], []
    for doc_id, title, text in docs:
        whole = text if not title else title + "\n\n" + text
        if len(tokenizer.encode(whole).ids) <= MODEL_TOKENS:
            continue
        words = text.split()
        for start in range(WINDOW_STEP, max(WINDOW_STEP, len(words) - (WINDOW_WORDS - WINDOW_STEP)), WINDOW_STEP):
            part = " ".join(words[start:start + WINDOW_WORDS])
            texts.append(part if not title else title + "\n\n" + part)
            owners.append(doc_id)
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:24]
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "cairn", "quality-ref")
    path = os.path.join(cache, f"windows-{key}.npy")
    if os.path.exists(path):
        return np.load(path), owners
    print(f"fusion_study: embedding {len(texts)} windows", file=sys.stderr)
    matrix = model.embed(texts) if texts else np.zeros((0, 384), dtype=np.float32)
    os.makedirs(cache, exist_ok=True)
    np.save(path, matrix)
    return matrix, owners


class Parts:
    """One query's two parts over every row: lexical score (0 when not matched) and cosine
    (with windows: the best of the record's own vector and its windows')."""

    def __init__(self, replay, text, qvec, windows=None, max_tokens=32, title_weight=DEFAULT["title_weight"]):
        n = len(replay.ids)
        self.lexical_list = replay.lexical(text, dict(DEFAULT, max_tokens=max_tokens, title_weight=title_weight), n)  # every match, best first
        self.lexical = np.zeros(n)
        for score, _, row in self.lexical_list:
            self.lexical[row] = score
        self.dense = (replay.matrix @ qvec).astype(np.float64)
        if windows is not None:
            matrix, owner_rows = windows
            if len(owner_rows):
                np.maximum.at(self.dense, owner_rows, (matrix @ qvec).astype(np.float64))
        self.dense_order = np.argsort(-self.dense, kind="stable")

    def lexical_rows(self, depth):
        return [row for _, _, row in self.lexical_list[:depth]]

    def dense_rows(self, depth, floor=FLOOR):
        rows = self.dense_order[:depth]
        return [int(r) for r in rows if self.dense[r] >= floor]


def list_minmax(parts, ids, k, weight, depth):
    """Cairn's fusion until 2026-11: min-max over each candidate list, a missing part counts 0."""
    fused = {}
    lex_rows, dense_rows = parts.lexical_rows(depth), parts.dense_rows(depth)
    if dense_rows:
        d = minmax(parts.dense[dense_rows])
        for r, v in zip(dense_rows, d):
            fused[r] = weight * v
    if lex_rows:
        l = minmax(parts.lexical[lex_rows])
        for r, v in zip(lex_rows, l):
            fused[r] = fused.get(r, 0.0) + (1 - weight) * v
    scores = np.zeros(len(ids))
    for r, v in fused.items():
        scores[r] = v
    return ranked_ids(scores, ids, list(fused), k)


def union(parts, depth, floor=FLOOR):
    return sorted(set(parts.lexical_rows(depth)) | set(parts.dense_rows(depth, floor)))


def convex(lexical_part, dense_part, weight):
    return (1 - weight) * lexical_part + weight * dense_part


def lexical_over_max(parts):
    top = parts.lexical.max()
    return parts.lexical / top if top > 0 else parts.lexical


def dense_minmax_all(parts):
    return minmax(parts.dense)


def dense_from(parts, anchor):
    """(cos - anchor) / (max - anchor), below the anchor 0: needs only the best cosine, so an
    approximate index that finds the top finds the same normalisation."""
    top = parts.dense.max()
    if top <= anchor:
        return np.zeros_like(parts.dense)
    return np.clip((parts.dense - anchor) / (top - anchor), 0, None)


def lexical_minmax_matched(parts):
    """Min-max over the matched rows; unmatched rows 0."""
    out = np.zeros_like(parts.lexical)
    matched = parts.lexical > 0
    if matched.any():
        values = parts.lexical[matched]
        lo, hi = values.min(), values.max()
        out[matched] = 1.0 if hi - lo <= 0 else (values - lo) / (hi - lo)
    return out


def dbsf(values, rows):
    """Distribution-based score fusion's normalisation: mean ± 3 sd of the candidates' scores."""
    out = np.zeros(len(values))
    if not rows:
        return out
    v = values[rows]
    lo, hi = v.mean() - 3 * v.std(), v.mean() + 3 * v.std()
    if hi - lo <= 0:
        out[rows] = 1.0
        return out
    out[rows] = np.clip((v - lo) / (hi - lo), 0, 1)
    return out


def rrf(parts, ids, k, constant, depth):
    scores = np.zeros(len(ids))
    for rank, r in enumerate(parts.lexical_rows(depth)):
        scores[r] += 1 / (constant + rank + 1)
    for rank, r in enumerate(parts.dense_rows(depth)):
        scores[r] += 1 / (constant + rank + 1)
    return ranked_ids(scores, ids, union(parts, depth), k)


def methods():
    out = {}
    for k_request in (10, 100):
        out[f"list-minmax@k={k_request} w0.6"] = lambda p, ids, k, kr=k_request: list_minmax(p, ids, k, 0.6, max(100, 10 * kr))
    for depth in (100, 200, 300, 1000):
        out[f"list-minmax depth {depth} w0.6"] = lambda p, ids, k, d=depth: list_minmax(p, ids, k, 0.6, d)
    for w in (0.4, 0.5, 0.6, 0.7):
        out[f"lex/max + dense minmax(all) w{w}"] = lambda p, ids, k, w=w: ranked_ids(
            convex(lexical_over_max(p), dense_minmax_all(p), w), ids, union(p, DEPTH), k)
        for anchor in (0.0, 0.1, FLOOR):
            out[f"lex/max + dense from {anchor} w{w}"] = lambda p, ids, k, w=w, a=anchor: ranked_ids(
                convex(lexical_over_max(p), dense_from(p, a), w), ids, union(p, DEPTH), k)
        out[f"lex minmax(matched) + dense minmax(all) w{w}"] = lambda p, ids, k, w=w: ranked_ids(
            convex(lexical_minmax_matched(p), dense_minmax_all(p), w), ids, union(p, DEPTH), k)
        out[f"z(all rows) w{w}"] = lambda p, ids, k, w=w: ranked_ids(
            convex(zscore(p.lexical), zscore(p.dense), w), ids, union(p, DEPTH), k)
        for depth in (50, 100, 200, 1000):
            out[f"dbsf depth {depth} w{w}"] = lambda p, ids, k, w=w, d=depth: ranked_ids(
                convex(dbsf(p.lexical, p.lexical_rows(d)), dbsf(p.dense, p.dense_rows(d)), w), ids, union(p, d), k)
            out[f"dbsf depth {depth} no floor w{w}"] = lambda p, ids, k, w=w, d=depth: ranked_ids(
                convex(dbsf(p.lexical, p.lexical_rows(d)), dbsf(p.dense, p.dense_rows(d, -1)), w), ids, union(p, d, -1), k)
        out[f"dbsf lexical matched, dense all rows w{w}"] = lambda p, ids, k, w=w: ranked_ids(
            convex(dbsf(p.lexical, p.lexical_rows(len(p.lexical_list))), dbsf(p.dense, list(range(len(p.dense)))), w),
            ids, union(p, DEPTH), k)
    for w in (0.6, 0.65, 0.7, 0.75, 0.8):
        out[f"z(all rows) depth 100 w{w}"] = lambda p, ids, k, w=w: ranked_ids(
            convex(zscore(p.lexical), zscore(p.dense), w), ids, union(p, 100), k)
    for w in (0.65, 0.75, 0.8):
        out[f"lex/max + dense minmax(all) w{w}"] = lambda p, ids, k, w=w: ranked_ids(
            convex(lexical_over_max(p), dense_minmax_all(p), w), ids, union(p, DEPTH), k)
        out[f"z(all rows) w{w}"] = lambda p, ids, k, w=w: ranked_ids(
            convex(zscore(p.lexical), zscore(p.dense), w), ids, union(p, DEPTH), k)
    for constant in (10, 60):
        out[f"rrf c={constant} depth 1000"] = lambda p, ids, k, c=constant: rrf(p, ids, k, c, DEPTH)
    out["lexical"] = lambda p, ids, k: [ids[r] for r in p.lexical_rows(k)]
    out["dense"] = lambda p, ids, k: [ids[r] for r in p.dense_rows(k)]
    return out


def main():
    from embed_ref import MiniLM
    from tokenize_ref import default_model_dir
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("collections", nargs="+", help="NAME=BEIR_DIR=INDEX[=CORPUS]")
    ap.add_argument("--baseline", default="list-minmax@k=10 w0.6")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--only", action="append", help="methods whose name contains this (repeatable)")
    ap.add_argument("--max-tokens", type=int, default=32, help="query words kept (Cairn's maximumQueryTokens)")
    ap.add_argument("--title-weight", type=float, default=DEFAULT["title_weight"],
                    help="BM25 title weight (docs/quality.md's fusion table: 2, the default then)")
    ap.add_argument("--windows", action="store_true",
                    help="score long records by their best window (embedded with the numpy reference)")
    args = ap.parse_args()
    model = MiniLM(default_model_dir())
    table = methods()
    if args.only:
        table = {n: f for n, f in table.items() if n == args.baseline or any(o in n for o in args.only)}
    per = {}  # method -> collection -> [ndcg per query]
    names = []
    for spec in args.collections:
        name, folder, index, *corpus = spec.split("=")
        names.append(name)
        queries, qrels, docs = load_collection(folder, corpus[0] if corpus else os.path.join(folder, "corpus.jsonl"), "test")
        replay = Replay(index)
        windows = None
        if args.windows:
            from tokenize_ref import load_tokenizer
            tokenizer = load_tokenizer(default_model_dir())
            tokenizer.no_truncation()
            matrix, owners = window_vectors(model, docs, tokenizer)
            row_of = {doc_id: row for row, doc_id in enumerate(replay.ids)}
            windows = (matrix, np.array([row_of[o] for o in owners], dtype=np.int64))
        qvecs = model.embed([q["text"] for q in queries])
        print(f"fusion_study: {name}: {len(queries)} queries, {len(replay.ids)} rows", file=sys.stderr)
        for q, v in zip(queries, qvecs):
            parts = Parts(replay, q["text"], v.astype(np.float32), windows, args.max_tokens, args.title_weight)
            for method, fuse in table.items():
                per.setdefault(method, {}).setdefault(name, []).append(ndcg(fuse(parts, replay.ids, args.k), qrels[q["_id"]], 10))
    base = per[args.baseline]
    print("| method | " + " | ".join(names) + " | mean | Δ vs baseline per collection (SE) |")
    print("|---|" + "---:|" * (len(names) + 1) + "---|")
    for method, scores in per.items():
        means = [100 * np.mean(scores[n]) for n in names]
        deltas = []
        for n in names:
            diff = 100 * (np.array(scores[n]) - np.array(base[n]))
            se = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else 0.0
            deltas.append(f"{diff.mean():+.2f} ({se:.2f})")
        print(f"| {method} | " + " | ".join(f"{m:.2f}" for m in means) + f" | {np.mean(means):.2f} | " + ", ".join(deltas) + " |")


if __name__ == "__main__":
    main()
