"""``lexray laconic-curve``: the LACONIC compute curve on SmolLM2-135M (arXiv:2601.01684; issue 28) — the main job's
recipe rerun over kept layers × training steps, one plain command per cell (:mod:`lexray.train.curve`).

    lexray laconic-curve                          # 2,4,8,16,30 layers x 320,1280 steps -> outputs/laconic-curve/
    lexray laconic-curve --cells L2-S320,L4-S320  # chosen cells, in the order given
    lexray laconic-curve --cells L2-S320 --seeds 0,1   # the seed spread of a cell
    lexray laconic-curve --dry-run                # print each cell's command, run nothing

Cells already done (``<out>/<cell>/row.json``) are skipped; ``--force`` reruns them. The table goes to
``<out>/table.md`` and ``table.json`` after every cell, so an interrupted curve keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lexray import ablation
from lexray.paths import default_output_dir
from lexray.train import curve


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray laconic-curve", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="output folder (default outputs/laconic-curve)")
    ap.add_argument("--cells", default=None,
                    help="comma-separated cells L<layers>-S<steps>[-seed<n>] (default: every layers x steps cell)")
    ap.add_argument("--seeds", default=None, help="comma-separated train.seed values applied to every cell")
    ap.add_argument("--config", type=Path, default=curve.RECIPE, help="the recipe (default: the main job's)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="extra --set for every cell (repeatable)")
    ap.add_argument("--dry-run", action="store_true", help="print each cell's command and exit")
    ap.add_argument("--force", action="store_true", help="rerun cells that are done already")
    return ap


def _cells(ap: argparse.ArgumentParser, args) -> list[curve.Cell]:
    try:
        seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else (None,)
    except ValueError:
        ap.error(f"--seeds {args.seeds!r}: expected comma-separated integers")
    if not args.cells:
        return curve.cells(seeds=seeds)
    try:
        named = [curve.parse_cell(n.strip()) for n in args.cells.split(",") if n.strip()]
    except ValueError as e:
        ap.error(f"--cells: {e}")
    if args.seeds:
        named = [curve.Cell(c.layers, c.steps, s) for c in named for s in seeds]
    return named


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the selected cells in order (each the main job in its own process); returns their records (``[]`` with
    ``--dry-run``). A malformed ``--cells`` or ``--seeds`` is a usage error (exit status 2)."""
    ap = build_parser()
    args = ap.parse_args(argv)
    out = (args.out or default_output_dir() / "laconic-curve").resolve()
    cells = _cells(ap, args)
    if args.dry_run:
        for c in cells:
            for cmd in curve.cell_commands(c, out, args.config, tuple(args.sets)):
                print(ablation.shell_line(cmd))
        return []
    t0 = time.perf_counter()
    results = []
    for i, c in enumerate(cells):
        print(f"[laconic-curve] cell {i + 1}/{len(cells)}: {c.name}  ({(time.perf_counter() - t0) / 60:.1f} min so "
              "far)", flush=True)
        cmds = curve.cell_commands(c, out, args.config, tuple(args.sets))
        results.append(ablation.run_row(c.name, out / c.name, cmds,
                                        lambda seconds, c=c: curve.collect(c, out, seconds), force=args.force,
                                        log=lambda m: print(m, flush=True), tag="laconic-curve"))
        (out / "table.md").write_text(curve.markdown(results) + "\n")
        (out / "table.json").write_text(json.dumps(results, indent=1))
    print(curve.markdown(results))
    print(f"table: {out / 'table.md'}  ({(time.perf_counter() - t0) / 60:.1f} min in this invocation)")
    return results
