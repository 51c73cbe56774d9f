"""Scale curve of the index build, exact search, Seismic and `lexray verify` at 1M, 3M and 10M documents.

Collections: ``search_bench.write_synthetic_shards`` (the generator every index benchmark uses): ``--nnz`` (120)
distinct terms per document on average (±10 %), Zipf-like over |V| = 30,522 (p(rank r) ∝ 1/(r + 10)),
log-normal weights, 50k-document Parquet shards with a complete manifest. Each collection is generated once into
``--work-dir`` (default /tmp/lexray-scale, outside the repository) and reused by later runs.

Per size, each step in a fresh subprocess so that its peak resident memory is its own (``getrusage`` max RSS,
including DuckDB's and Seismic's native allocations, cross-checked by a psutil poller in this process):

* build: ``build_index`` with the production ``IndexConfig`` (DuckDB ``memory_limit`` ``--memory-limit``,
  default 2GB as in config.py) — wall time, peak RSS, index size on disk;
* exact search: the production searcher (``ExactSearcher`` as ``open_index`` opens it: numba, all threads) on
  ``--queries`` (1,000) synthetic queries of ~30 terms, top-10; one untimed warm pass (page cache, JIT), then
  ``--repeats`` timed passes (QPS = best); the top-10 are saved for Seismic's recall;
* Seismic (pyseismic-lsr, ``SeismicSearcher`` with the library build defaults) where it fits in memory: its
  memory per document is measured at the smallest size run, and a size runs only if the projection stays under
  ``--seismic-budget-gib`` (default 16 of the 24 GiB machine); otherwise the JSON records the estimate and the
  reason. ``--seismic-sizes`` restricts further (Seismic's build is slow: ~9 minutes at 1M on a quiet machine);
  a skipped size records why. Recall@10 is against the exact top-10 of the same queries;
* verify: ``lexray verify --index`` (sha256 of every index file against stats.json) — seconds and MB/s, and the
  cost of opening the index (``open_index``'s ``ExactSearcher`` + doc-id map) beside it.

Every timing carries the 1-minute load average before and after it (the machine may be shared).

Run (the reported table, docs/indexing.md "Scale curve"):

    .venv/bin/python benchmarks/scale_bench.py --out outputs/benchmarks/scale.json

Goals: peak build RSS ≤ 4 GiB at 10M documents; build time 10M / 1M close to 10 (linear).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PLATFORM = str(ROOT / "platform")

SEARCH_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {platform!r}); sys.path.insert(0, {here!r})
import numpy as np
from search_bench import sample_sparse, zipf_probs
from lexray.index.search import ExactSearcher
rng = np.random.default_rng(123)
q_ids, q_ws = sample_sparse(rng, {queries}, {query_nnz}, zipf_probs(seed=0))
t = time.perf_counter()
ex = ExactSearcher({index!r})
ex.doc_ids
open_s = time.perf_counter() - t
def run():
    outs = [ex.search(q_ids[s:s + 256], q_ws[s:s + 256], {k}) for s in range(0, len(q_ids), 256)]
    return np.concatenate([o[1] for o in outs])
t = time.perf_counter(); ref = run(); warm_s = time.perf_counter() - t
secs, loads = [], []
for _ in range({repeats}):
    l0 = __import__("os").getloadavg()[0]; t = time.perf_counter(); run(); secs.append(time.perf_counter() - t)
    loads.append([l0, __import__("os").getloadavg()[0]])
np.save({ref_out!r}, ref)
print("RESULT:" + json.dumps({{"open_seconds": open_s, "warm_pass_seconds": warm_s, "seconds": secs,
      "load_avg": loads, "threads": ex.n_threads, "avg_query_nnz": float(np.mean([len(x) for x in q_ids])),
      "avg_postings_per_query": float(np.mean([np.diff(ex.offsets)[np.unique(x)].sum() for x in q_ids])),
      "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}))
"""

SEISMIC_CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {platform!r}); sys.path.insert(0, {here!r})
import numpy as np
from search_bench import sample_sparse, zipf_probs
from lexray.index.seismic import SeismicSearcher, recall_at_k
rng = np.random.default_rng(123)
q_ids, q_ws = sample_sparse(rng, {queries}, {query_nnz}, zipf_probs(seed=0))
ref = np.load({ref!r})
l0 = os.getloadavg()[0]; t = time.perf_counter()
sei = SeismicSearcher({index!r})
build_s = time.perf_counter() - t; build_load = [l0, os.getloadavg()[0]]
rss_after_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
sweep = []
for qc, hf in {grid!r}:
    secs = []
    for _ in range({repeats}):
        l0 = os.getloadavg()[0]; t = time.perf_counter()
        _, d = sei.search(q_ids, q_ws, {k}, query_cut=qc, heap_factor=hf)
        secs.append(time.perf_counter() - t)
    sweep.append({{"query_cut": qc, "heap_factor": hf, "qps": len(q_ids) / min(secs), "seconds": secs,
                  "load_avg": [l0, os.getloadavg()[0]], "recall@10": recall_at_k(ref, d, 10)}})
print("RESULT:" + json.dumps({{"build_seconds": build_s, "build_load_avg_1min": build_load, "sweep": sweep,
      "build_params": sei.build_params, "maxrss_after_build_bytes": rss_after_build,
      "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}))
"""

VERIFY_CHILD = r"""
import json, sys, time
sys.path.insert(0, {platform!r})
from lexray.commands.verify import main
t = time.perf_counter(); r = main(["--index", {index!r}]); s = time.perf_counter() - t
print("RESULT:" + json.dumps({{"seconds": s, "bytes": r["bytes"], "problems": r["problems"]}}))
"""

SEISMIC_GRID = [(20, 0.8), (20, 0.9), (30, 0.9)]

from index_build_bench import run_child  # noqa: E402 - the one subprocess runner (peak RSS, load)


def ensure_collection(work: Path, n: int, nnz: int) -> tuple[Path, dict]:
    """The synthetic shards of ``n`` documents in ``work`` (generated once; reused when the manifest is complete)."""
    from search_bench import write_synthetic_shards

    d = work / f"shards-{n}-nnz{nnz}"
    man = d / "manifest.json"
    if man.is_file() and json.loads(man.read_text()).get("status") == "complete":
        return d, {"generated": False}
    shutil.rmtree(d, ignore_errors=True)
    t = time.perf_counter()
    info = write_synthetic_shards(d, n, nnz)
    return d, {"generated": True, "seconds": time.perf_counter() - t, **info}


def measure_size(n: int, args, work: Path, seismic_per_doc: list[float]) -> dict:
    """Build, exact search, Seismic (or the reason it did not run) and verify for one collection size."""
    from index_build_bench import run_build

    g = 2**30
    shards, gen = ensure_collection(work, n, args.nnz)
    index = work / f"index-{n}-nnz{args.nnz}"
    if args.reuse_indexes and (index / "stats.json").is_file():  # built by an earlier run: no RSS measured now
        st = json.loads((index / "stats.json").read_text())
        b = {"stats": st, "seconds": st["build_seconds"], "maxrss_bytes": float("nan"),
             "polled_peak_rss_bytes": float("nan")}
        load0 = float("nan")
    else:
        shutil.rmtree(index, ignore_errors=True)
        load0 = os.getloadavg()[0]
        b = run_build(shards, index, args.memory_limit, args.threads)
        st = b["stats"]
    row = {"n_docs": n, "n_postings": st["n_postings"], "avg_nnz_per_doc": st["avg_nnz_per_doc"],
           "build_seconds": b["seconds"], "postings_per_second": st["n_postings"] / b["seconds"],
           "build_load_avg_1min": [load0, os.getloadavg()[0]],
           "build_peak_rss_gib": b["maxrss_bytes"] / g, "build_polled_peak_rss_gib": b["polled_peak_rss_bytes"] / g,
           "index_bytes": st["index_bytes"], "shard_bytes": sum(p.stat().st_size for p in shards.glob("*.parquet")),
           "collection": gen, "memory_limit": args.memory_limit}
    print(json.dumps({k: v for k, v in row.items() if k != "collection"}), flush=True)
    ref = work / f"exact-top10-{n}.npy"
    s = run_child(SEARCH_CHILD.format(platform=PLATFORM, here=str(HERE), index=str(index), queries=args.queries,
                                      query_nnz=args.query_nnz, k=10, repeats=args.repeats, ref_out=str(ref)))
    row["exact"] = {"qps": args.queries / min(s["seconds"]), "qps_runs": [args.queries / x for x in s["seconds"]],
                    "load_avg_1min": s["load_avg"], "warm_pass_qps": args.queries / s["warm_pass_seconds"],
                    "threads": s["threads"], "avg_query_nnz": s["avg_query_nnz"], "open_seconds": s["open_seconds"],
                    "avg_postings_per_query": s["avg_postings_per_query"],
                    "ns_per_posting": 1e9 * min(s["seconds"]) / args.queries / s["avg_postings_per_query"],
                    "peak_rss_gib": s["maxrss_bytes"] / g}
    print(json.dumps({"n_docs": n, "exact": row["exact"]}), flush=True)
    row["seismic"] = run_seismic(n, args, index, ref, seismic_per_doc)
    v = run_child(VERIFY_CHILD.format(platform=PLATFORM, index=str(index)))
    row["verify"] = {"seconds": v["seconds"], "bytes": v["bytes"], "mb_per_s": v["bytes"] / 1e6 / v["seconds"],
                     "ok": not v["problems"], "load_avg_1min": v["load_avg_1min"],
                     "open_seconds": s["open_seconds"], "verify_over_open": v["seconds"] / s["open_seconds"]}
    print(json.dumps({"n_docs": n, "verify": row["verify"]}), flush=True)
    if not args.keep_indexes:
        shutil.rmtree(index, ignore_errors=True)
    return row


def run_seismic(n: int, args, index: Path, ref: Path, per_doc: list[float]) -> dict:
    """Seismic at size ``n`` if it fits (``per_doc``: bytes per document measured at a smaller size, filled by the
    first run); else the reason and the estimate."""
    g = 2**30
    est = {"estimated_peak_rss_gib": per_doc[0] * n / g, "per_doc_bytes_measured": per_doc[0]} if per_doc else {}
    if est and est["estimated_peak_rss_gib"] > args.seismic_budget_gib:
        return {"ran": False, **est, "reason": f"does not fit: projected peak RSS {est['estimated_peak_rss_gib']:.1f} "
                f"GiB > budget {args.seismic_budget_gib} GiB of this 24 GiB machine (page cache for the exact "
                "index and the OS need the rest)"}
    if args.seismic_sizes is not None and n not in args.seismic_sizes:
        return {"ran": False, **est, "reason": "skipped in this run (--seismic-sizes)"}
    r = run_child(SEISMIC_CHILD.format(platform=PLATFORM, here=str(HERE), index=str(index), ref=str(ref),
                                       queries=args.queries, query_nnz=args.query_nnz, k=10, repeats=args.repeats,
                                       grid=SEISMIC_GRID))
    peak = max(r["maxrss_bytes"], r["polled_peak_rss_bytes"])
    if not per_doc:
        per_doc.append(peak / n)
    ok = [m for m in r["sweep"] if m["recall@10"] >= 0.999]
    best = max(ok, key=lambda m: m["qps"]) if ok else max(r["sweep"], key=lambda m: m["recall@10"])
    out = {"ran": True, "build_seconds": r["build_seconds"], "build_load_avg_1min": r["build_load_avg_1min"],
           "peak_rss_gib": peak / g, "per_doc_bytes": peak / n, "qps": best["qps"], "recall@10": best["recall@10"],
           "query_cut": best["query_cut"], "heap_factor": best["heap_factor"], "sweep": r["sweep"],
           "build_params": r["build_params"]}
    print(json.dumps({"n_docs": n, "seismic": {k: v for k, v in out.items() if k != "sweep"}}), flush=True)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 3_000_000, 10_000_000])
    ap.add_argument("--nnz", type=int, default=120, help="average distinct terms per document")
    ap.add_argument("--memory-limit", default="2GB", help="DuckDB memory_limit (config.py's index.memory_limit)")
    ap.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: all cores)")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--query-nnz", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2, help="timed search passes after the warm one (QPS = best)")
    ap.add_argument("--seismic-budget-gib", type=float, default=16.0)
    ap.add_argument("--seismic-sizes", type=int, nargs="*", default=None,
                    help="sizes to run Seismic at (default: every size where it fits)")
    ap.add_argument("--work-dir", default="/tmp/lexray-scale", help="collections are generated here once, reused")
    ap.add_argument("--keep-indexes", action="store_true", help="keep the built indexes (default: deleted)")
    ap.add_argument("--reuse-indexes", action="store_true", help="search an index an earlier run left in --work-dir "
                    "instead of building it (build figures from its stats.json, peak RSS not measured)")
    ap.add_argument("--out", default="outputs/benchmarks/scale.json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, PLATFORM)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    per_doc: list[float] = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for n in sorted(args.sizes):  # the JSON is rewritten after every size: a long run stopped midway keeps its rows
        rows.append(measure_size(n, args, work, per_doc))
        res = _result(args, rows)
        out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res["summary"], indent=2))
    return res


def _result(args, rows: list[dict]) -> dict:
    """The JSON of the sizes measured so far (``summary`` compares the largest with the smallest)."""
    res = {"config": vars(args), "cpus": os.cpu_count(), "provisional_if_loaded": True, "runs": rows,
           "complete": len(rows) == len(args.sizes)}
    first, last = rows[0], rows[-1]
    peaks = [max(r["build_peak_rss_gib"], r["build_polled_peak_rss_gib"]) for r in rows
             if r["build_peak_rss_gib"] == r["build_peak_rss_gib"]]  # NaN: reused index, not measured
    res["summary"] = {
        "build_time_ratio": last["build_seconds"] / first["build_seconds"],
        "corpus_ratio": last["n_docs"] / first["n_docs"],
        "max_build_peak_rss_gib": max(peaks) if peaks else None,
        "goal_build_peak_rss_le_4gib": all(p <= 4 for p in peaks) if peaks else None}
    return res


if __name__ == "__main__":
    main()
