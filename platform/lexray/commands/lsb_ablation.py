"""``lexray lsb-ablation``: LexSemBridge's ablation (arXiv:2508.17858, Tables 1, 4, 5, 6) at SciFact scale — build
the fine-grained tasks once, run every row (one command or two each), write the table.

    lexray lsb-ablation                                   # every row -> outputs/lsb-ablation/table.md, table.json
    lexray lsb-ablation --rows minilm-none,minilm-slr
    lexray lsb-ablation --dry-run                         # print each row's commands, run nothing

Rows already done (``<out>/<row>/row.json``) are skipped; ``--force`` reruns them (lexray.eval.lsb_ablation).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from lexray.commands.common import select_rows
from lexray.eval import lsb_ablation as ab
from lexray.paths import REPO_ROOT, default_output_dir


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the selected rows in order; returns their results (``[]`` with ``--dry-run``). An unknown ``--rows``
    name is a usage error (exit status 2) naming the known rows."""
    ap = argparse.ArgumentParser(prog="lexray lsb-ablation", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="output folder (default outputs/lsb-ablation)")
    ap.add_argument("--rows", default=None, help="comma-separated row names (default: all, in priority order)")
    ap.add_argument("--dataset", default="shared:datasets/scifact", help="source BEIR collection of the tasks")
    ap.add_argument("--n", type=int, default=200, help="passages per generated task")
    ap.add_argument("--seed", type=int, default=0, help="task seed")
    ap.add_argument("--corpus-docs", type=int, default=1000, help="shared sub-corpus size (0 = the whole corpus)")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--force", action="store_true", help="rerun rows that are done already")
    args = ap.parse_args(argv)
    out = (args.out or default_output_dir() / "lsb-ablation").resolve()
    rows = select_rows(ap, ab.rows(), args.rows)
    from lexray.paths import resolve_local

    dataset = str(resolve_local(args.dataset) or args.dataset)
    tasks_cmd = ab.tasks_command(dataset, out, args.n, args.seed, args.corpus_docs or None)
    if args.dry_run:
        print(ab.shell_line(tasks_cmd))
        for r in rows:
            print(f"# {r.label}")
            for c in ab.row_commands(r, out):
                print(ab.shell_line(c))
        return []
    # a tasks folder from before the held-out corpus existed is built again: same seed, byte-identical task files
    heldout = any(r.train_data == "heldout" for r in rows) and not (out / "tasks" / ab.HELDOUT / "corpus.jsonl").is_file()
    if heldout or not (out / "tasks" / "lexray_tasks.json").is_file():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, *tasks_cmd[1:]], check=True, cwd=REPO_ROOT)
    t0 = time.perf_counter()
    results = []
    for i, r in enumerate(rows):
        print(f"[lsb-ablation] row {i + 1}/{len(rows)}: {r.label}  ({(time.perf_counter() - t0) / 60:.1f} min so far)",
              flush=True)
        try:
            results.append(ab.run_row(r, out, force=args.force, log=lambda m: print(m, flush=True)))
        except subprocess.CalledProcessError as e:
            print(f"[lsb-ablation] {r.name} failed: {e.cmd} ({e.output})", flush=True)
            continue
        done = ab.done_rows(out)  # every finished row, also those of another invocation
        (out / "table.md").write_text(ab.markdown(done) + "\n")
        (out / "table.json").write_text(json.dumps(done, indent=1))
    print(ab.markdown(ab.done_rows(out)))
    print(f"table: {out / 'table.md'}  ({(time.perf_counter() - t0) / 60:.1f} min in this invocation)")
    return results
