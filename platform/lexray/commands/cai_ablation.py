"""``lexray cai-ablation``: CAI's Table 1 and Table 3 (Iida & Okazaki, arXiv:2211.03988,
../shared/papers/cai-vocabulary-idf-domain-adaptation.txt) at SciFact scale with splade-tiny, plus Cranfield —
run every row (its shared steps once: AdaLM, training, encoding) and write the table.

    lexray cai-ablation                              # every row -> outputs/cai-ablation/table.md, table.json
    lexray cai-ablation --rows splade,splade-hybrid,cai-hybrid
    lexray cai-ablation --tables t1                  # t1 (SciFact Table 1), t3 (Table 3), cranfield
    lexray cai-ablation --dry-run                    # print each row's steps and command, run nothing

Every row is one ``lexray evaluate`` command on an index its steps built (``--dry-run`` prints them all); rows
and steps already done are skipped, so an interrupted table resumes. Recipes:
jobs/configs/cai-splade-tiny-scifact.yaml (AdaLM) and cai-splade-tiny-finetune.yaml (the SPLADE training).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lexray.commands.common import select_rows
from lexray.paths import default_output_dir
from lexray.vocab import cai_ablation as ab


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray cai-ablation", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="output folder (default outputs/cai-ablation)")
    ap.add_argument("--rows", default=None, help="comma-separated row names (default: all, in table order)")
    ap.add_argument("--tables", default=None, help="comma-separated parts: t1, t3, cranfield (default: all)")
    ap.add_argument("--adapt-config", type=Path, default=ab.ADAPT_RECIPE)
    ap.add_argument("--finetune-config", type=Path, default=ab.FINETUNE_RECIPE)
    ap.add_argument("--set-finetune", action="append", default=[], metavar="KEY=VALUE",
                    help="extra --set for every training run (repeatable)")
    ap.add_argument("--dry-run", action="store_true", help="print the steps and command of each row and exit")
    ap.add_argument("--force", action="store_true", help="rerun the selected rows (not their steps)")
    return ap


def _select(ap: argparse.ArgumentParser, args) -> list[ab.Row]:
    rows = ab.all_rows()
    if args.tables:
        tables = [t.strip() for t in args.tables.split(",") if t.strip()]
        bad = [t for t in tables if t not in ab.TITLES]
        if bad:
            ap.error(f"--tables: unknown part(s) {', '.join(bad)}; parts: {', '.join(ab.TITLES)}")
        rows = [r for r in rows if r.table in tables]
    return select_rows(ap, rows, args.rows)


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the selected rows in table order; returns their results (``[]`` with ``--dry-run``). An unknown
    ``--rows`` or ``--tables`` name is a usage error (exit status 2) naming the known ones."""
    ap = build_parser()
    args = ap.parse_args(argv)
    out = (args.out or default_output_dir() / "cai-ablation").resolve()
    rows = _select(ap, args)
    plan = ab.Plan(out, args.adapt_config, args.finetune_config, tuple(args.set_finetune), resolve=not args.dry_run)
    if args.dry_run:
        seen: set[str] = set()
        for r in rows:
            print(f"# {r.name}: {r.label}")
            for s in plan.steps_of(r):
                if s not in seen:
                    seen.add(s)
                    print(f"#   step {s}:\n{ab.shell_line(plan.step_command(s))}")
            print(ab.shell_line(plan.row_command(r)))
        return []
    t0 = time.perf_counter()
    results = []
    for i, r in enumerate(rows):
        print(f"[cai-ablation] row {i + 1}/{len(rows)}: {r.label} [{r.table}]  "
              f"({(time.perf_counter() - t0) / 60:.1f} min so far)", flush=True)
        results.append(ab.run_row(r, plan, force=args.force, log=lambda m: print(m, flush=True)))
        done = ab.finished_rows(plan)  # the table holds every finished row of out, not only this invocation's
        (out / "table.md").write_text(ab.markdown(done))
        (out / "table.json").write_text(json.dumps(done, indent=1))
    print(ab.markdown(ab.finished_rows(plan)))
    print(f"table: {out / 'table.md'}  ({(time.perf_counter() - t0) / 60:.1f} min in this invocation)")
    return results
