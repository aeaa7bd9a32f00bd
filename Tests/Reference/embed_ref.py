#!/usr/bin/env python3
"""Independent numpy fp32 reference of all-MiniLM-L6-v2 sentence embeddings, for checking Cairn.

BERT (6 layers, hidden 384, 12 heads, intermediate 1536, exact erf GELU, LayerNorm eps 1e-12),
then mean pooling over the tokens and L2 normalisation, as sentence-transformers does.
Weights are read from model.safetensors with plain numpy (no safetensors/torch); token ids come
from tokenize_ref.py (tokenizers, truncation 256, no padding).

Reads JSONL `{"text": "..."}` on stdin, prints JSONL `{"embedding": [384 floats]}` in order.

    . scripts/lib/python-env.sh && cairn_venv numpy==2.4.6 tokenizers==0.23.3
    "$CAIRN_PYTHON" Tests/Reference/embed_ref.py [--model-dir DIR] [--batch-size 32] < in.jsonl
    "$CAIRN_PYTHON" Tests/Reference/embed_ref.py --self-check   # published cosines, erf, batching

Batches are "packed": the dense layers run on all the batch's tokens stacked with no padding and
attention runs per passage, so a passage's vector does not depend on its batch (the self-check
compares batched with one-at-a-time).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

from tokenize_ref import default_model_dir, load_tokenizer

LAYERS, HIDDEN, HEADS, HEAD_DIM, EPS = 6, 384, 12, 32, 1e-12


def load_safetensors(path):
    """{name: float32 array} for every F32 tensor: u64 LE header length, JSON header, raw data."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":  # skips I64 embeddings.position_ids
            continue
        start, end = info["data_offsets"]
        arr = np.frombuffer(data, dtype="<f4", count=(end - start) // 4, offset=8 + n + start)
        tensors[name] = arr.reshape(info["shape"]).astype(np.float32)  # native-endian copy
    return tensors


class Gelu:
    """Exact GELU x * Phi(x), Phi(x) = (1 + erf(x/sqrt2))/2 = erfc(-x/sqrt2)/2, by linear
    interpolation in float64 of a 65,537-point table of math.erfc on [-8, 8] (|Phi error| < 2e-9,
    checked by --self-check); Phi is 0 or 1 to double precision beyond. Chunked to stay in cache."""
    L, N, CHUNK = 8.0, 1 << 16, 1 << 15

    def __init__(self):
        grid = np.linspace(-self.L, self.L, self.N + 1)
        self.phi = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in grid])
        self.dphi = np.diff(self.phi)

    def phi_of(self, x):  # x float64
        u = (x + self.L) * (self.N / (2 * self.L))
        np.clip(u, 0.0, self.N - 1e-6, out=u)
        i = u.astype(np.intp)
        u -= i
        return self.phi[i] + u * self.dphi[i]

    def __call__(self, h):
        out = np.empty_like(h)
        hf, of = h.reshape(-1), out.reshape(-1)
        for s in range(0, hf.size, self.CHUNK):
            x = hf[s:s + self.CHUNK].astype(np.float64)
            of[s:s + self.CHUNK] = x * self.phi_of(x)
        return out


def layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdims=True)
    return xc / np.sqrt(var + np.float32(EPS)) * g + b


class MiniLM:
    def __init__(self, model_dir):
        self.tok = load_tokenizer(model_dir)
        self.w = load_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.gelu = Gelu()

    def embed_ids(self, batch):
        """Sentence embeddings [len(batch), 384] for a list of token-id lists."""
        w = self.w
        lens = [len(ids) for ids in batch]
        offs = np.cumsum([0] + lens)
        ids = np.concatenate([np.asarray(i, dtype=np.int64) for i in batch])
        pos = np.concatenate([np.arange(n) for n in lens])
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][pos]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        scale = np.float32(1.0 / math.sqrt(HEAD_DIM))
        for l in range(LAYERS):
            def lw(name, l=l):  # this layer's tensor
                return w[f"encoder.layer.{l}.{name}"]
            q, k, v = (x @ lw(f"attention.self.{n}.weight").T + lw(f"attention.self.{n}.bias")
                       for n in ("query", "key", "value"))
            ctx = np.empty_like(x)
            for o, n in zip(offs[:-1], lens):  # attention within each passage: [heads, n, 32]
                qh, kh, vh = (t[o:o + n].reshape(n, HEADS, HEAD_DIM).transpose(1, 0, 2) for t in (q, k, v))
                s = (qh @ kh.transpose(0, 2, 1)) * scale
                s -= s.max(-1, keepdims=True)
                np.exp(s, out=s)
                s /= s.sum(-1, keepdims=True)
                ctx[o:o + n] = (s @ vh).transpose(1, 0, 2).reshape(n, HIDDEN)
            a = ctx @ lw("attention.output.dense.weight").T + lw("attention.output.dense.bias")
            x = layer_norm(a + x, lw("attention.output.LayerNorm.weight"), lw("attention.output.LayerNorm.bias"))
            h = self.gelu(x @ lw("intermediate.dense.weight").T + lw("intermediate.dense.bias"))
            o2 = h @ lw("output.dense.weight").T + lw("output.dense.bias")
            x = layer_norm(o2 + x, lw("output.LayerNorm.weight"), lw("output.LayerNorm.bias"))
        pooled = np.stack([x[o:o + n].mean(0) for o, n in zip(offs[:-1], lens)])
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))

    def embed(self, texts, batch_size=32):
        ids = [e.ids for e in self.tok.encode_batch(texts)]
        out = [self.embed_ids(ids[i:i + batch_size]) for i in range(0, len(ids), batch_size)]
        return np.concatenate(out) if out else np.zeros((0, HIDDEN), np.float32)


def self_check(model):
    ok = True
    x = np.random.default_rng(0).uniform(-9, 9, 200_000)
    exact = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x])
    err = float(np.abs(model.gelu.phi_of(x.copy()) - exact).max())
    print(f"Phi (erf) table max abs error: {err:.2e}")
    ok &= err < 1e-8
    s = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    e = model.embed(s)
    for j, want in ((1, 0.6660), (2, 0.1046)):
        c = float(e[0] @ e[j])
        good = round(c, 4) == want
        ok &= good
        print(f"cos({s[0]!r}, {s[j]!r}) = {c:.6f}  (published {want:.4f}) {'ok' if good else 'MISMATCH'}")
    long_text = " ".join(["The aerodynamic heating of a blunt body in hypersonic flow."] * 40)  # > 256 tokens
    texts = s + [long_text, "", "short"]
    batched = model.embed(texts, batch_size=32)
    single = np.concatenate([model.embed([t]) for t in texts])
    diff = float(np.abs(batched - single).max())
    print(f"batched vs one-at-a-time: max abs diff {diff:.3g}{' (bitwise identical)' if diff == 0 else ''}")
    ok &= diff < 1e-6
    print("self-check", "passed" if ok else "FAILED")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-dir", default=default_model_dir())
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--self-check", action="store_true", help="check published cosines, erf, batching")
    args = ap.parse_args()
    model = MiniLM(args.model_dir)
    if args.self_check:
        sys.exit(0 if self_check(model) else 1)
    texts = [json.loads(line)["text"] for line in sys.stdin if line.strip()]
    for vec in model.embed(texts, args.batch_size):
        sys.stdout.write(json.dumps({"embedding": [float(v) for v in vec]}) + "\n")


if __name__ == "__main__":
    main()
