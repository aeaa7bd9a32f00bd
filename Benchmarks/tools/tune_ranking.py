#!/usr/bin/env python3
"""Replays Cairn's ranking (CairnIndex SearchIndex + RankFusion + LexicalQuery) in Python on an
installed snapshot, to try RankingConfiguration values on a test collection without rebuilding.

The lexical side runs the very SQL Cairn runs (FTS5 bm25 with column weights) on the snapshot's
own FTS5 table; the dense side uses the snapshot's stored vectors and query vectors from the
numpy reference model (embed_ref.py), which agree with Cairn's to float rounding. Check it first:
with the defaults it must reproduce `cairn eval`'s table (to rounding).

    cairn eval COLLECTION --install-locally --keep    # prints the kept folder
    "$CAIRN_PYTHON" Benchmarks/tools/tune_ranking.py --index KEPT/data/current/index.sqlite \
        BEIR_DIR [--corpus FILE] [--k 100] [--grid]
"""
import argparse
import json
import os
import sqlite3
import sys
import unicodedata

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "Reference"))
from bench_quality_peers import load_collection, mean_metrics, query_metrics  # noqa: E402

STOP = set("""a an and are as at be by can do does for from how i if in is it its me my of on or our should so
that the their there this to was we what when where which who why will with you your""".split())


def tokens(text):
    out, seen, cur = [], set(), []
    def flush():
        if cur:
            t = "".join(cur).lower()
            cur.clear()
            if t not in seen:
                seen.add(t)
                out.append(t)
    for ch in text:
        cat = unicodedata.category(ch)
        if ch.isalpha() or cat in ("Nd", "Nl", "No", "Mn", "Mc", "Me"):
            cur.append(ch)
        else:
            flush()
    flush()
    return out


def phrase(token):
    return '"' + token.replace('"', '""') + '"'


def match_expression(text, stop, max_tokens=32, document_count=None, rows=0):
    """Cairn's LexicalQuery: words, stop words dropped unless nothing remains, the first
    `max_tokens`; then SearchIndex.informative: a word in half the rows or more is dropped unless
    nothing else remains (`document_count(token)` gives its rows)."""
    toks = tokens(text)
    content = [t for t in toks if t not in stop]
    if content:
        toks = content
    toks = toks[:max(1, max_tokens)]
    if not toks:
        return None
    if document_count is not None:
        kept = [t for t in toks if 2 * document_count(t) < rows]
        toks = kept or toks
    return " OR ".join(phrase(t) for t in toks)


def zscore(values):
    """(values - mean) / population sd over every row; 0 when they do not spread."""
    sd = values.std()
    return np.zeros_like(values) if sd <= 0 else (values - values.mean()) / sd


def ordered(items):  # (score, id, row): higher score first, ties by id bytes
    return sorted(items, key=lambda x: (-x[0], x[1].encode()))


class Replay:
    def __init__(self, index_path):
        self.db = sqlite3.connect(f"file:{index_path}?mode=ro&immutable=1", uri=True)
        rows = self.db.execute("SELECT rowid, id, embedding FROM chunks ORDER BY rowid").fetchall()
        self.rowids = {r[0]: i for i, r in enumerate(rows)}
        self.ids = [r[1] for r in rows]
        self.matrix = np.stack([np.frombuffer(r[2], dtype="<f4") for r in rows])

    def lexical(self, text, cfg, limit):
        def document_count(token):
            return self.db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (phrase(token),)).fetchone()[0]
        expr = match_expression(text, cfg["stop"], int(cfg["max_tokens"]), document_count, len(self.ids))
        if expr is None:
            return []
        found = self.db.execute("SELECT rowid, bm25(chunks_fts, ?, ?) FROM chunks_fts WHERE chunks_fts MATCH ?",
                                (cfg["title_weight"], 1.0, expr)).fetchall()
        return ordered([(-s, self.ids[self.rowids[r]], self.rowids[r]) for r, s in found])[:limit]

    def dense(self, qvec, cfg, limit):
        scores = self.matrix @ qvec
        top = np.sort(scores)[::-1][:cfg["window"]]
        degenerate = len(top) >= 2 and top.min() > cfg["degenerate_min"] and top.max() - top.min() < cfg["spread"]
        keep = np.nonzero(scores >= cfg["floor"])[0]
        return ordered([(float(scores[i]), self.ids[i], i) for i in keep])[:limit], degenerate

    def search(self, text, qvec, mode, k, cfg):
        depth = 100 if cfg["limit"] is None else int(cfg["limit"])  # RankingConfiguration.candidateDepth
        lex_all = self.lexical(text, cfg, len(self.ids)) if mode != "dense" else []
        dense, degenerate = self.dense(qvec, cfg, depth if mode != "dense" else k) if mode != "lexical" else ([], False)
        if mode == "lexical":
            ranked = lex_all
        elif mode == "dense":
            ranked = dense
        elif degenerate and cfg["fallback"]:
            ranked = lex_all
        elif mode == "hybrid":  # RankFusion.standardized: z over every row, 0 for no match
            lexical = np.zeros(len(self.ids))
            for s, _, r in lex_all:
                lexical[r] = s
            cosines = (self.matrix @ qvec).astype(np.float64)
            z_lexical, z_dense = zscore(lexical), zscore(cosines)
            listed = {r for _, _, r in lex_all[:depth]}
            # A candidate only the dense list holds counts as lexically 0 (as in Swift), even
            # when it matched below the lexical list's depth.
            zero = -lexical.mean() / lexical.std() if lexical.std() > 0 else 0.0
            def fused(r):
                return (1 - cfg["dense_weight"]) * (z_lexical[r] if r in listed else zero) + cfg["dense_weight"] * z_dense[r]
            ranked = ordered([(fused(r), self.ids[r], r) for r in listed | {r for _, _, r in dense}])
        else:
            fused = {}
            for rank, (s, i, r) in enumerate(dense):
                fused[r] = [1 / (cfg["rrf"] + rank + 1), i]
            for rank, (s, i, r) in enumerate(lex_all[:depth]):
                fused.setdefault(r, [0.0, i])[0] += 1 / (cfg["rrf"] + rank + 1)
            ranked = ordered([(v[0], v[1], r) for r, v in fused.items()])
        return [i for _, i, _ in ranked[:k]]


DEFAULT = dict(title_weight=3.0, floor=0.2, dense_weight=0.8, window=20, degenerate_min=0.88, spread=0.06,
               rrf=60.0, stop=STOP, fallback=True, limit=None, max_tokens=32)


def evaluate(replay, queries, qrels, qvecs, cfg, k, modes=("lexical", "dense", "hybrid", "rrf")):
    out = {}
    for mode in modes:
        rows = [query_metrics(replay.search(q["text"], v, mode, k, cfg), qrels[q["_id"]]) for q, v in zip(queries, qvecs)]
        out[mode] = mean_metrics(rows)
    return out


def main():
    from embed_ref import MiniLM
    from tokenize_ref import default_model_dir
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--index", required=True)
    ap.add_argument("--corpus")
    ap.add_argument("--split", default="test")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--set", action="append", default=[], help="key=value over the defaults (numbers; stop=bm25s)")
    ap.add_argument("--grid", action="store_true", help="try the grid of docs/quality.md")
    args = ap.parse_args()
    queries, qrels, _ = load_collection(args.folder, args.corpus or os.path.join(args.folder, "corpus.jsonl"), args.split)
    replay = Replay(args.index)
    qvecs = MiniLM(default_model_dir()).embed([q["text"] for q in queries])
    cfg = dict(DEFAULT)
    for item in args.set:
        key, value = item.split("=", 1)
        if key == "stop":  # "bm25s": bm25s's English list instead of Cairn's
            from bm25s.stopwords import STOPWORDS_EN
            cfg[key] = set(STOPWORDS_EN) if value == "bm25s" else STOP
        else:
            cfg[key] = None if value == "none" else float(value)
    configs = [("given", cfg)]
    if args.grid:
        for tw in (1.0, 2.0, 3.0):
            for dw in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
                for floor in (0.0, 0.25):
                    configs.append((f"tw={tw} dw={dw} floor={floor}", dict(cfg, title_weight=tw, dense_weight=dw, floor=floor)))
    for name, c in configs:
        result = evaluate(replay, queries, qrels, qvecs, c, args.k, ("lexical", "dense", "hybrid", "rrf") if name == "given" else ("hybrid",))
        print(json.dumps({"config": name, **{m: {k: round(100 * v, 2) for k, v in r.items()} for m, r in result.items()}}))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
