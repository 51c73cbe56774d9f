"""CAI's Table 1 and Table 3 (arXiv:2211.03988, ../shared/papers/cai-vocabulary-idf-domain-adaptation.txt) at
SciFact scale with splade-tiny, plus Cranfield: run every row, write the table.

    python jobs/cai_ablation.py                      # every row -> outputs/cai-ablation/table.md, table.json
    python jobs/cai_ablation.py --tables t1          # SciFact Table 1 rows only (t1, t3, cranfield)
    python jobs/cai_ablation.py --dry-run            # print each row's steps and command, run nothing

Rows and their shared steps (AdaLM, training, encoding) already done are skipped; docs/recipes.md has the table.
The same as ``lexray cai-ablation`` (lexray.commands.cai_ablation).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
