"""Hard-negative training groups: a query, its positives, mined negatives and optional teacher scores.

Input: JSONL (one group per line) or Parquet (``.parquet``, one group per row), as written by
:mod:`lexray.data.mining`::

    {"query_id": str, "query": str, "positive_ids": [str, ...], "negative_ids": [str, ...],
     "negative_scores": [float, ...]?, "positive_scores": [float, ...]?}

Document texts are resolved by id from a BEIR corpus (``Document.full_text``: title + text). Every field is
validated; a problem is an error reading ``<file>:<line>: field '<name>': <problem>`` (Parquet: ``row <i>``), or —
with ``on_error="skip"`` — a skipped group counted per reason in :class:`HardNegReport`. Reasons: ``bad_json``,
``bad_field``, ``unknown_doc`` (an id absent from the corpus), ``too_few_negatives`` (fewer than N distinct
negatives), ``no_teacher_scores`` (MarginMSE needs ``positive_scores`` and ``negative_scores``).

Per epoch, each group yields one :class:`~lexray.data.collate.Example`: one positive and N negatives drawn without
replacement with ``numpy.random.default_rng([seed, epoch, index])`` — deterministic for resume, and different
epochs see different negatives when more than N were mined (LACONIC §2.4 uses 1 positive + 15 negatives).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lexray.data.collate import Example
from lexray.data.report import OnError, SkipReport


class HardNegReport(SkipReport):
    """Hard-negative groups kept and rows skipped per reason (:class:`lexray.data.report.SkipReport`)."""

    label = "hard-negative groups"


@dataclass
class Group:
    query_id: str
    query: str
    positive_ids: list[str]
    negative_ids: list[str]
    positive_scores: list[float] | None = None
    negative_scores: list[float] | None = None


def _validate(path: Path, where: str, rec) -> Group:
    """One record → Group, or ValueError naming file, line and field."""
    if not isinstance(rec, dict):
        raise ValueError(f"{path}:{where}: field '<line>': expected a JSON object, got {type(rec).__name__}")
    for name in ("query_id", "query"):
        v = rec.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and name == "query_id":
            v = rec[name] = str(v)
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{path}:{where}: field '{name}': expected a non-empty string, got {v!r:.60}")
    lists = {}
    for name in ("positive_ids", "negative_ids"):
        v = rec.get(name)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ValueError(f"{path}:{where}: field '{name}': expected a list of strings, got {v!r:.60}")
        lists[name] = v
    if not lists["positive_ids"]:
        raise ValueError(f"{path}:{where}: field 'positive_ids': empty")
    scores = {}
    for name, ids in (("positive_scores", "positive_ids"), ("negative_scores", "negative_ids")):
        v = rec.get(name)
        if v is None:
            scores[name] = None
            continue
        if (not isinstance(v, list) or len(v) != len(lists[ids])
                or not all(isinstance(s, int | float) and not isinstance(s, bool) for s in v)):
            raise ValueError(f"{path}:{where}: field '{name}': expected {len(lists[ids])} numbers aligned with "
                             f"'{ids}', got {v!r:.60}")
        scores[name] = [float(s) for s in v]
    return Group(rec["query_id"], rec["query"], lists["positive_ids"], lists["negative_ids"],
                 scores["positive_scores"], scores["negative_scores"])


def iter_group_records(path: str | os.PathLike):
    """Yield ``(where, record)`` for each line (JSONL) or row (Parquet); ``where`` is ``"<line>"`` / ``"row <i>"``.

    Raises ValueError on undecodable JSON (file:line).
    """
    p = Path(path)
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, rec in enumerate(pq.read_table(p).to_pylist()):
            yield f"row {i}", rec
        return
    with open(p, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield str(line_no), json.loads(line)
            except json.JSONDecodeError as e:
                yield str(line_no), ValueError(f"{p}:{line_no}: field '<line>': not valid JSON ({e.msg})")


class HardNegDataset:
    """Validated groups with their document texts; ``example(i, epoch)`` samples 1 positive + N negatives.

    Args:
        path: JSONL or Parquet groups. corpus_dir: BEIR folder whose ``corpus.jsonl`` resolves document ids.
        num_negatives: N per example. need_teacher: require teacher scores (MarginMSE) and return them.
        seed: sampling seed. on_error: ``"fail"`` (raise at the first bad group) or ``"skip"`` (count it).
        max_groups: keep only the first groups (smoke runs).

    Raises:
        FileNotFoundError: missing file. ValueError: a bad group under ``on_error="fail"`` (file:line:field).
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
        self.report = HardNegReport()
        candidates: list[tuple[str, Group]] = []
        wanted: set[str] = set()
        for where, rec in iter_group_records(p):
            try:
                if isinstance(rec, ValueError):
                    raise rec
                g = _validate(p, where, rec)
            except ValueError as e:
                self.report.problem(str(e), "bad_json" if "not valid JSON" in str(e) else "bad_field", on_error)
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
        self.groups: list[Group] = []
        for where, g in candidates:
            if not self._check(where, g, on_error):
                continue
            self.groups.append(g)
        self.report.kept = len(self.groups)

    def _check(self, where: str, g: Group, on_error: OnError) -> bool:
        for name, ids in (("positive_ids", g.positive_ids), ("negative_ids", g.negative_ids)):
            unknown = [i for i in ids if i not in self.doc_text]
            if unknown:
                self.report.problem(f"{self.path}:{where}: field '{name}': document id {unknown[0]!r} not in the "
                                    f"corpus ({len(unknown)} unknown)", "unknown_doc", on_error)
                return False
        negs = set(g.negative_ids) - set(g.positive_ids)
        if len(negs) < self.num_negatives:
            self.report.problem(f"{self.path}:{where}: field 'negative_ids': {len(negs)} distinct negatives, "
                                f"{self.num_negatives} needed (lower num_negatives or mine deeper)",
                                "too_few_negatives", on_error)
            return False
        if self.need_teacher and (g.positive_scores is None or g.negative_scores is None):
            name = "positive_scores" if g.positive_scores is None else "negative_scores"
            self.report.problem(f"{self.path}:{where}: field '{name}': MarginMSE needs teacher scores",
                                "no_teacher_scores", on_error)
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
