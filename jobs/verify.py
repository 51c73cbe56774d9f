"""Check a built index or a collection store against the checksums lexray recorded when it wrote them.

    python jobs/verify.py --index OUT/index
    python jobs/verify.py --store outputs/scifact-store

The same as ``lexray verify`` (lexray.commands.verify).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
