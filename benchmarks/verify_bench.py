"""Cost of index verification (`lexray verify --index`) against the cost of opening the index (`open_index`).

Decides whether verify-on-open is affordable: ``open_index(path)`` checks every index file against the sha256
recorded in ``stats.json`` before searching (``verify=False`` skips it). Per index, ``--repeats`` rounds of:
``lexray verify --index`` (seconds, MB/s), ``open_index(verify=False)`` and ``open_index(verify=True)``, each with
the 1-minute load average. The first round includes cold caches and imports; the JSON keeps every round.

Run (the SciFact figures of docs/operations.md; the default index is the main job's trained LACONIC SciFact index,
5,183 documents, an ignored output of ``python jobs/train_laconic.py``):

    .venv/bin/python benchmarks/verify_bench.py --out outputs/benchmarks/verify.json

The 1M / 3M / 10M synthetic indexes are measured by ``benchmarks/scale_bench.py`` (its ``verify`` entries).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(index: Path, repeats: int) -> dict:
    """Rounds of verify / open without verify / open with verify on one index folder."""
    import lexray
    from lexray.commands.verify import main as verify

    rounds = []
    for _ in range(repeats):
        load = os.getloadavg()[0]
        t = time.perf_counter()
        r = verify(["--index", str(index)])
        v = time.perf_counter() - t
        t = time.perf_counter()
        lexray.open_index(index, verify=False).close()
        o = time.perf_counter() - t
        t = time.perf_counter()
        lexray.open_index(index, verify=True).close()
        ov = time.perf_counter() - t
        rounds.append({"verify_seconds": v, "bytes": r["bytes"], "mb_per_s": r["bytes"] / 1e6 / v,
                       "open_seconds": o, "open_verified_seconds": ov, "load_avg_1min": [load, os.getloadavg()[0]]})
    best = min(rounds[1:] or rounds, key=lambda x: x["verify_seconds"])
    return {"index": str(index), "rounds": rounds, "best_warm": best,
            "verify_over_open": best["verify_seconds"] / max(best["open_seconds"], 1e-9)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", nargs="+",
                    default=[str(ROOT / "outputs" / "laconic-smollm2-cpu" / "eval" / "trained" / "index")])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="outputs/benchmarks/verify.json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "platform"))
    res = {"config": vars(args), "cpus": os.cpu_count(), "indexes": [measure(Path(p), args.repeats)
                                                                     for p in args.index]}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps([{"index": r["index"], **r["best_warm"], "verify_over_open": r["verify_over_open"]}
                      for r in res["indexes"]], indent=2))
    return res


if __name__ == "__main__":
    main()
