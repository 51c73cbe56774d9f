"""What the multi-node and fault-injection tests add to CI (issue 24: at most 4 minutes together).

Runs, in this order, each as its own pytest process (as ``scripts/test.sh`` does):

    baseline    ``pytest tests/test_ray_utils.py`` (a small, Ray-free slice of the main suite: the fixed cost of
                one pytest start and collection on this machine, measured in the same run)
    storage     ``pytest tests/test_storage_faults.py`` (main suite: ENOSPC/EIO shims, read-only refusal)
    cluster     ``pytest -m cluster tests/cluster`` (the second pytest call: 3-node cluster, encode/DDP/Tune
                across nodes, lost node, killed workers, hygiene)

Writes JSON (default ``outputs/bench/ci_fault_tests_time.json``): wall seconds per arm, pass/fail, the 1-minute
load average before and after, and ``added_s`` = storage + cluster. Timings from a loaded machine are not
publishable: report the load with them.

    python benchmarks/ci_fault_tests_time.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARMS = {
    "baseline": ["tests/test_ray_utils.py"],
    "storage": ["tests/test_storage_faults.py"],
    "cluster": ["-m", "cluster", "tests/cluster"],
}


def run_arm(args: list[str]) -> dict:
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "PYTHONPATH": str(REPO / "platform") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=REPO,
                          env=env, capture_output=True, text=True)
    return {"seconds": round(time.perf_counter() - t0, 1), "returncode": proc.returncode,
            "summary": (proc.stdout.strip().splitlines() or [""])[-1]}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "outputs" / "bench" / "ci_fault_tests_time.json"))
    a = ap.parse_args(argv)
    result = {"load_before": os.getloadavg()[0], "cpus": os.cpu_count()}
    for name, args in ARMS.items():
        result[name] = run_arm(args)
        print(name, result[name], flush=True)
    result["load_after"] = os.getloadavg()[0]
    result["added_s"] = round(result["storage"]["seconds"] + result["cluster"]["seconds"], 1)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
