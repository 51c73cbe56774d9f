"""``lexray verify``: check an index or a collection store against the checksums lexray recorded.

    lexray verify --index OUT/index          # stats.json's files_sha256 (lexray.index.verify)
    lexray verify --store outputs/store      # every shard against the catalog, every kept version's index
                                             # against its version.json, current and pending versions

Prints one line per problem and exits 1 naming the first (0 and "ok" when intact). Read-only: a store is
repaired by the next ``lexray reencode`` (damaged shards quarantined and re-encoded, a damaged index rebuilt).
Cost: one sequential read of what it checks (docs/operations.md, "Damaged files: verification and repair").
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


class IntegrityError(RuntimeError):
    """The index or store differs from its recorded checksums; the message names the first damaged file."""


def main(argv: list[str] | None = None) -> dict:
    """Verify ``--index`` or ``--store``; returns ``{"target", "problems", "seconds", "bytes"}``.

    Raises:
        IntegrityError: a damaged or missing file (the message names it). FileNotFoundError: no such folder.
    """
    ap = argparse.ArgumentParser(prog="lexray verify", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--index", help="an index folder (lexray index / evaluate's OUT/index)")
    which.add_argument("--store", help="a collection store folder (lexray reencode)")
    args = ap.parse_args(argv)
    target = Path(args.index or args.store)
    if not target.is_dir():
        raise FileNotFoundError(f"--{'index' if args.index else 'store'} {target}: no such folder")
    t0 = time.perf_counter()
    if args.index:
        from lexray.index.verify import index_problems

        problems = index_problems(target)
    else:
        from lexray.store.integrity import verify_store

        problems = verify_store(target)
    seconds = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file() and not p.is_symlink())
    for p in problems:
        print(f"damaged: {p}")
    if problems:
        raise IntegrityError(problems[0] + (f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""))
    print(f"ok: {target} ({size / 1e6:.1f} MB checked in {seconds:.2f} s)")
    return {"target": str(target), "problems": problems, "seconds": seconds, "bytes": size}
