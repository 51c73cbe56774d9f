"""Index build throughput and peak memory as the corpus grows tenfold (100k -> 1M synthetic documents).

Each build runs in a fresh subprocess that reports its own peak resident memory (``getrusage(RUSAGE_SELF)
.ru_maxrss``, which includes DuckDB's native allocations); a psutil poller in the parent cross-checks it. Shards
are synthetic (``search_bench.write_synthetic_shards``: ~150 non-zeros per document, Zipf-like terms over
|V| = 30,522), written in 50k-document Parquet files.

Run:  .venv/bin/python benchmarks/index_build_bench.py [--sizes 100000 1000000] [--out ...]
Goal: peak RSS < 2 GiB at 1M documents, i.e. memory does not grow with the corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {platform!r})
from lexray.config import IndexConfig
from lexray.index.build import build_index
t = time.perf_counter()
st = build_index({shards!r}, {index!r}, IndexConfig(memory_limit={mem!r}, threads={threads!r}), show_progress=False)
sec = time.perf_counter() - t
print("RESULT:" + json.dumps({{"stats": st.to_dict(), "seconds": sec,
                   "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}}))
"""


def run_child(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; its ``RESULT:`` JSON plus the polled peak RSS, wall time and the
    1-minute load average before and after (numbers from a loaded machine are not publishable)."""
    import psutil

    load0 = os.getloadavg()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    peak = [0]
    done = threading.Event()

    def poll():
        p = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                peak[0] = max(peak[0], p.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.05)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    t = time.perf_counter()
    out, _ = proc.communicate()
    wall = time.perf_counter() - t
    done.set()
    th.join()
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed with exit code {proc.returncode}")
    res = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT:")][-1][len("RESULT:"):])
    res.update(polled_peak_rss_bytes=peak[0], child_wall_seconds=wall,
               load_avg_1min=[load0[0], os.getloadavg()[0]])
    return res


def run_build(shards: Path, index: Path, memory_limit: str, threads: int | None) -> dict:
    """One index build in a fresh interpreter (:func:`run_child`)."""
    return run_child(CHILD.format(platform=str(ROOT / "platform"), shards=str(shards), index=str(index),
                                  mem=memory_limit, threads=threads))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--nnz", type=int, default=150)
    ap.add_argument("--memory-limit", default="1GB", help="DuckDB memory_limit for the build")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--out", default="outputs/benchmarks/index_build.json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from search_bench import write_synthetic_shards

    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="lexray-index-bench-"))
    results = []
    try:
        for n in args.sizes:
            shards = work / f"shards-{n}"
            t = time.perf_counter()
            man = write_synthetic_shards(shards, n, args.nnz)
            gen_s = time.perf_counter() - t
            r = run_build(shards, work / f"index-{n}", args.memory_limit, args.threads)
            st = r["stats"]
            results.append({
                "n_docs": n, "n_postings": st["n_postings"], "build_seconds": r["seconds"],
                "postings_per_second": st["n_postings"] / r["seconds"],
                "peak_rss_bytes": r["maxrss_bytes"], "peak_rss_gib": r["maxrss_bytes"] / 2**30,
                "polled_peak_rss_gib": r["polled_peak_rss_bytes"] / 2**30,
                "index_bytes": st["index_bytes"], "shard_bytes": sum(p.stat().st_size for p in shards.glob("*.parquet")),
                "shards_seconds": gen_s, "flops": st["flops"], "avg_nnz_per_doc": st["avg_nnz_per_doc"],
                "synthetic_postings": man["n_postings"]})
            print(json.dumps(results[-1]), flush=True)
            shutil.rmtree(shards, ignore_errors=True)
            shutil.rmtree(work / f"index-{n}", ignore_errors=True)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    res = {"config": vars(args), "cpus": os.cpu_count(), "runs": results}
    if len(results) >= 2:
        res["rss_growth"] = results[-1]["peak_rss_bytes"] / results[0]["peak_rss_bytes"]
        res["corpus_growth"] = results[-1]["n_docs"] / results[0]["n_docs"]
    res["goal_peak_rss_under_2gib"] = all(r["peak_rss_gib"] < 2 for r in results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "runs"}, indent=2))
    return res


if __name__ == "__main__":
    main()
