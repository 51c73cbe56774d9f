"""``lexray vt-ablation``: the VT initialization ablation (Vocabulary Transfer, arXiv:2607.00004,
../shared/papers/vocabulary-transfer-vt.txt §6.2.1, Table 3) at SciFact scale — run every row (a migration, then
the same short SPLADE training and evaluation) and write the table.

    lexray vt-ablation                               # all 10 rows -> outputs/vt-t3/table.md, table.json
    lexray vt-ablation --rows native,semantic-adapted
    lexray vt-ablation --dry-run                     # print each row's commands, run nothing

Each row is also two plain commands (``--dry-run`` prints them; docs/recipes.md lists them), so any single row
reproduces without this command. Rows already done (``<out>/<row>/row.json``) are skipped; ``--force`` reruns
them. Recipes: jobs/configs/vt-smollm2-scifact.yaml (migration) and vt-smollm2-scifact-finetune.yaml (training).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lexray.commands.common import select_rows
from lexray.paths import default_output_dir
from lexray.vocab import ablation


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray vt-ablation", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="output folder (default outputs/vt-t3)")
    ap.add_argument("--rows", default=None, help="comma-separated row names (default: all, in table order)")
    ap.add_argument("--migrate-config", type=Path, default=ablation.MIGRATE_RECIPE)
    ap.add_argument("--finetune-config", type=Path, default=ablation.FINETUNE_RECIPE)
    ap.add_argument("--set-migrate", action="append", default=[], metavar="KEY=VALUE",
                    help="extra --set for every migration (repeatable)")
    ap.add_argument("--set-finetune", action="append", default=[], metavar="KEY=VALUE",
                    help="extra --set for every training run (repeatable)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands of each row and exit")
    ap.add_argument("--force", action="store_true", help="rerun rows that are done already")
    return ap


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the selected rows in table order (each in its own processes); returns their results (``[]`` with
    ``--dry-run``). An unknown ``--rows`` name is a usage error (exit status 2) naming the known rows."""
    ap = build_parser()
    args = ap.parse_args(argv)
    out = (args.out or default_output_dir() / "vt-t3").resolve()
    rows = select_rows(ap, ablation.table3_rows(ablation.native_overrides(args.migrate_config,
                                                                          tuple(args.set_migrate))), args.rows)
    kw = dict(migrate_recipe=args.migrate_config, finetune_recipe=args.finetune_config,
              migrate_sets=tuple(args.set_migrate), finetune_sets=tuple(args.set_finetune))
    if args.dry_run:
        for r in rows:
            print(f"# {r.label}")
            for c in ablation.row_commands(r, out, **kw):
                print(ablation.shell_line(c))
        return []
    t0 = time.perf_counter()
    results = []
    for i, r in enumerate(rows):
        print(f"[vt-ablation] row {i + 1}/{len(rows)}: {r.label}  ({(time.perf_counter() - t0) / 60:.1f} min so far)",
              flush=True)
        results.append(ablation.run_row(r, out, force=args.force, log=lambda m: print(m, flush=True), **kw))
        table = ablation.markdown(results)
        (out / "table.md").write_text(table + "\n")
        (out / "table.json").write_text(json.dumps(results, indent=1))
    print(ablation.markdown(results))
    print(f"table: {out / 'table.md'}  ({(time.perf_counter() - t0) / 60:.1f} min in this invocation)")
    return results
