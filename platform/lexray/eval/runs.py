"""TREC run files: ``qid Q0 doc_id rank score tag``, one line per retrieved document.

Why a fixed order: runs are diffed between backends (exact searcher, Lucene) and re-evaluated by other tools, so
queries are written in sorted id order and, within a query, documents by score descending then document id
ascending – the same tie-breaking as :func:`lexray.eval.metrics.deterministic_run` and the searchers. Scores are
written with ``repr(float)`` so reading a run back gives exactly the scores that were written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lexray.data.report import DataError, ReadReport, check_on_error

__all__ = ["write_trec_run", "read_trec_run", "sorted_query_ids"]


def _qid_key(q: str):
    # numeric ids sort numerically ("2" < "10"), others as strings; numeric ones first
    return (0, int(q), q) if q.isdigit() else (1, 0, q)


def sorted_query_ids(ids) -> list[str]:
    """Query ids in the order runs are written: numeric ids numerically, then the others as strings."""
    return sorted((str(q) for q in ids), key=_qid_key)


def run_tag(name: str) -> str:
    """A TREC run tag from a display name: whitespace runs become ``_`` (``"laconic-tiny (trained)"`` →
    ``"laconic-tiny_(trained)"``); an empty name becomes ``"lexray"``. The tag is a column of the run file,
    so it must contain no whitespace (:func:`write_trec_run` refuses one that does)."""
    return "_".join(str(name).split()) or "lexray"


def write_trec_run(run: Mapping[str, Mapping[str, float]], path: str | os.PathLike, tag: str = "lexray",
                   top_k: int | None = None) -> Path:
    """Write ``{qid: {doc_id: score}}`` as a TREC run (ranks 1-based) and return the path.

    Args:
        top_k: keep only the best ``top_k`` documents per query (None = all).

    Raises:
        ValueError: an id or the tag contains whitespace (it would break the column format).
    """
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag must be non-empty without whitespace, got {tag!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for qid in sorted_query_ids(run):
            docs = run[qid] if qid in run else run[int(qid)]  # type: ignore[index]
            if not qid or any(c.isspace() for c in qid):
                raise ValueError(f"query id {qid!r} is empty or contains whitespace")
            ranked = sorted(((str(d), float(s)) for d, s in docs.items()), key=lambda kv: (-kv[1], kv[0]))
            if top_k is not None:
                ranked = ranked[:top_k]
            for rank, (did, score) in enumerate(ranked, start=1):
                if not did or any(c.isspace() for c in did):
                    raise ValueError(f"query {qid!r}: document id {did!r} is empty or contains whitespace")
                fh.write(f"{qid} Q0 {did} {rank} {score!r} {tag}\n")
    os.replace(tmp, path)
    return path


def read_trec_run(path: str | os.PathLike, on_error: str = "fail",
                  report: ReadReport | None = None) -> dict[str, dict[str, float]]:
    """Read a TREC run into ``{qid: {doc_id: score}}`` (whitespace-separated, 6 columns; rank is not trusted,
    the score defines the order).

    Raises:
        DataError: (``on_error="fail"``) a line without 6 columns (``bad_columns``), a non-numeric score
            (``bad_score``), or a (query, document) pair listed twice (``duplicate_id``); with ``"skip"`` they are
            counted in ``report``.
        FileNotFoundError: no such file.
    """
    check_on_error(on_error)
    report = report if report is not None else ReadReport()
    path = Path(path)
    name = path.name
    run: dict[str, dict[str, float]] = {}
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            report.read[name] += 1
            cols = line.split()
            if len(cols) != 6:
                report.problem(DataError(path, line_no, "<line>", "bad_columns",
                                         f"expected 6 columns (qid Q0 docid rank score tag), got {len(cols)}"),
                               on_error)
                continue
            qid, _q0, did, _rank, score_s, _tag = cols
            try:
                score = float(score_s)
            except ValueError:
                report.problem(DataError(path, line_no, "score", "bad_score", f"not a number: {score_s!r}"),
                               on_error)
                continue
            docs = run.setdefault(qid, {})
            if did in docs:
                report.problem(DataError(path, line_no, "docid", "duplicate_id",
                                         f"query {qid!r} lists document {did!r} twice"), on_error)
                continue
            docs[did] = score
            report.kept[name] += 1
    return run
