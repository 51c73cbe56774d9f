"""Counting what a data reader keeps and skips, so nothing is dropped silently.

Why one report for every reader (BEIR files, TREC runs, pair files, hard-negative groups): each bad row is the
same event — a :class:`DataError` naming the file, the 1-based line (or Parquet row) and the field — and the same
choice follows from ``on_error``: ``"fail"`` raises it, ``"skip"`` counts it per reason in a :class:`ReadReport`
and keeps the first messages for the log. Callers record a problem with :meth:`ReadReport.problem`.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

OnError = Literal["fail", "skip"]

__all__ = ["DataError", "OnError", "ReadReport", "check_on_error"]


class DataError(ValueError):
    """A malformed row; the message reads ``<file>:<line>: field '<field>': <problem> [<reason>]``
    followed by how to skip such rows instead.

    ``line`` is a 1-based line number, or a string such as ``"row 3"`` for a Parquet row.
    """

    def __init__(self, path: str | os.PathLike, line: int | str, field_name: str, reason: str, message: str):
        self.path = str(path)
        self.line = line
        self.field = field_name
        self.reason = reason
        self.location = f"{self.path}:{line}: field '{field_name}': {message} [{reason}]"
        super().__init__(f"{self.location} (on_error='skip', e.g. `--set data.on_error=skip`, skips such rows "
                         f"and reports their count)")


def check_on_error(on_error: str) -> None:
    """Raise ``ValueError`` unless ``on_error`` is ``"fail"`` or ``"skip"``."""
    if on_error not in ("fail", "skip"):
        raise ValueError(f"on_error must be 'fail' or 'skip', got {on_error!r}")


@dataclass
class ReadReport:
    """What a reader saw: rows read and kept per source, rows skipped per reason, and the first messages.

    Pass one instance to several readers to get a single report for a whole dataset. ``label`` names what one
    row is when a reader reports one kind of row rather than files (``"pairs"``, ``"hard-negative groups"``); it
    selects the one-line :meth:`summary` (``"pairs kept 5; skipped 1 (bad_json=1)"``) instead of the per-file one.
    """

    read: Counter = field(default_factory=Counter)  # source (file name) -> data rows read (header excluded)
    kept: Counter = field(default_factory=Counter)  # source -> rows kept
    skipped: Counter = field(default_factory=Counter)  # reason -> rows skipped
    messages: list[str] = field(default_factory=list)  # first ``max_messages`` problems, verbatim
    max_messages: int = 20
    label: str | None = None

    @property
    def n_skipped(self) -> int:
        """Rows skipped, all reasons together."""
        return sum(self.skipped.values())

    @property
    def n_kept(self) -> int:
        """Rows kept, all sources together."""
        return sum(self.kept.values())

    def problem(self, err: DataError, on_error: OnError) -> None:
        """Record one bad row: raise ``err`` under ``on_error="fail"``; otherwise count it under ``err.reason``
        and keep ``err.location`` among the first ``max_messages`` messages."""
        if on_error == "fail":
            raise err
        self.skipped[err.reason] += 1
        if len(self.messages) < self.max_messages:
            self.messages.append(err.location)

    def summary(self) -> str:
        """Human-readable counts: with a ``label`` one line (kept, skipped per reason); otherwise one paragraph
        with per-file counts, skipped counts per reason and the first problems."""
        if self.label is not None:
            sk = ", ".join(f"{k}={v}" for k, v in sorted(self.skipped.items())) or "none"
            return f"{self.label} kept {self.n_kept}; skipped {self.n_skipped} ({sk})"
        parts = [f"{name}: read {self.read[name]}, kept {self.kept[name]}" for name in sorted(self.read)]
        lines = ["; ".join(parts) if parts else "nothing read"]
        if self.skipped:
            reasons = ", ".join(f"{r}={n}" for r, n in sorted(self.skipped.items()))
            lines.append(f"skipped {self.n_skipped} rows ({reasons})")
            lines.extend(f"  {m}" for m in self.messages)
            if self.n_skipped > len(self.messages):
                lines.append(f"  ... and {self.n_skipped - len(self.messages)} more")
        else:
            lines.append("skipped 0 rows")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """``{"read", "kept", "skipped", "messages"}`` as plain dicts (manifests, dataset cards)."""
        return {"read": dict(self.read), "kept": dict(self.kept), "skipped": dict(self.skipped),
                "messages": list(self.messages)}
