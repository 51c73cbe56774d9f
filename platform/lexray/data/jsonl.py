"""The one JSONL parse loop of lexray's readers (BEIR corpus and queries, pair files, hard-negative groups).

Why one loop: every reader must number lines the same way (1-based, blank lines counted but not rows), treat an
undecodable or non-object line the same way (reason ``bad_json``, field ``<line>``) and report it through the same
:class:`~lexray.data.report.ReadReport`, so a problem reads identically whichever reader met it. Lines are read as
bytes and decoded one at a time, so one line of invalid UTF-8 is one bad row, not a failed file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from lexray.data.report import DataError, OnError, ReadReport

__all__ = ["iter_jsonl"]


def iter_jsonl(path: str | os.PathLike, report: ReadReport, on_error: OnError = "fail") -> Iterator[tuple[int, dict]]:
    """Yield ``(line_no, record)`` for every line of ``path`` that holds a JSON object (``line_no`` 1-based).

    Blank lines are skipped silently; every other line counts as read in ``report.read[<file name>]``. A line that
    is not UTF-8, not JSON, or JSON but not an object is a :class:`DataError` (field ``<line>``, reason
    ``bad_json``) handed to ``report.problem``: raised under ``on_error="fail"``, counted under ``"skip"``.
    Keeping a row (``report.kept``) is the caller's decision, after its own field checks.

    Raises:
        DataError: a bad line under ``on_error="fail"``.
        FileNotFoundError: no such file.
    """
    p = Path(path)
    name = p.name
    with open(p, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue  # blank lines (e.g. a trailing newline) are not rows
            report.read[name] += 1
            try:
                rec = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                report.problem(DataError(p, line_no, "<line>", "bad_json", f"not valid JSON: {e}"), on_error)
                continue
            if not isinstance(rec, dict):
                report.problem(DataError(p, line_no, "<line>", "bad_json",
                                         f"expected a JSON object, got {type(rec).__name__}"), on_error)
                continue
            yield line_no, rec
