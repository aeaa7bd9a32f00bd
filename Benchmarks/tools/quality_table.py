#!/usr/bin/env python3
"""The tables of docs/quality.md from Benchmarks/bench-quality's output folder: every system's
means per collection, then issue 16's goals per collection with the standard error of each
difference (per-query differences on the same queries).

    quality_table.py OUT_DIR COLLECTION...
"""
import json
import math
import sys


def per_query(path):
    """{mode: {query_id: ndcg@10}} from a per-query JSONL file."""
    out = {}
    for line in open(path, encoding="utf-8"):
        if line.strip():
            row = json.loads(line)
            out.setdefault(row["mode"], {})[row["query_id"]] = row["ndcg@10"]
    return out


def difference(a, b):
    """Mean and standard error of a - b over the queries both have, in points."""
    diffs = [100 * (a[q] - b[q]) for q in a if q in b]
    n = len(diffs)
    mean = sum(diffs) / n
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) if n > 1 else 0.0
    return mean, se


def main():
    out, names = sys.argv[1], sys.argv[2:]
    print("| collection | system | nDCG@10 | Recall@10 | Recall@100 | MRR@10 |")
    print("|---|---|---:|---:|---:|---:|")
    goals = []
    for name in names:
        cairn = json.load(open(f"{out}/{name}-cairn.json"))
        peers = json.load(open(f"{out}/{name}-peers.json"))
        rows = [("Cairn " + r["mode"], r) for r in cairn["modes"]] + [(r["mode"], r) for r in peers["modes"]]
        queries = cairn["modes"][0]["queries"]
        label = f"{name} ({cairn['documents']} docs, {queries} q)"
        for system, r in rows:
            print(f"| {label} | {system} | " + " | ".join(f"{100 * r[k]:.2f}" for k in ("ndcg@10", "recall@10", "recall@100", "mrr@10")) + " |")
            label = ""
        scores = {**per_query(f"{out}/{name}-cairn.jsonl"), **per_query(f"{out}/{name}-peers.jsonl")}
        means = {m: 100 * sum(v.values()) / len(v) for m, v in scores.items()}
        better = max(("lexical", "dense"), key=lambda m: means[m])
        over_part = difference(scores["hybrid"], scores[better])
        over_reference = difference(scores["hybrid"], scores["reference-fusion"])
        differ = {r["mode"]: r.get("top10_differs_at_k10") for r in cairn["modes"]}
        goals.append((name, queries, means["hybrid"], better, over_part, over_reference, differ))
    print()
    print("| collection | queries | hybrid | − better part (which) | − reference fusion | top 10 differs, k = 10 vs 100 |")
    print("|---|---:|---:|---|---|---|")
    for name, queries, hybrid, better, (d1, s1), (d2, s2), differ in goals:
        changed = ", ".join(f"{m} {n}" for m, n in differ.items() if n is not None) or "not measured"
        print(f"| {name} | {queries} | {hybrid:.2f} | {d1:+.2f} (SE {s1:.2f}; {better}) | {d2:+.2f} (SE {s2:.2f}) | {changed} |")


if __name__ == "__main__":
    main()
