"""Corpus encoding throughput: the Ray Data pipeline (lexray.encode) against a plain Hugging Face loop.

    python benchmarks/encode_bench.py [--docs 2000] [--sweep] [--out outputs/benchmarks/encode.json]

Same model (splade-tiny), same documents (the first N of SciFact, ``title + " " + text``), doc max length 256.

Baseline (what a first script does): tokenizer → pad to the longest in each batch of 32, corpus order → full
(B, L, |V|) MLM logits → ReLU → log1p → × attention mask → max over L → per-row ``np.flatnonzero`` → one
Parquet file. ``torch.no_grad``, torch's default threads (all cores).

lexray: ``encode_corpus`` with the Ray Data actor pool (default: 2 actors × 0.5 CPU, one torch thread each),
length-sorted batches inside a shard, chunked vocabulary head pooled before the activation, inference_mode,
vectorised sparse conversion, atomic Parquet shards + manifest. Wall time includes everything after ``ray.init``:
model and corpus hashing, corpus validation, actor start and model load, encoding, writing.

Where the time goes is measured with timers inside the encoder actors (``manifest.timings``: tokenize, body,
head_pool, sparse, write, actor_init) and, for the baseline, around each step of the loop. ``--sweep`` adds
variants (threads/actors, batch size, unsorted batches, bf16, head chunk size) on fewer documents;
``--head-experiment`` times lexray's fused vocabulary-blocked head against the unfused head on one thread.

Roofline: FLOPs per real (unpadded) token from the model's shapes, and this machine's float32 matmul peak
(2048³ matmul on all cores) measured in the same run; ``roofline_fraction`` = docs/s × tokens/doc × FLOPs/token
÷ peak, end to end, for lexray and for the baseline. Goal: lexray ≥ 0.70 in float32, |Δw| ≤ 1e-5.

The machine is shared: the JSON records the load average before and after each measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "platform"))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def baseline(model_dir: Path, texts: list[str], doc_ids: list[str], batch_size: int, max_length: int,
             out_file: Path) -> dict:
    """The plain Hugging Face loop; returns timings and the dense reps' sparse form for a cross-check."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(model_dir).eval()
    t_load = time.perf_counter() - t0
    st = dict.fromkeys(("tokenize", "model", "activation_pool", "sparse", "write"), 0.0)
    ids_out, ws_out = [], []
    load_before = _load()
    t_all = time.perf_counter()
    with torch.no_grad():
        for s in range(0, len(texts), batch_size):
            t = time.perf_counter()
            b = tok(texts[s:s + batch_size], padding=True, truncation=True, max_length=max_length,
                    return_tensors="pt")
            st["tokenize"] += time.perf_counter() - t
            t = time.perf_counter()
            logits = model(**b).logits                                   # (B, L, |V|)
            st["model"] += time.perf_counter() - t
            t = time.perf_counter()
            w = torch.log1p(torch.relu(logits)) * b["attention_mask"].unsqueeze(-1)
            reps = w.max(dim=1).values                                   # (B, |V|)
            st["activation_pool"] += time.perf_counter() - t
            t = time.perf_counter()
            for row in reps.numpy():
                nz = np.flatnonzero(row)
                ids_out.append(nz.astype(np.int32))
                ws_out.append(row[nz].astype(np.float32))
            st["sparse"] += time.perf_counter() - t
    t = time.perf_counter()
    pq.write_table(pa.table({"doc_id": doc_ids, "term_ids": pa.array(ids_out, pa.list_(pa.int32())),
                             "weights": pa.array(ws_out, pa.list_(pa.float32()))}), out_file)
    st["write"] = time.perf_counter() - t
    wall = time.perf_counter() - t_all
    return {"docs": len(texts), "wall_s": wall, "docs_per_s": len(texts) / wall, "model_load_s": t_load,
            "stages_s": st, "torch_threads": torch.get_num_threads(), "load_avg_before": load_before,
            "load_avg_after": _load(), "_ids": ids_out, "_ws": ws_out}


def pipeline(model_dir: Path, dataset: Path, n_docs: int, out_dir: Path, encode_kw: dict,
             model_kw: dict | None = None) -> dict:
    from lexray.config import EncodeConfig, ModelConfig
    from lexray.encode.pipeline import encode_corpus

    shutil.rmtree(out_dir, ignore_errors=True)
    cfg = EncodeConfig(**encode_kw)
    mcfg = ModelConfig(name_or_path=str(model_dir), **(model_kw or {}))
    load_before = _load()
    t = time.perf_counter()
    m = encode_corpus(mcfg, dataset, out_dir, cfg, max_docs=n_docs, backend="ray", show_progress=False)
    wall = time.perf_counter() - t
    tm = dict(m.timings)
    n_act = max(1.0, tm.get("actors", 1.0))
    busy = (tm.get("actor_init", 0.0) + tm.get("shard_total", 0.0)) / n_act
    stages = {k: tm.get(k, 0.0) for k in ("tokenize", "body", "head_pool", "sparse", "write")}
    return {"docs": m.totals.docs, "wall_s": wall, "docs_per_s": m.totals.docs / wall,
            "encode_stage_docs_per_s": m.totals.docs_per_s,
            "steady_docs_per_s": m.totals.docs / (tm.get("shard_total", 0.0) / n_act)
            if tm.get("shard_total") else None,
            "actors_used": int(n_act), "prepare_s": tm.get("prepare", 0.0),
            "actor_init_s_sum": tm.get("actor_init", 0.0), "shard_total_s_sum": tm.get("shard_total", 0.0),
            "stages_s_sum_over_actors": stages,
            "ray_overhead_s": max(0.0, wall - tm.get("prepare", 0.0) - busy),
            "padding_efficiency": tm["real_tokens"] / tm["padded_tokens"] if tm.get("padded_tokens") else None,
            "postings": m.totals.postings, "avg_nnz": m.totals.avg_nnz, "encode_config": encode_kw,
            "model_overrides": model_kw or {}, "load_avg_before": load_before, "load_avg_after": _load()}


def head_experiment(model_dir: Path, texts: list[str], batch_size: int = 32) -> dict:
    """One thread: the fused vocabulary-blocked head (lexray's default, :mod:`lexray.models.fused_head`)
    against the unfused path it replaced (body, then (chunk, L, |V|) logits → mask → max → log1p∘ReLU).

    Same length-sorted batches for both; reports ms/doc and the max |Δw|."""
    import torch

    from lexray.models import SparseEncoder
    from lexray.models.backbones import body_and_head
    from lexray.models.pooling import splade_max_pool

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    enc = SparseEncoder.from_pretrained(model_dir).eval()
    order = np.argsort([-len(t) for t in texts], kind="stable")
    batches = [enc.tokenize([texts[i] for i in order[s:s + batch_size]])
               for s in range(0, len(texts), batch_size)]
    body, head = body_and_head(enc.backbone, enc.settings.kind)
    chunk = enc.settings.chunk_size

    def unfused(b):
        h = body(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
        return torch.cat([splade_max_pool(head(h[s:s + chunk]), b["pool_mask"][s:s + chunk], inplace=True)
                          for s in range(0, h.shape[0], chunk)])

    res = {}
    with torch.inference_mode():
        for name, fn in (("fused", lambda b: enc(**b)), ("unfused", unfused), ("fused_again", lambda b: enc(**b))):
            t = time.perf_counter()
            outs = [fn(b) for b in batches]
            res[name] = outs
            res[name + "_ms_per_doc"] = (time.perf_counter() - t) / len(texts) * 1e3
    diff = max(float((a - b).abs().max()) for a, b in zip(res["fused"], res["unfused"], strict=True))
    torch.set_num_threads(threads)
    return {"docs": len(texts), "threads": 1,
            "fused_ms_per_doc": min(res["fused_ms_per_doc"], res["fused_again_ms_per_doc"]),
            "unfused_ms_per_doc": res["unfused_ms_per_doc"], "max_abs_diff": diff}


def flops_per_token(model_dir: Path, avg_len: float) -> dict:
    """Forward FLOPs per real token (2 per multiply-add): every Linear of the body and head (the vocabulary
    projection included) plus attention scores and values (4·L·H per layer at the mean length L)."""
    from torch import nn

    from lexray.models import SparseEncoder

    enc = SparseEncoder.from_pretrained(model_dir)
    emb = enc.backbone.get_input_embeddings().weight
    linear = sum(m.weight.numel() for m in enc.backbone.modules()
                 if isinstance(m, nn.Linear) and m.weight is not emb) + \
        (emb.numel() if enc.backbone.get_output_embeddings().weight is emb else 0)
    vocab = enc.backbone.get_output_embeddings().weight.numel()
    cfg = enc.backbone.config
    attn = 4 * cfg.num_hidden_layers * cfg.hidden_size * avg_len
    total = 2 * linear + attn
    return {"flops_per_token": total, "vocab_projection_fraction": 2 * vocab / total, "mean_tokens": avg_len}


def matmul_peak(threads: int, n: int = 2048, repeats: int = 5) -> float:
    """float32 GFLOP/s of an (n × n) @ (n × n) matmul on ``threads`` torch threads (best of ``repeats``)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    torch.set_num_threads(old)
    return 2 * n ** 3 / best / 1e9


def real_tokens(model_dir: Path, texts: list[str], max_length: int) -> int:
    from lexray.models import SparseEncoder

    tok = SparseEncoder.from_pretrained(model_dir).tokenizer
    return sum(len(x) for x in tok(texts, truncation=True, max_length=max_length)["input_ids"])


def max_abs_diff(out_dir: Path, ids_ref, ws_ref, vocab: int) -> float:
    from lexray.encode.shards import iter_shards

    i = 0
    worst = 0.0
    for b in iter_shards(out_dir):
        for t, w in zip(b.term_ids, b.weights, strict=True):
            a = np.zeros(vocab, np.float32)
            r = np.zeros(vocab, np.float32)
            a[t] = w
            r[ids_ref[i]] = ws_ref[i]
            worst = max(worst, float(np.abs(a - r).max()))
            i += 1
    return worst


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="shared:models/splade-tiny")
    ap.add_argument("--dataset", default="shared:datasets/scifact")
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--num-actors", type=int, default=2)
    ap.add_argument("--rows-per-shard", type=int, default=None, help="default: docs / (4 × actors)")
    ap.add_argument("--sweep", action="store_true", help="also run variants on --sweep-docs documents")
    ap.add_argument("--sweep-docs", type=int, default=400)
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--head-experiment", action="store_true",
                    help="also time the fused head against the unfused one (one thread)")
    ap.add_argument("--out", default="outputs/benchmarks/encode.json")
    args = ap.parse_args(argv)

    from lexray.data.beir import iter_corpus, resolve_dataset_dir
    from lexray.paths import resolve_local
    from lexray.ray_utils import init_ray

    model_dir = resolve_local(args.model)
    dataset = resolve_dataset_dir(args.dataset)
    docs = list(iter_corpus(dataset, max_docs=args.docs))
    texts = [d.full_text for d in docs]
    doc_ids = [d.doc_id for d in docs]
    rows = args.rows_per_shard or max(1, len(docs) // (4 * args.num_actors))
    work = Path(tempfile.mkdtemp(prefix="encode_bench_"))
    record: dict = {"benchmark": "encode", "model": str(model_dir), "dataset": str(dataset), "docs": len(docs),
                    "doc_max_length": 256, "batch_size": args.batch_size, "cpus": os.cpu_count()}
    n_tok = real_tokens(model_dir, texts, 256)
    roof = flops_per_token(model_dir, n_tok / len(texts))
    roof["matmul_peak_gflops_before"] = matmul_peak(os.cpu_count() or 1)
    record["roofline"] = roof
    flop_per_doc = roof["flops_per_token"] * n_tok / len(texts)

    def fraction(docs_per_s: float) -> float:
        return docs_per_s * flop_per_doc / (roof["matmul_peak_gflops"] * 1e9)

    try:
        if not args.skip_baseline:
            print(f"baseline: plain HF loop on {len(docs)} docs ...", flush=True)
            base = baseline(model_dir, texts, doc_ids, args.batch_size, 256, work / "baseline.parquet")
            record["baseline"] = {k: v for k, v in base.items() if not k.startswith("_")}
            print(f"  {base['docs_per_s']:.2f} docs/s", flush=True)
        if args.head_experiment:
            print("head experiment (one thread, 128 docs) ...", flush=True)
            record["head_experiment"] = head_experiment(model_dir, texts[:128], args.batch_size)
            print(f"  fused {record['head_experiment']['fused_ms_per_doc']:.1f} ms/doc, unfused "
                  f"{record['head_experiment']['unfused_ms_per_doc']:.1f} ms/doc", flush=True)
        t = time.perf_counter()
        init_ray(num_cpus=os.cpu_count())
        record["ray_init_s"] = time.perf_counter() - t
        enc_kw = dict(batch_size=args.batch_size, num_actors=args.num_actors, cpus_per_actor=0.5,
                      rows_per_shard=rows)
        print(f"lexray Ray Data pipeline on {len(docs)} docs ({args.num_actors} actors, {rows} rows/shard) ...",
              flush=True)
        lex = pipeline(model_dir, dataset, len(docs), work / "lexray", enc_kw)
        record["lexray"] = lex
        print(f"  {lex['docs_per_s']:.2f} docs/s end to end, {lex['steady_docs_per_s']:.2f} docs/s steady",
              flush=True)
        if not args.skip_baseline:
            record["speedup_end_to_end"] = lex["docs_per_s"] / record["baseline"]["docs_per_s"]
            record["speedup_steady"] = (lex["steady_docs_per_s"] or 0) / record["baseline"]["docs_per_s"]
            from lexray.encode.shards import load_manifest

            vocab = load_manifest(work / "lexray").vocab_size
            record["max_abs_diff_vs_baseline"] = max_abs_diff(work / "lexray", base["_ids"], base["_ws"], vocab)
            print(f"  speedup {record['speedup_end_to_end']:.2f}x end to end, "
                  f"{record['speedup_steady']:.2f}x steady; max |Δw| vs baseline "
                  f"{record['max_abs_diff_vs_baseline']:.2e}", flush=True)
        roof["matmul_peak_gflops_after"] = matmul_peak(os.cpu_count() or 1)
        roof["matmul_peak_gflops"] = max(roof["matmul_peak_gflops_before"], roof["matmul_peak_gflops_after"])
        lex["roofline_fraction"] = fraction(lex["docs_per_s"])
        lex["roofline_fraction_steady"] = fraction(lex["steady_docs_per_s"] or 0.0)
        if not args.skip_baseline:
            record["baseline"]["roofline_fraction"] = fraction(record["baseline"]["docs_per_s"])
        print(f"  roofline: {roof['flops_per_token'] / 1e6:.2f} MFLOP/token, peak "
              f"{roof['matmul_peak_gflops']:.1f} GFLOP/s; lexray {lex['roofline_fraction']:.1%} end to end "
              f"({lex['roofline_fraction_steady']:.1%} steady)"
              + (f", baseline {record['baseline']['roofline_fraction']:.1%}" if not args.skip_baseline else ""),
              flush=True)
        if args.sweep:
            n = min(args.sweep_docs, len(docs))
            r = max(1, n // 8)
            variants = {
                "default_2x1thread": ({}, {}),
                "1actor_2threads": ({"num_actors": 1, "torch_threads": 2}, {}),
                "unsorted_batches": ({"sort_by_length": False}, {}),
                "batch_16": ({"batch_size": 16}, {}),
                "batch_64": ({"batch_size": 64}, {}),
                "head_chunk_4": ({}, {"chunk_size": 4}),
                "head_chunk_32": ({}, {"chunk_size": 32}),
                "bf16": ({}, {"dtype": "bfloat16"}),
            }
            record["sweep"] = {"docs": n, "rows_per_shard": r, "variants": {}}
            for name, (ekw, mkw) in variants.items():
                kw = {**enc_kw, "rows_per_shard": r, **ekw}
                res = pipeline(model_dir, dataset, n, work / f"sweep_{name}", kw, mkw)
                if name == "bf16" and not args.skip_baseline:
                    res["max_abs_diff_vs_baseline"] = max_abs_diff(work / f"sweep_{name}", base["_ids"],
                                                                   base["_ws"], vocab)
                record["sweep"]["variants"][name] = res
                print(f"  sweep {name}: {res['docs_per_s']:.2f} docs/s end to end, "
                      f"{res['steady_docs_per_s']:.2f} steady", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    print(f"wrote {out}")
    return record


if __name__ == "__main__":
    main()
