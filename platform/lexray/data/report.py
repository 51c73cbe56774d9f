"""Counting what a training-data reader keeps and skips, so nothing is dropped silently."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar, Literal

OnError = Literal["fail", "skip"]


@dataclass
class SkipReport:
    """Rows kept and rows skipped per reason; the first 20 problem messages are kept for the log.

    Subclasses only name what a row is (:attr:`label`), e.g. "pairs" or "hard-negative groups".
    """

    label: ClassVar[str] = "rows"
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    messages: list[str] = field(default_factory=list)

    def problem(self, message: str, reason: str, on_error: OnError) -> None:
        """Raise ``ValueError(message)`` under ``on_error="fail"``; otherwise count the row under ``reason``."""
        if on_error == "fail":
            raise ValueError(message)
        self.skipped[reason] += 1
        if len(self.messages) < 20:
            self.messages.append(message)

    def summary(self) -> str:
        sk = ", ".join(f"{k}={v}" for k, v in sorted(self.skipped.items())) or "none"
        return f"{self.label} kept {self.kept}; skipped {sum(self.skipped.values())} ({sk})"
