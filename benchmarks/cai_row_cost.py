"""Cost of one CAI ablation model and of the rows that re-use its index (lexray.vocab.cai_ablation).

    python benchmarks/cai_row_cost.py [--out outputs/benchmarks/cai_row_cost.json] [--work outputs/bench-cai]

Runs, through ``lexray cai-ablation`` (so the figures are the table's own): the ``train-splade`` step (50 steps of
jobs/configs/cai-splade-tiny-finetune.yaml, then encoding and indexing the 5,183 SciFact documents and the test
evaluation) and four rows of that model — ``splade`` (plain), ``splade-idf``, ``splade-sqrt-idf`` and
``splade-hybrid`` — each a ``lexray evaluate --index`` on the step's index. Baseline in the same run: the step
itself, i.e. what every row would cost if it re-encoded the corpus. Reports the seconds of each from the step's and
rows' records (``step.json``, ``row.json``), the scores, and ``row_vs_step`` (row seconds / step seconds).

The brief's budget is one model (train + encode + evaluate) ≤ ~6 min on the quiet 2-core machine; the work folder
is removed first unless ``--keep`` (so the step really runs).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROWS = ("splade", "splade-idf", "splade-sqrt-idf", "splade-hybrid")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "benchmarks" / "cai_row_cost.json")
    ap.add_argument("--work", type=Path, default=REPO / "outputs" / "bench-cai")
    ap.add_argument("--keep", action="store_true", help="keep finished steps and rows of --work (no re-run)")
    args = ap.parse_args()
    if args.work.exists() and not args.keep:
        shutil.rmtree(args.work)
    subprocess.run([sys.executable, str(REPO / "jobs" / "cai_ablation.py"), "--out", str(args.work),
                    "--rows", ",".join(ROWS)], check=True, cwd=REPO)
    step = json.loads((args.work / "steps" / "train-splade" / "step.json").read_text())
    rows = {r: json.loads((args.work / "rows" / r / "row.json").read_text()) for r in ROWS}
    res = {"step_train_splade_s": step["seconds"],
           "rows": {r: {"seconds": v["row_s"], "row_vs_step": v["row_s"] / step["seconds"],
                        "nDCG@10": v["metrics"]["nDCG@10"], "R@100": v["metrics"]["R@100"]}
                    for r, v in rows.items()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
