"""Hard-negative training groups: a query, its positives, mined negatives and optional teacher scores.

The schema (:class:`HardNegativeGroup`, the one definition for mining and training). Input: JSONL (one group per
line) or Parquet (``.parquet``, one group per row), as written by :mod:`lexray.data.mining`::

    {"query_id": str, "query": str, "positive_ids": [str, ...], "negative_ids": [str, ...],
     "negative_scores": [float, ...]?, "positive_scores": [float, ...]?}

Document texts are resolved by id from a BEIR corpus (``Document.full_text``: title + text). Every field is
validated; a problem is a :class:`~lexray.data.report.DataError` reading ``<file>:<line>: field '<name>':
<problem> [<reason>]`` (Parquet: ``row <i>``), or — with ``on_error="skip"`` — a skipped group counted per reason
in a :class:`~lexray.data.report.ReadReport` labelled ``"hard-negative groups"``. Reasons: ``bad_json`` (a line
that is not a JSON object), ``bad_field``, ``unknown_doc`` (an id absent from the corpus), ``too_few_negatives``
(fewer than N distinct negatives), ``no_teacher_scores`` (MarginMSE needs ``positive_scores`` and
``negative_scores``).

Per epoch, each group yields one :class:`~lexray.data.collate.Example`: one positive and N negatives drawn without
replacement with ``numpy.random.default_rng([seed, epoch, index])`` — deterministic for resume, and different
epochs see different negatives when more than N were mined (LACONIC (arXiv:2601.01684) §2.4 uses 1 positive +
15 negatives).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lexray.data.collate import Example
from lexray.data.jsonl import iter_jsonl
from lexray.data.report import DataError, OnError, ReadReport

GROUPS = "hard-negative groups"  # the report label: what one row is


@dataclass
class HardNegativeGroup:
    """One training query with its positives and negatives (document ids; texts are resolved at training time).

    ``negative_scores`` / ``positive_scores``: retriever or teacher scores aligned with the ids (MarginMSE needs
    both); None when absent, and then left out of :meth:`to_json`.
    """

    query_id: str
    query: str
    positive_ids: list[str]
    negative_ids: list[str]
    negative_scores: list[float] | None = None
    positive_scores: list[float] | None = None

    def to_json(self) -> str:
        """One JSONL line (no newline); score fields that are None are omitted."""
        d = {k: v for k, v in asdict(self).items() if v is not None or not k.endswith("_scores")}
        return json.dumps(d, ensure_ascii=False)


def parse_group(path: str | os.PathLike, where: int | str, rec: dict) -> HardNegativeGroup:
    """Validate one record (a JSONL object or a Parquet row) into a :class:`HardNegativeGroup`.

    ``where`` is the 1-based line or ``"row <i>"``, for the message. An integer ``query_id`` becomes a string.

    Raises:
        DataError: reason ``bad_field``, naming file, line and field.
    """
    def bad(name: str, message: str) -> DataError:
        return DataError(path, where, name, "bad_field", message)

    for name in ("query_id", "query"):
        v = rec.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and name == "query_id":
            v = rec[name] = str(v)
        if not isinstance(v, str) or not v.strip():
            raise bad(name, f"expected a non-empty string, got {v!r:.60}")
    lists = {}
    for name in ("positive_ids", "negative_ids"):
        v = rec.get(name)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise bad(name, f"expected a list of strings, got {v!r:.60}")
        lists[name] = v
    if not lists["positive_ids"]:
        raise bad("positive_ids", "empty")
    scores = {}
    for name, ids in (("positive_scores", "positive_ids"), ("negative_scores", "negative_ids")):
        v = rec.get(name)
        if v is None:
            scores[name] = None
            continue
        if (not isinstance(v, list) or len(v) != len(lists[ids])
                or not all(isinstance(s, int | float) and not isinstance(s, bool) for s in v)):
            raise bad(name, f"expected {len(lists[ids])} numbers aligned with '{ids}', got {v!r:.60}")
        scores[name] = [float(s) for s in v]
    return HardNegativeGroup(rec["query_id"], rec["query"], lists["positive_ids"], lists["negative_ids"],
                             negative_scores=scores["negative_scores"], positive_scores=scores["positive_scores"])


def iter_group_records(path: str | os.PathLike, report: ReadReport | None = None,
                       on_error: OnError = "skip") -> Iterator[tuple[int | str, dict]]:
    """Yield ``(where, record)`` for each JSON-object line (JSONL) or row (Parquet), not yet validated.

    ``where`` is the 1-based line number, or ``"row <i>"`` for Parquet. Lines that are not JSON objects go to
    ``report`` (:func:`lexray.data.jsonl.iter_jsonl`); by default they are skipped, so a quick scan (e.g. of the
    query ids, :mod:`lexray.tune.dev`) never stops on one.

    Raises:
        DataError: a bad line under ``on_error="fail"``.
    """
    p = Path(path)
    report = report if report is not None else ReadReport(label=GROUPS)
    if p.suffix != ".parquet":
        yield from iter_jsonl(p, report, on_error)
        return
    import pyarrow.parquet as pq

    for i, rec in enumerate(pq.read_table(p).to_pylist()):
        report.read[p.name] += 1
        yield f"row {i}", rec


class HardNegDataset:
    """Validated groups with their document texts; ``example(i, epoch)`` samples 1 positive + N negatives.

    Args:
        path: JSONL or Parquet groups. corpus_dir: BEIR folder whose ``corpus.jsonl`` resolves document ids.
        num_negatives: N per example. need_teacher: require teacher scores (MarginMSE) and return them.
        seed: sampling seed. on_error: ``"fail"`` (raise at the first bad group) or ``"skip"`` (count it in
            ``self.report``, a :class:`~lexray.data.report.ReadReport` labelled ``"hard-negative groups"``).
        max_groups: keep only the first groups (smoke runs).

    Raises:
        FileNotFoundError: missing file. DataError: a bad group under ``on_error="fail"`` (file:line:field).
    """

    def __init__(self, path: str | os.PathLike, corpus_dir: str | os.PathLike, num_negatives: int,
                 need_teacher: bool = False, seed: int = 0, on_error: OnError = "fail",
                 max_groups: int | None = None):
        from lexray.data.beir import iter_corpus
        from lexray.paths import resolve_local

        p = resolve_local(path)
        if p is None or not p.is_file():
            raise FileNotFoundError(f"hard-negative file not found: {path}")
        self.path, self.num_negatives, self.need_teacher, self.seed = p, num_negatives, need_teacher, seed
        self.report = ReadReport(label=GROUPS)
        candidates: list[tuple[int | str, HardNegativeGroup]] = []
        wanted: set[str] = set()
        for where, rec in iter_group_records(p, self.report, on_error):
            try:
                g = parse_group(p, where, rec)
            except DataError as e:
                self.report.problem(e, on_error)
                continue
            candidates.append((where, g))
            wanted.update(g.positive_ids)
            wanted.update(g.negative_ids)
            if max_groups is not None and len(candidates) >= max_groups:
                break
        self.doc_text: dict[str, str] = {}
        for doc in iter_corpus(corpus_dir, on_error="skip"):
            if doc.doc_id in wanted:
                self.doc_text[doc.doc_id] = doc.full_text
        self.groups: list[HardNegativeGroup] = []
        for where, g in candidates:
            if not self._check(where, g, on_error):
                continue
            self.groups.append(g)
        self.report.kept[p.name] = len(self.groups)

    def _check(self, where: int | str, g: HardNegativeGroup, on_error: OnError) -> bool:
        """Whether ``g`` can train here (known ids, enough negatives, teacher scores if needed); else report it."""
        for name, ids in (("positive_ids", g.positive_ids), ("negative_ids", g.negative_ids)):
            unknown = [i for i in ids if i not in self.doc_text]
            if unknown:
                self.report.problem(DataError(self.path, where, name, "unknown_doc",
                                              f"document id {unknown[0]!r} not in the corpus "
                                              f"({len(unknown)} unknown)"), on_error)
                return False
        negs = set(g.negative_ids) - set(g.positive_ids)
        if len(negs) < self.num_negatives:
            self.report.problem(DataError(self.path, where, "negative_ids", "too_few_negatives",
                                          f"{len(negs)} distinct negatives, {self.num_negatives} needed (lower "
                                          f"num_negatives or mine deeper)"), on_error)
            return False
        if self.need_teacher and (g.positive_scores is None or g.negative_scores is None):
            name = "positive_scores" if g.positive_scores is None else "negative_scores"
            self.report.problem(DataError(self.path, where, name, "no_teacher_scores",
                                          "MarginMSE needs teacher scores"), on_error)
            return False
        return True

    def __len__(self) -> int:
        return len(self.groups)

    def example(self, i: int, epoch: int = 0) -> Example:
        """Group ``i`` for ``epoch``: query, [positive, N negatives] texts, teacher scores (if ``need_teacher``)."""
        g = self.groups[i]
        rng = np.random.default_rng([self.seed, epoch, i])
        pi = int(rng.integers(len(g.positive_ids)))
        pos = set(g.positive_ids)
        neg_idx = [j for j, d in enumerate(g.negative_ids) if d not in pos]
        # distinct ids only (the first occurrence of a repeated id)
        seen: set[str] = set()
        neg_idx = [j for j in neg_idx if not (g.negative_ids[j] in seen or seen.add(g.negative_ids[j]))]
        chosen = sorted(rng.choice(len(neg_idx), size=self.num_negatives, replace=False).tolist()) \
            if self.num_negatives else []
        negs = [neg_idx[c] for c in chosen]
        docs = [self.doc_text[g.positive_ids[pi]]] + [self.doc_text[g.negative_ids[j]] for j in negs]
        teacher = None
        if self.need_teacher:
            teacher = [g.positive_scores[pi]] + [g.negative_scores[j] for j in negs]
        return Example(g.query, docs, teacher)
