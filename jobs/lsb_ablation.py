"""LexSemBridge's ablation (arXiv:2508.17858, Tables 1, 4, 5, 6) at SciFact scale: build the fine-grained tasks,
run every row (train-dense, then one evaluate over the five task folders), write the table.

    python jobs/lsb_ablation.py                                # every row -> outputs/lsb-ablation/table.md
    python jobs/lsb_ablation.py --rows minilm-none,minilm-slr
    python jobs/lsb_ablation.py --dry-run                      # print each row's commands, run nothing

Rows already done (``<out>/<row>/row.json``) are skipped; ``--force`` reruns them.
The same as ``lexray lsb-ablation`` (lexray.commands.lsb_ablation).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
