"""Integrity of a collection store: find damaged shards and index files, quarantine, roll back what cannot be
finished.

Why (issue 24): one flipped byte in a shard made the next run with an edit fail after committing its version,
and every later run failed on that ``pending`` version ("committed by an interrupted run"); an unchanged-corpus
run said ``noop`` without noticing; a flipped bit in ``postings_weight.npy`` changed search results silently.

Each :func:`lexray.store.reencode` run now, before anything else:

1. hashes every shard the catalog names (:func:`damaged_shards`; sha256 against ``shards.sha256``) and moves a
   damaged or missing one to ``STORE/quarantine/`` (:func:`quarantine`);
2. rolls back a ``pending`` version that reads a quarantined shard (:func:`roll_back_pending`): its catalog rows
   and the shards only it wrote are removed, so the run re-diffs against ``current`` and redoes its changes;
3. hands the documents of ``current`` that lived in a quarantined shard to the diff as "to re-encode";
4. checks the ``current`` version's index files against ``version.json``'s ``index_sha256``
   (:func:`version_problems`) and rebuilds the version in place when one differs.

:func:`verify_store` is the read-only form (``lexray verify --store``). Cost: one sequential read of the shards
and the current index, measured in docs/operations.md.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

from lexray.fsio import file_sha256
from lexray.index.verify import index_problems
from lexray.store.catalog import Catalog

log = logging.getLogger(__name__)

__all__ = ["QUARANTINE", "damaged_shards", "quarantine", "roll_back_pending", "version_problems", "verify_store",
           "repair_shards", "repair_current_index"]

QUARANTINE = "quarantine"
VERSION_FILE = "version.json"


def damaged_shards(store: Path, cat: Catalog) -> dict[str, str]:
    """``{file: why}`` of every catalog shard that is missing from ``STORE/shards`` (``why``: "quarantined" when
    an earlier run moved it to ``quarantine/``) or whose sha256 differs from the catalog's."""
    bad = {}
    for file, sha in cat.rows("SELECT file, sha256 FROM shards ORDER BY file"):
        p = store / "shards" / file
        if not p.is_file():
            bad[file] = "quarantined" if (store / QUARANTINE / file).is_file() else "missing"
        elif file_sha256(p) != sha:
            bad[file] = "content checksum differs from the catalog"
    return bad


def quarantine(store: Path, files: list[str]) -> None:
    """Move damaged shard files out of ``shards/`` into ``quarantine/`` (kept for inspection, never read)."""
    q = store / QUARANTINE
    q.mkdir(exist_ok=True)
    for f in files:
        src = store / "shards" / f
        if src.is_file():
            dst = q / f
            if dst.exists():
                dst = q / f"{f}.{int(time.time())}"
            os.replace(src, dst)
            log.warning("quarantined damaged shard %s -> %s", src, dst)


def roll_back_pending(store: Path, cat: Catalog, bad: set[str]) -> list[int]:
    """Forget every ``pending`` version that reads a shard in ``bad`` (catalog rows, the shards only it wrote,
    a half-published folder); returns those versions."""
    from lexray.store.reencode import _current_version, version_dir

    cur = _current_version(store)
    rolled = []
    for v in cat.versions("pending"):
        version = v["version"]
        if not bad & {f for f, _, _ in cat.version_shards(version)}:
            continue
        for f in cat.drop_versions([version]):
            (store / "shards" / f).unlink(missing_ok=True)
        cat.mark_rolled_back(v)
        d = version_dir(store, version)
        if d.is_dir() and version != cur:
            shutil.rmtree(d)
        log.warning("rolled back version %d (committed by an interrupted run, reads a damaged shard); its "
                    "changes are re-encoded by this run", version)
        rolled.append(version)
    return rolled


def repair_shards(store: Path, cat: Catalog, timings: dict) -> tuple[dict, frozenset[str]]:
    """Steps 1–3 of the module docstring. Returns ``(repaired, doc ids of current to re-encode)``; ``repaired``
    is empty when nothing was damaged, else ``{"quarantined": [...], "rolled_back": [...], "documents": n}``."""
    from lexray.store.reencode import _current_version

    t = time.perf_counter()
    bad = damaged_shards(store, cat)
    timings["verify_shards"] = time.perf_counter() - t
    cur = _current_version(store)
    read_now = {f for v in [cur, *(v["version"] for v in cat.versions("pending"))] if v is not None
                for f, _, _ in cat.version_shards(v)}
    # a shard quarantined by an earlier run and read by no current or pending version (only by an older version
    # kept for rollback, whose index is whole) needs nothing more
    bad = {f: why for f, why in bad.items() if why != "quarantined" or f in read_now}
    if not bad:
        return {}, frozenset()
    quarantine(store, sorted(bad))
    rolled = roll_back_pending(store, cat, set(bad))
    forced: frozenset[str] = frozenset()
    if cur is not None:
        ph = ", ".join("?" * len(bad))
        forced = frozenset(r[0] for r in cat.rows(
            f"SELECT doc_id FROM entries WHERE version = ? AND shard IN ({ph})", [cur, *sorted(bad)]))
    return {"quarantined": sorted(bad), "why": bad, "rolled_back": rolled, "documents": len(forced)}, forced


def repair_current_index(store: Path, timings: dict, repaired: dict, rebuild) -> None:
    """Step 4 of the module docstring: check the ``current`` version's index files against its
    ``version.json``; if one differs, ``rebuild(version)`` (lexray.store.reencode rebuilds it in place from its
    verified shards) and record the problems in ``repaired["index"]``."""
    from lexray.store.reencode import _current_version

    cur = _current_version(store)
    if cur is None:
        return
    t = time.perf_counter()
    problems = version_problems(store, cur)
    timings["verify_index"] = time.perf_counter() - t
    if problems:
        log.warning("version %d's index is damaged (%s): rebuilding it", cur, problems[0])
        rebuild(cur)
        repaired["index"] = problems


def version_problems(store: Path, version: int) -> list[str]:
    """What is wrong with a published version's folder: its ``version.json`` or index files differ from the
    ``index_sha256`` it records (empty: intact)."""
    from lexray.store.reencode import version_dir

    d = version_dir(store, version)
    try:
        info = json.loads((d / VERSION_FILE).read_text())
    except (OSError, ValueError) as e:
        return [f"{d / VERSION_FILE}: unreadable ({type(e).__name__})"]
    return index_problems(d / "index", info.get("index_sha256") or {})


def verify_store(store: str | os.PathLike) -> list[str]:
    """Read-only check of a store (``lexray verify --store``): every catalog shard's sha256, ``current`` names a
    published version, and every kept published version's index files. Returns the problems, one line each."""
    from lexray.store.reencode import _current_version, version_dir

    store = Path(store)
    problems = []
    cur = _current_version(store)
    with Catalog(store, read_only=True) as cat:
        problems += [f"{store / 'shards' / f}: {why}" for f, why in damaged_shards(store, cat).items()
                     if why != "quarantined" or f in {s for s, _, _ in cat.version_shards(cur or -1)}]
        published = [v["version"] for v in cat.versions("published")]
        pending = [v["version"] for v in cat.versions("pending")]
    if cur is None:
        problems.append(f"{store / 'current'}: missing (no published version)")
    elif cur not in published:
        problems.append(f"{store / 'current'} points at version {cur}, which the catalog does not list as published")
    problems += [f"version {v}: pending (committed by an interrupted run; the next lexray reencode finishes it)"
                 for v in pending]
    for v in published:
        if version_dir(store, v).is_dir():
            problems += version_problems(store, v)
    return problems
