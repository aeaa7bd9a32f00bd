#!/usr/bin/env python3
"""Tries BM25's k1 and b for Cairn's lexical search on several test collections at once, without
rebuilding, and (--hybrid) what each setting does to Cairn's hybrid, since a lexical gain need not
survive fusion. Chooses by the mean over collections, with the standard error of each setting's
per-query difference from a baseline, not by the best single collection.

    cairn eval COLLECTION --keep        # for each collection; prints the kept folder
    "$CAIRN_PYTHON" Benchmarks/tools/bm25_study.py \\
        NAME=BEIR_DIR=KEPT/data/current/index.sqlite[=CORPUS] ... \\
        [--k1 1.2 1.5] [--b 0.75 0.4] [--baseline 1.2,0.75] [--hybrid] [--dense-weight 0.8]
        [--title-weight 3] [--idf fts5|lucene]

Lexical is a replica of `cairn_bm25` (BM25Function.swift: FTS5's bm25 formula, k1 and b given) with
Cairn's query rules (LexicalQuery.searchTokens, SearchIndex.informative, one phrase per word, title
weight 3 by default). FTS5's own bm25() cannot take k1 and b, so the scores are computed here from
the snapshot's FTS5 data: each phrase's rows and weighted frequencies (`fts5vocab`, the words
stemmed by a scratch FTS5 table with the index's tokenizer), row lengths (`%_docsize`), and the row
count and total length (`%_data` record 1). The virtual tables are made on a copy of the index in a
temporary directory: the given file is only read. --idf lucene swaps FTS5's
log((N - n + 0.5) / (n + 0.5)), 1e-6 when <= 0, for Lucene's log(1 + (N - n + 0.5) / (n + 0.5)).

Hybrid replays SearchIndex.search's: z-scores over every row (RankFusion.standardized),
(1 - w) x lexical + w x dense (w = --dense-weight, Cairn's 0.8), candidates the best 100 lexical
matches and the best 100 cosines >= 0.2 (a candidate only the dense list holds counts lexically
0), lexical alone when the dense scores are degenerate. The dense side is the snapshot's stored vectors against query vectors from the
numpy reference model (embed_ref.py). Ties: chunk id bytes.

Prints Markdown: nDCG@10 per collection and the mean for every (k1, b) and mode, then each
setting's mean per-query difference from the baseline (same mode) with its standard error, per
collection and over collections (SE sqrt(sum of SE^2) / n).
"""
import argparse
import math
import os
import re
import shutil
import sqlite3
import sys
import tempfile
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "Tests", "Reference"))
sys.path.insert(0, HERE)
from bench_quality_peers import load_collection, ndcg  # noqa: E402
from tune_ranking import STOP, tokens  # noqa: E402

# RankingConfiguration's defaults, other than k1 and b.
CONTENT_WEIGHT = 1.0
MAX_TOKENS = 32
DEPTH, FLOOR = 100, 0.2
WINDOW, DEGENERATE_MIN, DEGENERATE_SPREAD = 20, 0.88, 0.06
K = 10


def varints(blob):
    """The SQLite varints packed in `blob` (FTS5's averages record and %_docsize rows)."""
    values, i = [], 0
    while i < len(blob):
        value = 0
        for position in range(9):
            byte = blob[i]
            i += 1
            if position == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values


class Snapshot:
    """A temporary copy of one index, with what cairn_bm25 reads held in memory."""

    def __init__(self, index_path, title_weight):
        self.title_weight = title_weight
        self.scratch = tempfile.TemporaryDirectory(prefix="bm25_study-")
        copy = os.path.join(self.scratch.name, "index.sqlite")
        shutil.copyfile(index_path, copy)
        self.db = sqlite3.connect(copy)
        schema = self.db.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()[0]
        tokenizer = re.search(r"tokenize\s*=\s*('(?:[^']|'')*')", schema).group(1)
        self.db.execute("CREATE VIRTUAL TABLE temp.instances USING fts5vocab(main, chunks_fts, 'instance')")
        self.db.execute(f"CREATE VIRTUAL TABLE temp.words USING fts5(word, tokenize = {tokenizer})")
        self.db.execute("CREATE VIRTUAL TABLE temp.word_terms USING fts5vocab(temp, words, 'instance')")
        rows = self.db.execute("SELECT rowid, id, embedding FROM chunks ORDER BY rowid").fetchall()
        self.ids = [r[1] for r in rows]
        self.row_of = {r[0]: row for row, r in enumerate(rows)}
        self.matrix = np.stack([np.frombuffer(r[2], dtype="<f4") for r in rows])
        by_id = sorted(range(len(rows)), key=lambda row: self.ids[row].encode())
        self.id_rank = np.empty(len(rows), dtype=np.int64)
        self.id_rank[by_id] = np.arange(len(rows))
        # What FTS5's xRowCount and xColumnTotalSize(-1) read, and every row's xColumnSize(-1).
        averages = varints(self.db.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()[0])
        self.fts_rows, self.average_length = averages[0], sum(averages[1:]) / averages[0]
        self.lengths = np.zeros(len(rows))
        for rowid, sizes in self.db.execute("SELECT id, sz FROM chunks_fts_docsize"):
            self.lengths[self.row_of[rowid]] = sum(varints(sizes))
        self.postings = {}

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.db.close()
        self.scratch.cleanup()

    def terms(self, word):
        """The index's terms for `word`, in order: what FTS5 makes of the phrase "word"."""
        self.db.execute("DELETE FROM temp.words")
        self.db.execute("INSERT INTO temp.words(word) VALUES (?)", (word,))
        return [t for t, in self.db.execute("SELECT term FROM temp.word_terms ORDER BY offset")]

    def instances(self, term):
        """(rowid, column, offset) of every occurrence of `term`; cached, queries share words."""
        if term not in self.postings:
            self.postings[term] = self.db.execute(
                "SELECT doc, col, offset FROM temp.instances WHERE term = ?", (term,)).fetchall()
        return self.postings[term]

    def phrase(self, word):
        """The rows matching `word` as an FTS5 phrase, and its column-weighted frequency in each."""
        terms = self.terms(word)
        hits = self.instances(terms[0]) if terms else []
        if len(terms) > 1:
            later = [set(self.instances(t)) for t in terms[1:]]
            hits = [(doc, col, offset) for doc, col, offset in hits
                    if all((doc, col, offset + j) in s for j, s in enumerate(later, 1))]
        frequency = defaultdict(float)
        for doc, col, _ in hits:
            frequency[self.row_of[doc]] += self.title_weight if col == "title" else CONTENT_WEIGHT
        return np.array(list(frequency), dtype=np.int64), np.array(list(frequency.values()))

    def query(self, text):
        """Cairn's phrases for `text`: searchTokens, then informative (a word in half the rows or
        more is dropped unless nothing else remains)."""
        words = [t for t in tokens(text) if t not in STOP] or tokens(text)
        phrases = [self.phrase(w) for w in words[:MAX_TOKENS]]
        return [p for p in phrases if 2 * len(p[0]) < len(self.ids)] or phrases

    def bm25(self, phrases, k1, b, idf_kind):
        """Every row's cairn_bm25 score (0 where nothing matches) and which rows match, with
        cairn_bm25's operations in its order."""
        scores = np.zeros(len(self.ids))
        matched = np.zeros(len(self.ids), dtype=bool)
        for rows, frequency in phrases:
            ratio = (self.fts_rows - len(rows) + 0.5) / (len(rows) + 0.5)
            if idf_kind == "lucene":
                idf = math.log(1 + ratio)
            else:
                idf = math.log(ratio)
                idf = 1e-6 if idf <= 0 else idf
            d = self.lengths[rows]
            scores[rows] += idf * ((frequency * (k1 + 1.0)) / (frequency + k1 * (1 - b + b * d / self.average_length)))
            matched[rows] = True
        return scores, matched

    def best(self, rows, scores, limit):
        """The best `limit` of `rows` by score, ties by id bytes."""
        return rows[np.lexsort((self.id_rank[rows], -scores[rows]))][:limit]


def standardized(scores, values):
    """`values` as z-scores against every row's `scores`, as ScoreMoments computes them."""
    mean = scores.sum() / len(scores)
    deviation = math.sqrt(max(0.0, (scores * scores).sum() / len(scores) - mean * mean))
    return (values - mean) / deviation if deviation > 0 else np.zeros(len(values))


def hybrid(snapshot, lexical, matched, cosines, dense_weight):
    """Cairn's hybrid top K for one query, from every row's lexical score and cosine."""
    lexical_list = snapshot.best(np.nonzero(matched)[0], lexical, DEPTH)
    top = np.sort(cosines)[-WINDOW:]
    if len(top) >= 2 and top.min() > DEGENERATE_MIN and top.max() - top.min() < DEGENERATE_SPREAD:
        return lexical_list[:K]
    dense = cosines.astype(np.float64)
    dense_list = snapshot.best(np.nonzero(cosines >= np.float32(FLOOR))[0], dense, DEPTH)
    candidates = np.union1d(lexical_list, dense_list)
    listed = np.zeros(len(lexical))  # a candidate the lexical list does not hold counts 0 there
    listed[lexical_list] = lexical[lexical_list]
    fused = np.zeros(len(lexical))
    fused[candidates] = ((1 - dense_weight) * standardized(lexical, listed[candidates])
                         + dense_weight * standardized(dense, dense[candidates]))
    return snapshot.best(candidates, fused, K)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("collections", nargs="+", help="NAME=BEIR_DIR=INDEX[=CORPUS]")
    ap.add_argument("--k1", type=float, nargs="+", default=[1.2, 1.5])
    ap.add_argument("--b", type=float, nargs="+", default=[0.75, 0.4])
    ap.add_argument("--baseline", default="1.2,0.75", help="K1,B the differences are taken from")
    ap.add_argument("--hybrid", action="store_true", help="also Cairn's hybrid (query vectors from embed_ref)")
    ap.add_argument("--idf", choices=("fts5", "lucene"), default="fts5")
    ap.add_argument("--dense-weight", type=float, default=0.8, help="hybrid's dense weight (lexical: 1 - it)")
    ap.add_argument("--title-weight", type=float, default=3.0, help="BM25 weight of a title match (content: 1)")
    args = ap.parse_args()
    baseline = tuple(float(x) for x in args.baseline.split(","))
    grid = [(k1, b) for k1 in args.k1 for b in args.b]
    if baseline not in grid:
        grid.insert(0, baseline)
    modes = ("lexical", "hybrid") if args.hybrid else ("lexical",)
    model = None
    if args.hybrid:
        from embed_ref import MiniLM
        from tokenize_ref import default_model_dir
        model = MiniLM(default_model_dir())
    per = defaultdict(lambda: defaultdict(list))  # (k1, b, mode) -> collection -> [nDCG@10 per query]
    names = []
    for spec in args.collections:
        name, folder, index, *corpus = spec.split("=")
        names.append(name)
        queries, qrels, _ = load_collection(folder, corpus[0] if corpus else os.path.join(folder, "corpus.jsonl"), "test")
        qvecs = model.embed([q["text"] for q in queries]).astype(np.float32) if model else [None] * len(queries)
        with Snapshot(index, args.title_weight) as snapshot:
            print(f"bm25_study: {name}: {len(queries)} queries, {len(snapshot.ids)} rows", file=sys.stderr, flush=True)
            for q, qvec in zip(queries, qvecs):
                phrases = snapshot.query(q["text"])
                cosines = snapshot.matrix @ qvec if model else None
                for k1, b in grid:
                    lexical, matched = snapshot.bm25(phrases, k1, b, args.idf)
                    rankings = {"lexical": snapshot.best(np.nonzero(matched)[0], lexical, K)}
                    if model:
                        rankings["hybrid"] = hybrid(snapshot, lexical, matched, cosines, args.dense_weight)
                    for mode, rows in rankings.items():
                        per[k1, b, mode][name].append(ndcg([snapshot.ids[r] for r in rows], qrels[q["_id"]], 10))
    print(f"nDCG@10, IDF {args.idf}\n")
    print("| k1 | b | mode | " + " | ".join(names) + " | mean |")
    print("|---:|---:|---|" + "---:|" * (len(names) + 1))
    for k1, b in grid:
        for mode in modes:
            means = [100 * np.mean(per[k1, b, mode][n]) for n in names]
            print(f"| {k1:g} | {b:g} | {mode} | " + " | ".join(f"{m:.2f}" for m in means) + f" | {np.mean(means):.2f} |")
    print(f"\nDifference from k1 {baseline[0]:g}, b {baseline[1]:g}, nDCG@10 points (SE of the per-query differences)\n")
    print("| k1 | b | mode | " + " | ".join(names) + " | mean |")
    print("|---:|---:|---|" + "---|" * (len(names) + 1))
    for k1, b in grid:
        if (k1, b) == baseline:
            continue
        for mode in modes:
            cells, means, errors = [], [], []
            for n in names:
                diff = 100 * (np.array(per[k1, b, mode][n]) - np.array(per[(*baseline, mode)][n]))
                se = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else 0.0
                cells.append(f"{diff.mean():+.2f} ({se:.2f})")
                means.append(diff.mean())
                errors.append(se)
            cells.append(f"{np.mean(means):+.2f} ({math.sqrt(sum(e * e for e in errors)) / len(errors):.2f})")
            print(f"| {k1:g} | {b:g} | {mode} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
