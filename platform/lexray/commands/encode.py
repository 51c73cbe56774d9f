"""``lexray encode``: encode a BEIR corpus into Parquet sparse shards with Ray Data (resumable; see
docs/indexing.md).

    lexray encode --model ../shared/models/splade-tiny --dataset ../shared/datasets/scifact \\
        --out outputs/scifact-shards [--config recipe.yaml] [--set encode.batch_size=64 ...]

Re-running into the same --out keeps complete shards and encodes only missing or damaged ones; a folder made by a
different model, settings or corpus is refused unless --overwrite. A lock left by a killed run is taken over
with --break-stale-lock (its process on this host is dead). Writes manifest.json and config.resolved.yaml
beside the shards and prints read/skipped counts and throughput.
"""

from __future__ import annotations

import argparse
import json

from lexray.commands.common import print_outputs, setup_logging, validate_dataset, validate_model
from lexray.config import add_config_args, load_config, save_config


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray encode", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="sparse encoder: local directory or hub id (model.name_or_path)")
    ap.add_argument("--dataset", help="BEIR-layout folder (data.dataset)")
    ap.add_argument("--out", required=True, help="shard folder (created; resumed if it exists)")
    ap.add_argument("--max-docs", type=int, help="only the first N documents (data.max_docs)")
    ap.add_argument("--on-error", choices=["fail", "skip"], help="bad corpus rows (data.on_error)")
    ap.add_argument("--backend", choices=["ray", "local"], help="encode.backend")
    ap.add_argument("--overwrite", action="store_true", help="replace shards of another model/settings")
    ap.add_argument("--break-stale-lock", action="store_true",
                    help="take over a lock left by a killed run (its pid on this host is dead)")
    add_config_args(ap)
    return ap


def main(argv: list[str] | None = None) -> dict:
    """Encode (or resume encoding) the corpus into ``--out``; returns the manifest as a dict. The dataset and the
    model are checked before anything is encoded (FileNotFoundError / ValueError naming them)."""
    args = build_parser().parse_args(argv)
    setup_logging()

    flags = {"model.name_or_path": args.model, "data.dataset": args.dataset, "data.max_docs": args.max_docs,
             "data.on_error": args.on_error, "encode.backend": args.backend,
             "encode.overwrite": True if args.overwrite else None}
    overrides = [f"{k}={v}" for k, v in flags.items() if v is not None] + args.overrides
    base = None if args.config else {"model": {"name_or_path": "shared:models/splade-tiny"}}
    cfg = load_config(args.config, overrides, base=base)
    validate_dataset(cfg.data.dataset)
    from lexray.models.dense import as_dense_config

    if dense_cfg := as_dense_config(cfg):  # a dense folder: dense shards (docs/lexsembridge.md)
        from lexray.models.dense import load_dense_encoder

        cfg = dense_cfg
        load_dense_encoder(cfg.model)
    else:
        validate_model(cfg.model)
    from lexray.data.beir import ReadReport
    from lexray.encode.pipeline import encode_corpus  # torch: after the early checks

    report = ReadReport()
    manifest = encode_corpus(cfg.model, cfg.data.dataset, args.out, cfg.encode, on_error=cfg.data.on_error,
                             max_docs=cfg.data.max_docs, report=report, break_stale_lock=args.break_stale_lock)
    save_config(cfg, args.out)

    t = manifest.totals
    print(report.summary())
    print(f"shards: {t.shards} ({t.shards_encoded} encoded, {t.shards_reused} kept from a previous run)")
    print(f"documents: {t.docs} ({t.docs_encoded} encoded now); postings {t.postings:,}; "
          f"avg nnz/doc {t.avg_nnz:.1f}")
    if t.docs_encoded:
        print(f"throughput: {t.docs_per_s:.1f} docs/s ({t.encode_seconds:.1f} s wall for {t.docs_encoded} docs, "
              f"{t.actor_seconds:.1f} s inside encoders)")
    stages = {k: round(v, 2) for k, v in manifest.timings.items() if k in
              ("tokenize", "body", "head_pool", "sparse", "write", "actor_init")}
    if stages:
        print(f"encoder seconds by stage: {json.dumps(stages)}")
    if "to_first_shard" in manifest.timings:
        print(f"fixed cost: {manifest.timings['to_first_shard']:.1f} s before the first shard started (Ray start if this "
              f"job started it, encoder start, imports, model load), {manifest.timings['after_last_shard']:.1f} s after "
              f"the last one ended")
    print(f"manifest: {args.out}/manifest.json")
    print_outputs(args.out)
    return manifest.model_dump(mode="json")

