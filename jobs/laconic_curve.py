"""The LACONIC compute curve on SmolLM2-135M: the main job's recipe over kept layers {2, 4, 8, 16, 30} × training
steps {200, 800}, one plain command per cell, resumable; the table lands in outputs/laconic-curve/table.md.

    python jobs/laconic_curve.py --cells L2-S200,L4-S200,L8-S200
    python jobs/laconic_curve.py --cells L2-S200 --seeds 0,1
    python jobs/laconic_curve.py --dry-run

The same as ``lexray laconic-curve`` (lexray.commands.laconic_curve).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
