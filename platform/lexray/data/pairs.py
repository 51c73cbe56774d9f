"""Weakly supervised (query, document) pairs for contrastive pre-finetuning (LACONIC §2.3).

LACONIC pre-finetunes on ~9M noisy pairs (nomic-embed-unsupervised-data) with in-batch negatives only. Two
sources here:

* :func:`title_abstract_pairs`: (title, abstract) pairs from a BEIR corpus — the SciFact / scientific-abstract
  analogue of the title–body pairs in those mixtures (the title plays the query). Documents without a title or
  without a body are skipped and counted (the pair would be degenerate).
* :func:`read_pairs_file`: a JSONL (``{"query": str, "document": str}`` per line) or Parquet file (columns
  ``query``, ``document``) — the format large pair mixtures are converted to. Every bad row is an error naming
  file, line (Parquet: row) and field, or — with ``on_error="skip"`` — skipped and counted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from lexray.data.collate import Example
from lexray.data.report import OnError, SkipReport


class PairsReport(SkipReport):
    """Pairs kept and rows skipped per reason (:class:`lexray.data.report.SkipReport`)."""

    label = "pairs"


class PairDataset:
    """In-memory list of (query, document) pairs; ``example(i)`` gives an :class:`Example` with one document."""

    num_negatives = 0

    def __init__(self, pairs: list[tuple[str, str]], report: PairsReport | None = None):
        self.pairs = pairs
        self.report = report or PairsReport(kept=len(pairs))

    def __len__(self) -> int:
        return len(self.pairs)

    def example(self, i: int, epoch: int = 0) -> Example:
        q, d = self.pairs[i]
        return Example(q, [d])


def title_abstract_pairs(dataset_dir: str | os.PathLike, max_pairs: int | None = None,
                         on_error: OnError = "skip") -> PairDataset:
    """(title → abstract) pairs of a BEIR corpus, in corpus order.

    Documents with an empty title or an empty text are skipped (``reason`` ``no_title`` / ``no_text``) and counted
    in ``dataset.report``; malformed corpus rows follow ``on_error`` (see :mod:`lexray.data.beir`).
    """
    from lexray.data.beir import ReadReport, iter_corpus

    rep = PairsReport()
    read = ReadReport()
    pairs: list[tuple[str, str]] = []
    for doc in iter_corpus(dataset_dir, on_error=on_error, report=read):
        title, text = doc.title.strip(), doc.text.strip()
        if not title or not text:
            rep.skipped["no_title" if not title else "no_text"] += 1
            continue
        pairs.append((title, text))
        if max_pairs is not None and len(pairs) >= max_pairs:
            break
    for reason, n in read.skipped.items():
        rep.skipped[f"corpus_{reason}"] += n
    rep.messages.extend(read.messages[:20])
    rep.kept = len(pairs)
    return PairDataset(pairs, rep)


def _check_row(path: Path, where: str, rec, rep: PairsReport, on_error: OnError) -> tuple[str, str] | None:
    if not isinstance(rec, dict):
        rep.problem(f"{path}:{where}: field '<line>': expected a JSON object", "bad_json", on_error)
        return None
    out = []
    for name in ("query", "document"):
        v = rec.get(name)
        if not isinstance(v, str):
            rep.problem(f"{path}:{where}: field '{name}': expected a string, got {v!r:.60}", "bad_field", on_error)
            return None
        if not v.strip():
            rep.problem(f"{path}:{where}: field '{name}': empty", "empty_text", on_error)
            return None
        out.append(v)
    return out[0], out[1]


def read_pairs_file(path: str | os.PathLike, max_pairs: int | None = None, on_error: OnError = "fail"
                    ) -> PairDataset:
    """Read pairs from JSONL (``{"query", "document"}`` per line) or Parquet (``.parquet``: same columns).

    Raises:
        FileNotFoundError: no such file.
        ValueError: (``on_error="fail"``) a bad row: ``<file>:<line>: field '<name>': <problem>``.
    """
    from lexray.paths import resolve_local

    p = resolve_local(path)
    if p is None or not p.is_file():
        raise FileNotFoundError(f"pairs file not found: {path}")
    rep = PairsReport()
    pairs: list[tuple[str, str]] = []
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(p)
        missing = [c for c in ("query", "document") if c not in table.column_names]
        if missing:
            raise ValueError(f"{p}: field '{missing[0]}': column missing (have {table.column_names})")
        for i, rec in enumerate(table.select(["query", "document"]).to_pylist()):
            row = _check_row(p, f"row {i}", rec, rep, on_error)
            if row:
                pairs.append(row)
                if max_pairs is not None and len(pairs) >= max_pairs:
                    break
    else:
        with open(p, encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    rep.problem(f"{p}:{line_no}: field '<line>': not valid JSON ({e.msg})", "bad_json", on_error)
                    continue
                row = _check_row(p, str(line_no), rec, rep, on_error)
                if row:
                    pairs.append(row)
                    if max_pairs is not None and len(pairs) >= max_pairs:
                        break
    rep.kept = len(pairs)
    return PairDataset(pairs, rep)
