"""Streaming readers for BEIR-layout collections: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

Why streaming: corpora used for batch indexing can hold millions of documents, so the corpus is only ever
iterated line by line (or in column batches for Ray Data / pyarrow); it is never materialised as one Python list.
Only document *ids* are kept in memory, to detect duplicates and to check that qrels name real documents.

Why strict: a silently dropped document or judgement changes every metric downstream. Every problem is reported
with the file, the 1-based line number and the field. ``on_error="fail"`` raises :class:`DataError` at the first
problem; ``on_error="skip"`` skips the row and counts it per reason in a :class:`ReadReport` (print
``report.summary()``), so nothing disappears unreported. Both live in :mod:`lexray.data.report`, the one report of
every reader, and are re-exported here; lines are parsed by :func:`lexray.data.jsonl.iter_jsonl`.

Problems detected (reason keys used in :attr:`ReadReport.skipped`):

* ``bad_json`` – a line that is not a JSON object (also undecodable UTF-8);
* ``missing_id`` – no ``_id`` field, or an empty / non-string id;
* ``bad_field`` – ``title`` / ``text`` present but not a string;
* ``duplicate_id`` – an id seen before in the same file (the first occurrence is kept);
* ``empty_text`` – a document whose title and text are both empty (a query with empty text);
* ``bad_columns`` – a qrels line without exactly three tab-separated columns;
* ``bad_score`` – a qrels score that is not an integer;
* ``unknown_query`` / ``unknown_doc`` – a qrels line naming a query / document absent from the collection;
* ``duplicate_qrel`` – the same (query, document) pair judged twice (the first judgement is kept).

Real-data notes: BEIR Cranfield has two documents (ids 471 and 995) whose title and text are both empty, and
qrels judge document 995 relevant to query 125; its graded scores are 1..4 (4 = complete answer). Qrels are
checked against *all* ids present in the corpus file, including documents skipped for empty text, so such a
judgement is kept (the document simply cannot be retrieved) rather than reported as unknown. SciFact has ``train``
and ``test`` qrels with binary scores.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lexray.data.jsonl import iter_jsonl
from lexray.data.report import DataError, OnError, ReadReport, check_on_error

log = logging.getLogger(__name__)

__all__ = [
    "DataError",
    "Document",
    "ReadReport",
    "resolve_dataset_dir",
    "iter_corpus",
    "iter_corpus_batches",
    "corpus_ids",
    "load_queries",
    "load_qrels",
    "available_splits",
    "dataset_stats",
]


@dataclass
class Document:
    """One corpus entry. ``title`` and ``text`` are ``""`` when absent."""

    doc_id: str
    title: str
    text: str

    @property
    def full_text(self) -> str:
        """``title + " " + text`` (BEIR's convention for encoders), stripped; just ``text`` without a title."""
        return f"{self.title} {self.text}".strip() if self.title else self.text


def _warn_unreported(report: ReadReport, what: str) -> None:
    """Callers that pass no report still learn about skipped rows: they are logged as a warning."""
    if report.n_skipped:
        log.warning("%s: skipped rows (pass a ReadReport to collect them):\n%s", what, report.summary())


def resolve_dataset_dir(dataset_dir: str | os.PathLike) -> Path:
    """Resolve a dataset location (a path, a path relative to the repository root, ``shared:<rel>``, or an
    ir_datasets id ``irds:<id>``, exported once into a BEIR folder by :func:`lexray.data.irds.irds_beir_folder`).

    Raises:
        FileNotFoundError: the folder does not exist. IrdsError: an ``irds:`` id ir_datasets does not know.
    """
    from lexray.paths import resolve_local

    if str(dataset_dir).startswith("irds:"):
        from lexray.data.irds import irds_beir_folder

        return irds_beir_folder(str(dataset_dir))
    p = resolve_local(dataset_dir)
    if p is None or not p.is_dir():
        raise FileNotFoundError(f"BEIR dataset folder not found: {dataset_dir}")
    return p


def _file(dataset_dir: str | os.PathLike, *parts: str) -> Path:
    p = resolve_dataset_dir(dataset_dir).joinpath(*parts)
    if not p.is_file():
        raise FileNotFoundError(f"{p} not found (expected BEIR layout: corpus.jsonl, queries.jsonl, "
                                f"qrels/<split>.tsv)")
    return p


def _iter_json_records(path: Path, kind: str, on_error: OnError, report: ReadReport,
                       require_text: bool) -> Iterator[tuple[int, str, str, str, dict]]:
    """Yield ``(line_no, id, title, text, record)`` for valid rows of a JSONL file, reporting the others.

    ``kind`` is ``"document"`` or ``"query"``; a query's title is ignored (BEIR queries have none).
    """
    seen: set[str] = set()
    name = path.name
    for line_no, rec in iter_jsonl(path, report, on_error):
        rid = rec.get("_id")
        if isinstance(rid, int) and not isinstance(rid, bool):
            rid = str(rid)
        if not isinstance(rid, str) or not rid.strip():
            what = "missing" if "_id" not in rec else f"invalid ({rid!r})"
            report.problem(DataError(path, line_no, "_id", "missing_id", f"{kind} id is {what}"), on_error)
            continue
        bad = False
        vals = {}
        for fld in ("title", "text"):
            v = rec.get(fld)
            if v is None:
                v = ""
            if not isinstance(v, str):
                report.problem(DataError(path, line_no, fld, "bad_field",
                                         f"expected a string, got {type(v).__name__}"), on_error)
                bad = True
                break
            vals[fld] = v
        if bad:
            continue
        if rid in seen:
            report.problem(DataError(path, line_no, "_id", "duplicate_id",
                                     f"duplicate {kind} id {rid!r}"), on_error)
            continue
        seen.add(rid)
        title = vals["title"] if kind == "document" else ""
        text = vals["text"]
        if require_text and not (title.strip() or text.strip()):
            what = "title and text are both empty" if kind == "document" else "text is empty"
            report.problem(DataError(path, line_no, "text", "empty_text",
                                     f"{kind} {rid!r}: {what}"), on_error)
            continue
        report.kept[name] += 1
        yield line_no, rid, title, text, rec


def iter_corpus(dataset_dir: str | os.PathLike, on_error: OnError = "fail", report: ReadReport | None = None,
                max_docs: int | None = None) -> Iterator[Document]:
    """Stream the documents of ``corpus.jsonl`` in file order.

    Args:
        dataset_dir: BEIR dataset folder (path or ``shared:<rel>``).
        on_error: ``"fail"`` raises at the first bad row; ``"skip"`` counts it in ``report``.
        report: filled in as the iterator advances (create one to read the counts afterwards).
        max_docs: stop after this many documents are yielded (smoke runs).

    Raises:
        DataError: bad row under ``on_error="fail"`` (file:line, field).
        FileNotFoundError: the folder or ``corpus.jsonl`` is missing.
    """
    check_on_error(on_error)
    owned = report is None
    report = report if report is not None else ReadReport()
    path = _file(dataset_dir, "corpus.jsonl")
    n = 0
    if max_docs is not None and max_docs <= 0:
        return
    for _, rid, title, text, _rec in _iter_json_records(path, "document", on_error, report, True):
        yield Document(rid, title, text)
        n += 1
        if max_docs is not None and n >= max_docs:
            break
    if owned:
        _warn_unreported(report, str(path))


def iter_id_text(dataset_dir: str | os.PathLike, on_error: OnError = "fail", report: ReadReport | None = None,
                 max_docs: int | None = None) -> Iterator[tuple[str, str]]:
    """``(doc_id, title + " " + text)`` pairs of :func:`iter_corpus` — the input of
    :func:`lexray.index.lucene.build_bm25_index` (BEIR "flat" text, as Anserini's regressions)."""
    for doc in iter_corpus(dataset_dir, on_error=on_error, report=report, max_docs=max_docs):
        yield doc.doc_id, doc.full_text


def iter_corpus_batches(dataset_dir: str | os.PathLike, batch_size: int = 1024, on_error: OnError = "fail",
                        report: ReadReport | None = None,
                        max_docs: int | None = None) -> Iterator[dict[str, list[str]]]:
    """Stream the corpus as column batches ``{"doc_id": [...], "title": [...], "text": [...]}``.

    Each batch holds at most ``batch_size`` documents (the last may be shorter); feed them to
    ``pyarrow.Table.from_pydict`` or Ray Data. Same errors as :func:`iter_corpus`.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    batch: dict[str, list[str]] = {"doc_id": [], "title": [], "text": []}
    for doc in iter_corpus(dataset_dir, on_error=on_error, report=report, max_docs=max_docs):
        batch["doc_id"].append(doc.doc_id)
        batch["title"].append(doc.title)
        batch["text"].append(doc.text)
        if len(batch["doc_id"]) >= batch_size:
            yield batch
            batch = {"doc_id": [], "title": [], "text": []}
    if batch["doc_id"]:
        yield batch


def corpus_ids(dataset_dir: str | os.PathLike) -> set[str]:
    """All well-formed document ids in ``corpus.jsonl``, including documents with empty text.

    Used to check qrels; holds ids only (a few tens of bytes per document). Malformed rows are ignored here –
    they are reported by :func:`iter_corpus`.
    """
    path = _file(dataset_dir, "corpus.jsonl")
    rep = ReadReport()
    return {rid for _, rid, *_ in _iter_json_records(path, "document", "skip", rep, require_text=False)}


def corpus_line_numbers(dataset_dir: str | os.PathLike) -> dict[str, int]:
    """``{doc_id: line number (1-based)}`` of every well-formed document of ``corpus.jsonl`` (as
    :func:`corpus_ids`: documents with empty text included, malformed rows left to :func:`iter_corpus` to report).

    Used to fetch a document's fields by line (:mod:`lexray.search.corpus`) without holding the corpus.
    """
    path = _file(dataset_dir, "corpus.jsonl")
    rep = ReadReport()
    return {rid: line for line, rid, *_ in _iter_json_records(path, "document", "skip", rep, require_text=False)}


def _query_ids(dataset_dir: str | os.PathLike) -> set[str]:
    path = _file(dataset_dir, "queries.jsonl")
    rep = ReadReport()
    return {rid for _, rid, *_ in _iter_json_records(path, "query", "skip", rep, require_text=False)}


def available_splits(dataset_dir: str | os.PathLike) -> list[str]:
    """The qrels splits present (``qrels/*.tsv`` file stems), sorted."""
    d = resolve_dataset_dir(dataset_dir) / "qrels"
    return sorted(p.stem for p in d.glob("*.tsv")) if d.is_dir() else []


def load_qrels(dataset_dir: str | os.PathLike, split: str = "test", on_error: OnError = "fail",
               report: ReadReport | None = None, check_ids: bool = True) -> dict[str, dict[str, int]]:
    """Read ``qrels/<split>.tsv`` (header ``query-id corpus-id score``, tab-separated) into ``{qid: {doc_id: rel}}``.

    Scores must be integers (graded relevance; ``<= 0`` means not relevant for pytrec_eval). With
    ``check_ids`` every query id must appear in ``queries.jsonl`` and every document id in ``corpus.jsonl``
    (this scans the corpus once, keeping ids only).

    Raises:
        DataError: bad row under ``on_error="fail"``.
        FileNotFoundError: missing folder or split (the message lists the available splits).
    """
    check_on_error(on_error)
    owned = report is None
    report = report if report is not None else ReadReport()
    base = resolve_dataset_dir(dataset_dir)
    path = base / "qrels" / f"{split}.tsv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; available splits: {available_splits(base) or 'none'}")
    qids = _query_ids(base) if check_ids else None
    dids = corpus_ids(base) if check_ids else None
    name = f"qrels/{path.name}"
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8", errors="strict") as fh:
        for line_no, line in enumerate(fh, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            cols = line.split("\t")
            if line_no == 1 and len(cols) == 3 and cols[2].strip().lower() == "score":
                continue  # header
            report.read[name] += 1
            if len(cols) != 3:
                report.problem(DataError(path, line_no, "<line>", "bad_columns",
                                         f"expected 3 tab-separated columns (query-id, corpus-id, score), "
                                         f"got {len(cols)}"), on_error)
                continue
            qid, did, score_s = (c.strip() for c in cols)
            try:
                score = int(score_s)
            except ValueError:
                report.problem(DataError(path, line_no, "score", "bad_score",
                                         f"not an integer: {score_s!r}"), on_error)
                continue
            if not qid:
                report.problem(DataError(path, line_no, "query-id", "unknown_query", "empty query id"), on_error)
                continue
            if not did:
                report.problem(DataError(path, line_no, "corpus-id", "unknown_doc", "empty document id"),
                               on_error)
                continue
            if qids is not None and qid not in qids:
                report.problem(DataError(path, line_no, "query-id", "unknown_query",
                                         f"query {qid!r} is not in queries.jsonl"), on_error)
                continue
            if dids is not None and did not in dids:
                report.problem(DataError(path, line_no, "corpus-id", "unknown_doc",
                                         f"document {did!r} is not in corpus.jsonl"), on_error)
                continue
            judged = qrels.setdefault(qid, {})
            if did in judged:
                report.problem(DataError(path, line_no, "corpus-id", "duplicate_qrel",
                                         f"pair ({qid!r}, {did!r}) judged twice"), on_error)
                continue
            judged[did] = score
            report.kept[name] += 1
    if owned:
        _warn_unreported(report, str(path))
    return qrels


def load_queries_file(path: str | os.PathLike, on_error: OnError = "fail") -> dict[str, str]:
    """A BEIR-format queries file of any name (``{"_id", "text"}`` per line) → ``{qid: text}`` (file order), with
    the checks of :func:`load_queries` (``lexray search --queries FILE.jsonl``).

    Raises:
        DataError: bad row under ``on_error="fail"`` (file:line, field); FileNotFoundError: no such file.
    """
    check_on_error(on_error)
    report = ReadReport()
    out = {rid: text for _, rid, _, text, _ in _iter_json_records(Path(path), "query", on_error, report, True)}
    _warn_unreported(report, str(path))
    return out


def load_queries(dataset_dir: str | os.PathLike, split: str | None = None, on_error: OnError = "fail",
                 report: ReadReport | None = None) -> dict[str, str]:
    """Read ``queries.jsonl`` into ``{qid: text}`` (file order).

    With ``split`` only queries judged in ``qrels/<split>.tsv`` are returned (qrels are read without id
    checks here; call :func:`load_qrels` for those). Queries are small, so they are loaded whole.

    Raises:
        DataError: bad row under ``on_error="fail"``.
    """
    check_on_error(on_error)
    owned = report is None
    report = report if report is not None else ReadReport()
    path = _file(dataset_dir, "queries.jsonl")
    keep = None
    if split is not None:
        keep = set(load_qrels(dataset_dir, split, on_error="skip", check_ids=False,
                                  report=ReadReport()))
    out: dict[str, str] = {}
    for _, rid, _title, text, _rec in _iter_json_records(path, "query", on_error, report, True):
        if keep is None or rid in keep:
            out[rid] = text
    if owned:
        _warn_unreported(report, str(path))
    return out


def dataset_stats(dataset_dir: str | os.PathLike, split: str | None = None) -> dict:
    """Counts for a dataset card: documents, mean words per document, queries, qrels (streams the corpus).

    Bad rows are skipped and counted (``"read_report"``), never raised.
    """
    rep = ReadReport()
    n_docs = 0
    n_words = 0
    for doc in iter_corpus(dataset_dir, on_error="skip", report=rep):
        n_docs += 1
        n_words += len(doc.full_text.split())
    stats: dict = {"n_docs": n_docs, "avg_doc_words": (n_words / n_docs) if n_docs else 0.0,
                   "splits": available_splits(dataset_dir)}
    if split is not None:
        qrels = load_qrels(dataset_dir, split, on_error="skip", report=rep)
        queries = load_queries(dataset_dir, split=split, on_error="skip", report=rep)
        stats.update({"split": split, "n_queries": len(queries), "n_qrels": sum(map(len, qrels.values())),
                      "avg_rel_per_query": (sum(sum(1 for r in d.values() if r > 0) for d in qrels.values())
                                            / len(qrels)) if qrels else 0.0})
    stats["read_report"] = rep.to_dict()
    return stats
