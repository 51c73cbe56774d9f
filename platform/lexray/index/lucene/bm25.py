"""BM25 baselines on Lucene, as Anserini's BEIR "flat" regressions: a ``JsonCollection`` of ``title + " " +
text``, Anserini's default English analyzer, ``SimpleSearcher`` with k1=0.9, b=0.4.

Documents come in as an iterable of ``(doc_id, text)`` pairs (the caller reads and validates the corpus, e.g.
with :func:`lexray.data.beir.iter_corpus`), so this layer does not import ``lexray.data``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from tqdm.auto import tqdm

from lexray.index.lucene.anserini import (
    LuceneIndexStats,
    Run,
    check_counters,
    finish_index_target,
    hits_to_run,
    prepare_index_target,
    run_anserini,
    slice_batches,
)
from lexray.index.lucene.jvm import ensure_jvm

log = logging.getLogger(__name__)


def write_json_collection(documents: Iterable[tuple[str, str]], out_dir: str | os.PathLike, *,
                          total: int | None = None, show_progress: bool = True) -> int:
    """Write ``(doc_id, text)`` pairs as an Anserini ``JsonCollection`` (``{"id", "contents"}`` per line).

    For BEIR, pass ``(doc.doc_id, doc.full_text)`` from :func:`lexray.data.beir.iter_corpus`: title + " " + text,
    the same text as Anserini's BEIR "flat" regressions (``BeirFlatCollection``). Returns the number written.

    Raises:
        ValueError: an empty or non-string document id (names its position).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(out / "docs.jsonl", "w", encoding="utf-8") as fh:
        for doc_id, text in tqdm(documents, desc="write JsonCollection", unit="doc", total=total,
                                 disable=not show_progress):
            if not isinstance(doc_id, str) or not doc_id:
                raise ValueError(f"document {n}: id {doc_id!r} is not a non-empty string")
            fh.write(json.dumps({"id": doc_id, "contents": str(text)}) + "\n")
            n += 1
    return n


def build_bm25_index(documents: Iterable[tuple[str, str]], index_dir: str | os.PathLike, *, threads: int = 2,
                     max_heap: str = "4g", overwrite: bool = False, total: int | None = None,
                     show_progress: bool = True) -> LuceneIndexStats:
    """Build a BM25 (term frequency) Lucene index of ``(doc_id, text)`` pairs, as Anserini's BEIR flat
    regressions do.

    ``IndexCollection -collection JsonCollection`` with Anserini's default English analyzer (Porter stemming,
    Lucene stopwords); no positions, docvectors or raw documents (not needed for BM25 ranking). The caller reads
    (and validates, and reports skipped rows of) the corpus: e.g.
    ``((d.doc_id, d.full_text) for d in beir.iter_corpus(dataset, on_error=..., report=report))``.

    Raises:
        FileExistsError, AnseriniError, JavaSetupError; ValueError for a bad document id.
    """
    index_dir = Path(index_dir)
    tmp = prepare_index_target(index_dir, overwrite)
    coll = index_dir.with_name(index_dir.name + ".collection")
    if coll.exists():
        shutil.rmtree(coll)
    t0 = time.perf_counter()
    try:
        written = write_json_collection(documents, coll, total=total, show_progress=show_progress)
        run = run_anserini("io.anserini.index.IndexCollection", [
            "-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
            "-input", str(coll), "-index", str(tmp), "-threads", str(threads),
        ], max_heap=max_heap, desc="Lucene BM25 index", total_docs=written, show_progress=show_progress)
        check_counters(run, written, f"BM25 index {index_dir}")
        stats = LuceneIndexStats(str(index_dir), "bm25", written, run.counters, time.perf_counter() - t0,
                                 extra={"index_seconds": run.seconds})
        finish_index_target(tmp, index_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
        if coll.exists():
            shutil.rmtree(coll)
    return stats


class BM25Searcher:
    """BM25 over a Lucene index from :func:`build_bm25_index` (``io.anserini.search.SimpleSearcher``).

    Defaults k1=0.9, b=0.4 are Anserini's (and its BEIR regressions'). Queries go through the same analyzer
    as the documents. Robertson & Zaragoza (2009), "The Probabilistic Relevance Framework: BM25 and Beyond".
    """

    def __init__(self, index_dir: str | os.PathLike, k1: float = 0.9, b: float = 0.4, max_heap: str = "4g"):
        path = Path(index_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"Lucene index {path} does not exist")
        ensure_jvm(max_heap)
        from jnius import autoclass

        self._searcher = autoclass("io.anserini.search.SimpleSearcher")(str(path))
        self._searcher.set_bm25(float(k1), float(b))
        self.num_docs = int(self._searcher.get_total_num_docs())

    def search(self, query_ids: Sequence[str], query_texts: Sequence[str], k: int = 1000, threads: int = 2,
               batch_size: int = 1024, remove_query: bool = False, show_progress: bool = False) -> Run:
        """Top-``k`` BM25 documents per query.

        Args:
            query_ids, query_texts: aligned sequences (query ids must be unique).
            remove_query: drop a hit whose doc id equals the query id (Anserini's ``-removeQuery``, used by its
                BEIR regressions for corpora where queries are documents too; no effect on SciFact).

        Returns:
            run ``{qid: {doc_id: score}}``; every query id is a key (an empty dict if nothing matched).
        """
        if len(query_ids) != len(query_texts):
            raise ValueError(f"{len(query_ids)} query ids but {len(query_texts)} query texts")
        if len(set(query_ids)) != len(query_ids):
            raise ValueError("query ids are not unique")
        from jnius import autoclass

        jlist = autoclass("java.util.ArrayList")
        run: Run = {}
        with tqdm(total=len(query_ids), desc="BM25 search", unit="query", disable=not show_progress) as bar:
            for sl in slice_batches(len(query_ids), batch_size):
                ids, texts = jlist(), jlist()
                for qid, text in zip(query_ids[sl], query_texts[sl], strict=True):
                    ids.add(str(qid))
                    texts.add(str(text))
                results = self._searcher.batch_search(texts, ids, int(k), int(threads))
                run.update(hits_to_run(results, [str(q) for q in query_ids[sl]]))
                bar.update(sl.stop - sl.start)
        if remove_query:
            for qid, hits in run.items():
                hits.pop(qid, None)
        return run

    def close(self) -> None:
        self._searcher.close()


def ensure_bm25_index(documents: Callable[[], Iterable[tuple[str, str]]], index_dir: str | os.PathLike
                      ) -> Path:
    """``index_dir`` as a BM25 index: built from ``documents()`` (called only then) when it holds no Lucene index
    yet, reused as it is otherwise. The one check-then-build of the callers that share an index across steps
    (mining and a Tune search's dev set, ``lexray.workflows.bm25_index``; a BM25 teacher,
    ``lexray.train.teacher``). Raises what :func:`build_bm25_index` raises."""
    index_dir = Path(index_dir)
    if not list(index_dir.glob("segments_*")):
        build_bm25_index(documents(), index_dir, overwrite=True)
    return index_dir


def bm25_search(index_dir: str | os.PathLike, queries: Mapping[str, str], k: int = 1000, *, k1: float = 0.9,
                b: float = 0.4, threads: int = 2, remove_query: bool = False, show_progress: bool = True) -> Run:
    """One-shot BM25 search of ``queries`` ``{qid: text}``; see :class:`BM25Searcher`."""
    searcher = BM25Searcher(index_dir, k1=k1, b=b)
    try:
        return searcher.search(list(queries), list(queries.values()), k=k, threads=threads,
                               remove_query=remove_query, show_progress=show_progress)
    finally:
        searcher.close()



SearchFn = Callable[[Sequence[str], Sequence[str], int], Run]
"""``search_fn(query_ids, query_texts, k) -> run``: the pluggable search used by hard-negative mining."""


def bm25_search_fn(index_dir: str | os.PathLike, *, k1: float = 0.9, b: float = 0.4, threads: int = 2,
                   show_progress: bool = True) -> SearchFn:
    """A :data:`SearchFn` over a BM25 Lucene index (the searcher is opened once and reused)."""
    searcher = BM25Searcher(index_dir, k1=k1, b=b)

    def search_fn(query_ids: Sequence[str], query_texts: Sequence[str], k: int) -> Run:
        return searcher.search(list(query_ids), list(query_texts), k=k, threads=threads,
                               show_progress=show_progress)

    return search_fn
