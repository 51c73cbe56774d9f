"""Checksums of a built index's files, and their verification.

Why: an index is memory-mapped and searched as it is; one flipped exponent bit in ``postings_weight.npy``
silently changed 6 of 300 SciFact queries' top-10 (issue 24). :func:`lexray.index.build.build_index` records the
sha256 of every data file in ``stats.json`` (``files_sha256``), a collection store in each version's
``version.json`` (``index_sha256``); :func:`verify_index` compares the files with them. Cost: one sequential read
of the index (:func:`lexray.fsio.file_sha256`; docs/operations.md gives the measured cost). ``open_index`` and
``lexray evaluate --store`` verify on open (:func:`verify_on_open`; ``verify=False`` / ``--no-verify`` skip it).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from lexray.fsio import file_sha256

__all__ = ["INDEX_FILES", "IndexIntegrityError", "index_checksums", "index_problems", "verify_index",
           "verify_on_open"]

log = logging.getLogger(__name__)

# the data files of an index (lexray.index.build's layout); stats.json holds their checksums
INDEX_FILES = ("doc_ids.parquet", "offsets.npy", "postings_doc.npy", "postings_weight.npy", "postings_impact.npy")


class IndexIntegrityError(ValueError):
    """An index file is missing or its bytes differ from the recorded checksum; the message names the file."""


def index_checksums(index_dir: str | os.PathLike, names=INDEX_FILES) -> dict[str, str]:
    """``{file name: sha256}`` of the index files present in ``index_dir`` among ``names``."""
    d = Path(index_dir)
    return {n: file_sha256(d / n) for n in names if (d / n).is_file()}


def index_problems(index_dir: str | os.PathLike, expected: dict[str, str] | None = None) -> list[str]:
    """What is wrong with the index files, one message per file (empty: intact).

    Args:
        expected: ``{file: sha256}``; default ``stats.json``'s ``files_sha256`` (an index built before issue 24
            has none: reported as a problem, since nothing can be checked).
    """
    d = Path(index_dir)
    if expected is None:
        try:
            expected = json.loads((d / "stats.json").read_text()).get("files_sha256")
        except (OSError, ValueError) as e:
            return [f"{d / 'stats.json'}: unreadable ({type(e).__name__}: {e})"]
        if not expected:
            return [f"{d / 'stats.json'}: records no file checksums (built before checksums were recorded); "
                    "rebuild the index to add them"]
    out = []
    for name, sha in sorted(expected.items()):
        p = d / name
        if not p.is_file():
            out.append(f"{p}: missing")
            continue
        got = file_sha256(p)
        if got != sha:
            out.append(f"{p}: content checksum {got[:12]}… differs from the recorded {sha[:12]}… (the file was "
                       "changed or damaged after the build)")
    return out


def verify_index(index_dir: str | os.PathLike, expected: dict[str, str] | None = None) -> None:
    """Raise :class:`IndexIntegrityError` naming the first damaged or missing index file (see
    :func:`index_problems`)."""
    problems = index_problems(index_dir, expected)
    if problems:
        raise IndexIntegrityError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))


def verify_on_open(index_dir: str | os.PathLike) -> bool:
    """Verify an index before it is searched (``open_index``, ``lexray evaluate --store``).

    An index whose ``stats.json`` records no checksums (built before issue 24) is opened with a warning, not
    refused: there is nothing to compare with. Returns whether the files were checked.

    Raises:
        IndexIntegrityError: a damaged or missing index file (named), or an unreadable ``stats.json``.
    """
    d = Path(index_dir)
    try:
        recorded = json.loads((d / "stats.json").read_text()).get("files_sha256")
    except (OSError, ValueError) as e:
        raise IndexIntegrityError(f"{d / 'stats.json'}: unreadable ({type(e).__name__}: {e})") from None
    if not recorded:
        log.warning("%s records no file checksums (built before checksums were recorded): opened unverified; "
                    "rebuild the index to add them", d / "stats.json")
        return False
    verify_index(d, recorded)
    return True
