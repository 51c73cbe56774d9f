"""The VT initialization ablation (Vocabulary Transfer, arXiv:2607.00004,
../shared/papers/vocabulary-transfer-vt.txt §6.2.1, Table 3) at SciFact scale: run every row (a migration, then
the same short SPLADE training and evaluation), write the table.

    python jobs/vt_ablation.py                               # all 10 rows -> outputs/vt-t3/table.md, table.json
    python jobs/vt_ablation.py --rows native,semantic-adapted
    python jobs/vt_ablation.py --dry-run                     # print each row's commands, run nothing

Each row is also two plain commands (``--dry-run`` prints them; docs/recipes.md lists them), so any single row
reproduces without this script. Rows already done (``<out>/<row>/row.json``) are skipped; ``--force`` reruns them.
Recipes: jobs/configs/vt-smollm2-scifact.yaml (migration) and vt-smollm2-scifact-finetune.yaml (training).

The same as ``lexray vt-ablation`` (lexray.commands.vt_ablation).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
