"""Static pruning trade-off on SciFact test: index size, exact-search QPS and nDCG@10 per pruning setting.

For each model, the unpruned index is the baseline row of the same run; every other row is ``lexray prune`` of
it (lexray.index.prune: per-term top-k ``term_k``, per-document top-k ``doc_k``, or both). The 300 test queries
are encoded once per model (the recorded encoder, as ``lexray search`` / ``lexray evaluate`` encode them) and
searched exactly (ExactSearcher, float weights, top ``--top-k`` = 1,000 as evaluate) on every index; nDCG@10 and
R@100 come from lexray.eval.metrics (the one metrics computation). QPS is the best of ``--repeats`` timed passes
over the whole batch after one untimed warm-up pass (numba compiled); size is the index folder's bytes.

Models:
* ``splade-tiny``: ``lexray evaluate`` of ../shared/models/splade-tiny on all of SciFact into ``--work``
  (reused when its index exists);
* ``laconic``: the main job's evaluated index, ``--laconic`` (default outputs/laconic-smollm2-cpu: its
  ``eval/trained``), read only.

Run (from the repository root; ~5 min on a quiet 2-core machine, most of it encoding SciFact with splade-tiny):

    .venv/bin/python benchmarks/prune_bench.py [--out outputs/benchmarks/prune.json]

nDCG@10, R@100, postings and sizes do not depend on machine load; QPS does (quote it only from a quiet machine).
The JSON holds every row (``rows``), the settings and the machine; the table of docs/indexing.md is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

from lexray.paths import REPO_ROOT, shared_dir

TERM_KS = (1000, 300, 100)
DOC_KS = (256, 128, 64, 32)
BOTH = ((1000, 128),)


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def splade_tiny_index(work: Path) -> Path:
    """The evaluated splade-tiny folder over all of SciFact (built by ``lexray evaluate`` when missing)."""
    from lexray import cli

    out = work / "splade-tiny-scifact"
    if not (out / "index" / "stats.json").is_file():
        rc = cli.main(["evaluate", "--model", str(shared_dir() / "models" / "splade-tiny"),
                       "--dataset", str(shared_dir() / "datasets" / "scifact"), "--out", str(out),
                       "--set", "encode.backend=local"])
        if rc != 0:
            raise SystemExit(f"lexray evaluate of splade-tiny failed ({rc})")
    return out


def measure(index_dir: Path, q_ids, q_ws, qids: list[str], qrels, top_k: int, repeats: int) -> dict:
    """QPS (best of ``repeats``), nDCG@10 / R@100 and size of one index."""
    from lexray.eval.metrics import evaluate
    from lexray.index.search import ExactSearcher, run_from_topk

    s = ExactSearcher(index_dir)
    s.search(q_ids[:8], q_ws[:8], k=top_k)  # warm-up: compile, page in
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        scores, idx = s.search(q_ids, q_ws, k=top_k)
        times.append(time.perf_counter() - t0)
    run = run_from_topk(qids, scores, idx, s.doc_ids)
    m = evaluate(run, qrels, ["nDCG@10", "R@100"])
    return {"nDCG@10": m["nDCG@10"], "R@100": m["R@100"], "qps": len(qids) / min(times),
            "qps_all": [len(qids) / t for t in times], "n_postings": int(s.stats["n_postings"]),
            "avg_nnz_per_doc": float(s.stats["avg_nnz_per_doc"]), "index_bytes": _dir_bytes(index_dir),
            "flops": float(s.stats["flops"]), "n_threads": s.n_threads}


def bench_model(name: str, folder: Path, work: Path, settings: list[tuple[int | None, int | None]],
                repeats: int, top_k: int) -> list[dict]:
    """Every setting's row for one model (the unpruned baseline first)."""
    import lexray
    from lexray.data.beir import load_qrels, load_queries
    from lexray.index.prune import prune_index

    ix = lexray.open_index(folder)
    dataset = ix.location.dataset
    split = ix.location.config.data.split if ix.location.config is not None else "test"
    qrels = load_qrels(dataset, split)
    queries = load_queries(dataset, split)
    qids = [q for q in qrels if q in queries]
    t0 = time.perf_counter()
    q_ids, q_ws = ix.encode([queries[q] for q in qids])
    print(f"[{name}] {len(qids)} queries encoded in {time.perf_counter() - t0:.1f} s", flush=True)
    base = measure(ix.location.index_dir, q_ids, q_ws, qids, qrels, top_k, repeats)
    rows = [{"model": name, "term_k": None, "doc_k": None, **base}]
    print(f"[{name}] unpruned: {json.dumps({k: v for k, v in base.items() if k != 'qps_all'})}", flush=True)
    for term_k, doc_k in settings:
        out = work / f"{name}-t{term_k}-d{doc_k}"
        shutil.rmtree(out, ignore_errors=True)
        prune_index(ix.location.index_dir, out, term_k=term_k, doc_k=doc_k)
        r = measure(out, q_ids, q_ws, qids, qrels, top_k, repeats)
        r.update({"model": name, "term_k": term_k, "doc_k": doc_k,
                  "postings_kept": r["n_postings"] / base["n_postings"], "size_ratio": r["index_bytes"] /
                  base["index_bytes"], "qps_ratio": r["qps"] / base["qps"],
                  "delta_nDCG@10": r["nDCG@10"] - base["nDCG@10"]})
        rows.append(r)
        shutil.rmtree(out, ignore_errors=True)
        print(f"[{name}] term_k={term_k} doc_k={doc_k}: nDCG@10 {r['nDCG@10']:.4f} postings {r['postings_kept']:.3f} "
              f"qps x{r['qps_ratio']:.2f}", flush=True)
    ix.close()
    return rows


def markdown(rows: list[dict]) -> str:
    """The docs/indexing.md table."""
    lines = ["| model | term_k | doc_k | postings | size (MB) | avg terms/doc | nDCG@10 | R@100 | QPS |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['term_k'] or '–'} | {r['doc_k'] or '–'} | {r['n_postings']:,} | "
                     f"{r['index_bytes'] / 1e6:.1f} | {r['avg_nnz_per_doc']:.0f} | {r['nDCG@10']:.4f} | "
                     f"{r['R@100']:.4f} | {r['qps']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO_ROOT / "outputs" / "benchmarks" / "prune.json"))
    ap.add_argument("--work", default=str(REPO_ROOT / "outputs" / "benchmarks" / "prune-work"))
    ap.add_argument("--laconic", default=str(REPO_ROOT / "outputs" / "laconic-smollm2-cpu"),
                    help="the main job's output folder (its eval/trained index is pruned, never written)")
    ap.add_argument("--models", default="splade-tiny,laconic")
    ap.add_argument("--term-k", default=",".join(map(str, TERM_KS)), help="per-term k values (comma list)")
    ap.add_argument("--doc-k", default=",".join(map(str, DOC_KS)), help="per-document k values (comma list)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--top-k", type=int, default=1000)
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    settings = ([(int(k), None) for k in args.term_k.split(",") if k] + [(None, int(k)) for k in
                args.doc_k.split(",") if k] + list(BOTH))
    rows = []
    for name in args.models.split(","):
        folder = splade_tiny_index(work) if name == "splade-tiny" else Path(args.laconic)
        rows += bench_model(name, folder, work, settings, args.repeats, args.top_k)
        _write(args, rows)  # after every model: a long run leaves what it measured
    return _write(args, rows)


def _write(args, rows: list[dict]) -> dict:
    result = {"benchmark": "prune", "dataset": "scifact", "split": "test", "top_k": args.top_k,
              "repeats": args.repeats, "rows": rows,
              "machine": {"platform": platform.platform(), "python": sys.version.split()[0],
                          "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(rows))
    print(f"written: {args.out}")
    return result


if __name__ == "__main__":
    main()
