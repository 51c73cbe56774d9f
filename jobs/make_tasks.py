"""LexSemBridge's fine-grained retrieval tasks (arXiv:2508.17858, §3.3: Keyword, Part-of-Passage 16/32/64, Query)
from a BEIR collection, as seeded BEIR folders.

    python jobs/make_tasks.py --dataset ../shared/datasets/scifact --out outputs/lsb-tasks [--n 200 --seed 0]

The same as ``lexray make-tasks`` (lexray.commands.make_tasks).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
