#!/usr/bin/env python3
"""Tokenizer reference for Cairn: all-MiniLM-L6-v2 token ids as sentence-transformers makes them.

Reads JSONL `{"text": "..."}` on stdin; prints one JSONL `{"ids": [...]}` per line, with
[CLS]/[SEP] and truncated at 256 tokens (sentence-transformers' max_seq_length; the 128-token
truncation and fixed 128 padding baked into tokenizer.json are overridden).

    . scripts/lib/python-env.sh && cairn_venv numpy==2.4.6 tokenizers==0.23.3
    "$CAIRN_PYTHON" Tests/Reference/tokenize_ref.py [--model-dir DIR] < texts.jsonl

--model-dir defaults to $CAIRN_MODEL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/cairn/all-MiniLM-L6-v2.
"""
import argparse
import json
import os
import sys

from tokenizers import Tokenizer

MAX_SEQ_LEN = 256


def default_model_dir():
    if os.environ.get("CAIRN_MODEL_DIR"):
        return os.environ["CAIRN_MODEL_DIR"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "cairn", "all-MiniLM-L6-v2")


def load_tokenizer(model_dir):
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_SEQ_LEN)
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", default=default_model_dir())
    args = ap.parse_args()
    tok = load_tokenizer(args.model_dir)
    for line in sys.stdin:
        if line.strip():
            ids = tok.encode(json.loads(line)["text"]).ids
            sys.stdout.write(json.dumps({"ids": ids}) + "\n")


if __name__ == "__main__":
    main()
