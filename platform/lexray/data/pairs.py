"""Weakly supervised (query, document) pairs for contrastive pre-finetuning (LACONIC, arXiv:2601.01684 §2.3).

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

import os
from collections import Counter
from pathlib import Path

from lexray.data.collate import Example
from lexray.data.jsonl import iter_jsonl
from lexray.data.report import DataError, OnError, ReadReport

PAIRS = "pairs"  # the report label: what one row is


class PairDataset:
    """In-memory list of (query, document) pairs; ``example(i)`` gives an :class:`Example` with one document.

    ``report``: a :class:`~lexray.data.report.ReadReport` labelled ``"pairs"`` (pairs kept, rows skipped per
    reason); one counting every pair as kept when none is given.
    """

    num_negatives = 0

    def __init__(self, pairs: list[tuple[str, str]], report: ReadReport | None = None):
        self.pairs = pairs
        self.report = report or ReadReport(kept=Counter({PAIRS: len(pairs)}), label=PAIRS)

    def __len__(self) -> int:
        return len(self.pairs)

    def example(self, i: int, epoch: int = 0) -> Example:
        """Pair ``i`` as an :class:`Example` (the query, ``[document]``, no teacher scores); ``epoch`` is unused."""
        q, d = self.pairs[i]
        return Example(q, [d])


def title_abstract_pairs(dataset_dir: str | os.PathLike, max_pairs: int | None = None,
                         on_error: OnError = "skip") -> PairDataset:
    """(title → abstract) pairs of a BEIR corpus, in corpus order.

    Documents with an empty title or an empty text are skipped (``reason`` ``no_title`` / ``no_text``) and counted
    in ``dataset.report``; malformed corpus rows follow ``on_error`` (see :mod:`lexray.data.beir`) and are counted
    there as ``corpus_<reason>``.
    """
    from lexray.data.beir import iter_corpus

    rep = ReadReport(label=PAIRS)
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
    rep.read.update(read.read)
    rep.kept["corpus.jsonl"] = len(pairs)
    return PairDataset(pairs, rep)


def _check_row(path: Path, where: int | str, rec: dict, rep: ReadReport, on_error: OnError
               ) -> tuple[str, str] | None:
    """``(query, document)`` of one record, or None after reporting its first bad field."""
    out = []
    for name in ("query", "document"):
        v = rec.get(name)
        if not isinstance(v, str):
            rep.problem(DataError(path, where, name, "bad_field", f"expected a string, got {v!r:.60}"), on_error)
            return None
        if not v.strip():
            rep.problem(DataError(path, where, name, "empty_text", "empty"), on_error)
            return None
        out.append(v)
    return out[0], out[1]


def _iter_records(p: Path, rep: ReadReport, on_error: OnError):
    """``(where, record)`` of a Parquet file (``where`` = ``"row <i>"``) or a JSONL file (1-based line)."""
    if p.suffix != ".parquet":
        yield from iter_jsonl(p, rep, on_error)
        return
    import pyarrow.parquet as pq

    table = pq.read_table(p)
    missing = [c for c in ("query", "document") if c not in table.column_names]
    if missing:
        raise ValueError(f"{p}: field '{missing[0]}': column missing (have {table.column_names})")
    for i, rec in enumerate(table.select(["query", "document"]).to_pylist()):
        rep.read[p.name] += 1
        yield f"row {i}", rec


def read_pairs_file(path: str | os.PathLike, max_pairs: int | None = None, on_error: OnError = "fail"
                    ) -> PairDataset:
    """Read pairs from JSONL (``{"query", "document"}`` per line) or Parquet (``.parquet``: same columns).

    Raises:
        FileNotFoundError: no such file.
        DataError: (``on_error="fail"``) a bad row: ``<file>:<line>: field '<name>': <problem> [<reason>]``.
        ValueError: a Parquet file without the ``query`` / ``document`` columns.
    """
    from lexray.paths import resolve_local

    p = resolve_local(path)
    if p is None or not p.is_file():
        raise FileNotFoundError(f"pairs file not found: {path}")
    rep = ReadReport(label=PAIRS)
    pairs: list[tuple[str, str]] = []
    for where, rec in _iter_records(p, rep, on_error):
        row = _check_row(p, where, rec, rep, on_error)
        if row:
            pairs.append(row)
            if max_pairs is not None and len(pairs) >= max_pairs:
                break
    rep.kept[p.name] = len(pairs)
    return PairDataset(pairs, rep)
