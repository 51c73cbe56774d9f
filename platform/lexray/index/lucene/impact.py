"""Impact indexes of learned sparse vectors: Parquet shards → Anserini ``JsonVectorCollection`` → Lucene index
(``IndexCollection -impact -pretokenized``, as Anserini's SPLADE regressions), and exact impact search.

Token scheme (``tokens``): a term is written either as

* ``"vocab"`` — the tokenizer's token string (``"rhino"``, ``"##virus"``, ``"Ġthe"``). Anserini's convention
  for SPLADE / uniCOIL indexes, so Pyserini's ``--impact --encoder`` and Anserini's query encoders, which emit
  token strings, can search the index. The id → token table is saved in the index (``lexray-vocab.json``) so
  :class:`ImpactSearcher` maps lexray's term ids the same way. Token strings holding whitespace cannot be
  pre-tokenized and are refused (name the id).
* ``"id"`` — the decimal term id (``"2023"``), the integer the shards store: tokenizer-agnostic, exact to
  reverse (:func:`term_token` / :func:`token_term`), no vocabulary needed.

Quantization: :func:`lexray.index.quantization.quantize`, the same function as the DuckDB index
(``IndexConfig.quant_bits``); ``scale`` is the largest document weight of the collection unless given. Terms
whose impact rounds to 0 are dropped (Lucene cannot store a zero term frequency) and counted.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lexray.encode.reader import iter_shard_batches, resolve_shards
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
from lexray.index.quantization import quantize

log = logging.getLogger(__name__)

IMPACT_META_FILE = "lexray-impact.json"
"""Written into an impact index folder after a successful build: scale, bits, token scheme, counts."""


VOCAB_FILE = "lexray-vocab.json"
"""In an index built with ``tokens="vocab"``: the id → token-string table (a JSON list, index = term id)."""


def check_vocab(vocab: Sequence[str | None]) -> list[str | None]:
    """Validate an id → token table for ``tokens="vocab"``: unique strings without whitespace.

    Raises:
        ValueError: a duplicate token or one with whitespace (names the ids): such tokens cannot be pre-tokenized
            Lucene terms; use ``tokens="id"``.
    """
    seen: dict[str, int] = {}
    out: list[str | None] = []
    for i, tok in enumerate(vocab):
        if tok is None:
            out.append(None)
            continue
        tok = str(tok)
        if not tok or any(c.isspace() for c in tok):
            raise ValueError(f"vocabulary id {i}: token {tok!r} is empty or holds whitespace; it cannot be a "
                             "pre-tokenized Lucene term (index with tokens='id')")
        if tok in seen:
            raise ValueError(f"vocabulary ids {seen[tok]} and {i} have the same token {tok!r} (index with tokens='id')")
        seen[tok] = i
        out.append(tok)
    return out


def _tokens_of(term_ids: Sequence[int], vocab: Sequence[str | None] | None) -> list[str]:
    if vocab is None:
        return [term_token(t) for t in term_ids]
    out = []
    for t in term_ids:
        tok = vocab[t] if 0 <= t < len(vocab) else None
        if tok is None:
            raise ValueError(f"term id {t} has no token string in the vocabulary ({len(vocab)} entries)")
        out.append(tok)
    return out


def term_token(term_id: int) -> str:
    """The Lucene token of a term id: its decimal string (see the module docstring)."""
    return str(int(term_id))


def token_term(token: str) -> int:
    """Inverse of :func:`term_token`; raises ValueError for a token that is not a decimal term id."""
    if not token.isdigit():
        raise ValueError(f"Lucene token {token!r} is not a lexray term id")
    return int(token)



def _shard_files(shards: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    # the one shard reader (lexray.encode.shards): a folder's manifest is verified, files are used as given
    return resolve_shards(shards).files


def iter_sparse_shards(shards: str | os.PathLike | Sequence[str | os.PathLike], batch_size: int = 4096
                       ) -> Iterator[tuple[Path, int, list[str], list[np.ndarray], list[np.ndarray]]]:
    """``(file, first_row, doc_ids, term_ids, weights)`` batches: :func:`lexray.encode.shards.iter_shard_batches`."""
    return iter_shard_batches(shards, batch_size=batch_size)


def max_weight(shards: str | os.PathLike | Sequence[str | os.PathLike]) -> float:
    """Largest document weight over all shards (reads only the ``weights`` column). Raises if it is not > 0."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    best = 0.0
    for path in _shard_files(shards):
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(columns=["weights"]):
            m = pc.max(pc.list_flatten(batch.column("weights"))).as_py()
            if m is not None:
                best = max(best, float(m))
    if not best > 0:
        raise ValueError(f"no positive weight in shards {shards}: cannot set a quantization scale")
    return best


@dataclass
class ExportStats:
    """Counts of a JsonVectorCollection export. Empty documents (no term with impact ≥ 1) are not written."""

    collection_dir: str
    files: list[str]
    scale: float
    bits: int
    docs_read: int = 0
    docs_written: int = 0
    empty_docs: int = 0
    postings: int = 0
    zero_impact_terms: int = 0
    clipped_terms: int = 0


def export_json_vectors(shards: str | os.PathLike | Sequence[str | os.PathLike], out_dir: str | os.PathLike, *,
                        scale: float | None = None, bits: int = 8, batch_size: int = 4096,
                        vocab: Sequence[str | None] | None = None, show_progress: bool = True) -> ExportStats:
    """Write Parquet sparse shards as an Anserini ``JsonVectorCollection`` (one ``.jsonl`` per shard file).

    Each line is ``{"id": doc_id, "contents": "", "vector": {"<term id>": impact, ...}}`` with integer impacts
    from :func:`quantize`; tokens are ``vocab[term_id]`` (token strings, Anserini's SPLADE convention; see
    :func:`check_vocab`) or, with ``vocab=None``, :func:`term_token`. Streams record batches; memory stays
    O(batch).

    Args:
        shards: a directory of ``*.parquet`` shards, one file, or a list of files.
        out_dir: created if missing; must not already hold ``.jsonl`` files.
        scale: weight mapped to ``2**bits - 1``; None = the largest weight in the shards (one extra pass over
            the ``weights`` column). Weights above a given scale are clipped and counted.
        bits: impact width (8 = Anserini's SPLADE regressions and lexray's DuckDB default).

    Returns:
        ExportStats with documents read / written / empty (not written: Lucene indexes no empty document),
        postings, terms dropped because their impact rounded to 0, and clipped terms.

    Raises:
        ValueError: bad shard rows (see :func:`iter_sparse_shards`), a document with a repeated term id,
            negative or non-finite weights (naming file and row).
        FileExistsError: ``out_dir`` already holds ``.jsonl`` files.
    """
    files = _shard_files(shards)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("*.jsonl")):
        raise FileExistsError(f"{out} already holds .jsonl files; export into an empty folder")
    if scale is None:
        scale = max_weight(files)
    stats = ExportStats(collection_dir=str(out), files=[], scale=float(scale), bits=bits)
    total = _count_rows(files)
    with tqdm(total=total, desc="export JsonVectorCollection", unit="doc", disable=not show_progress) as bar:
        for i, path in enumerate(files):
            target = out / f"part-{i:05d}.jsonl"
            stats.files.append(str(target))
            with open(target, "w", encoding="utf-8") as fh:
                for _, row0, doc_ids, terms, weights in iter_sparse_shards([path], batch_size=batch_size):
                    for j, (doc_id, t, w) in enumerate(zip(doc_ids, terms, weights, strict=True)):
                        stats.docs_read += 1
                        try:
                            q = quantize(w, scale, bits)
                        except ValueError as e:
                            raise ValueError(f"{path}: row {row0 + j} (doc_id {doc_id!r}): field 'weights': {e}"
                                             ) from None
                        if len(t) and len(np.unique(t)) != len(t):
                            raise ValueError(f"{path}: row {row0 + j} (doc_id {doc_id!r}): field 'term_ids' "
                                             "repeats a term id")
                        stats.clipped_terms += int(np.count_nonzero(np.asarray(w, np.float64) > scale))
                        keep = q > 0
                        stats.zero_impact_terms += int(len(q) - keep.sum())
                        if not keep.any():
                            stats.empty_docs += 1
                            continue
                        try:
                            toks = _tokens_of(t[keep].tolist(), vocab)
                        except ValueError as e:
                            raise ValueError(f"{path}: row {row0 + j} (doc_id {doc_id!r}): field 'term_ids': {e}"
                                             ) from None
                        vec = ", ".join(f"{json.dumps(tok)}: {imp}"
                                        for tok, imp in zip(toks, q[keep].tolist(), strict=True))
                        fh.write(f'{{"id": {json.dumps(doc_id)}, "contents": "", "vector": {{{vec}}}}}\n')
                        stats.docs_written += 1
                        stats.postings += int(keep.sum())
                    bar.update(len(doc_ids))
    if stats.empty_docs:
        log.warning("export_json_vectors: %d of %d documents have no term with impact >= 1 and were not written",
                    stats.empty_docs, stats.docs_read)
    return stats


def _count_rows(files: Iterable[Path]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)



def build_impact_index(shards: str | os.PathLike | Sequence[str | os.PathLike], index_dir: str | os.PathLike, *,
                       scale: float | None = None, bits: int = 8, threads: int = 2, max_heap: str = "4g",
                       collection_dir: str | os.PathLike | None = None, overwrite: bool = False,
                       vocab: Sequence[str | None] | None = None, show_progress: bool = True) -> LuceneIndexStats:
    """Build a Lucene impact index from Parquet sparse shards (export + ``IndexCollection -impact``).

    Runs ``IndexCollection -collection JsonVectorCollection -generator DefaultLuceneDocumentGenerator -impact
    -pretokenized`` (Anserini's SPLADE regressions) in a Java 21 subprocess. The index is built next to
    ``index_dir`` and moved into place only on success; ``lexray-impact.json`` inside it records the scale,
    bits and token scheme.

    Args:
        collection_dir: where to keep the JsonVectorCollection (emptied first); None = a temporary folder
            deleted afterwards.
        vocab: id → token string table (e.g. ``tokenizer.convert_ids_to_tokens(range(|V|))``): terms are token
            strings, so Pyserini's ``--impact --encoder`` can search the index; it is saved as
            ``lexray-vocab.json`` for :class:`ImpactSearcher`. None = decimal term ids.
        overwrite: replace an existing non-empty ``index_dir``.

    Returns:
        LuceneIndexStats (with the ExportStats as ``export``).

    Raises:
        FileExistsError, ValueError (bad shards), AnseriniError (indexing failed or counts disagree),
        JavaSetupError.
    """
    index_dir = Path(index_dir)
    tmp = prepare_index_target(index_dir, overwrite)
    coll = Path(collection_dir) if collection_dir else index_dir.with_name(index_dir.name + ".collection")
    if coll.exists():
        shutil.rmtree(coll)
    if vocab is not None:
        vocab = check_vocab(vocab)
    t0 = time.perf_counter()
    try:
        export = export_json_vectors(shards, coll, scale=scale, bits=bits, vocab=vocab,
                                     show_progress=show_progress)
        run = run_anserini("io.anserini.index.IndexCollection", [
            "-collection", "JsonVectorCollection", "-generator", "DefaultLuceneDocumentGenerator",
            "-input", str(coll), "-index", str(tmp), "-threads", str(threads), "-impact", "-pretokenized",
        ], max_heap=max_heap, desc="Lucene impact index", total_docs=export.docs_written,
            show_progress=show_progress)
        check_counters(run, export.docs_written, f"impact index {index_dir}")
        stats = LuceneIndexStats(str(index_dir), "impact", export.docs_written, run.counters,
                                 time.perf_counter() - t0, export=asdict(export),
                                 extra={"index_seconds": run.seconds})
        if vocab is not None:
            (tmp / VOCAB_FILE).write_text(json.dumps(vocab))
        meta = {"token_scheme": "vocab" if vocab is not None else "id", "scale": export.scale, "bits": bits,
                "quantization": "floor(w * ((2**bits - 1) / scale) + 0.5)", **asdict(stats)}
        (tmp / IMPACT_META_FILE).write_text(json.dumps(meta, indent=2))
        finish_index_target(tmp, index_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
        if collection_dir is None and coll.exists():
            shutil.rmtree(coll)
    return stats



def quantize_query(term_ids: np.ndarray, weights: np.ndarray, scale: float | None = None, bits: int = 8,
                   vocab: Sequence[str | None] | None = None) -> dict[str, int]:
    """Integer query for the impact searcher: ``{term_token: impact}`` with impacts ≥ 1.

    ``scale`` None = this query's largest weight (the ranking of a dot product does not change when the query
    is multiplied by a positive constant, so a per-query scale keeps the most precision); pass the document
    scale to make scores comparable across queries. Terms that round to 0 are dropped.
    """
    t = np.asarray(term_ids)
    w = np.asarray(weights, dtype=np.float64)
    if t.shape != w.shape:
        raise ValueError(f"term_ids {t.shape} and weights {w.shape} differ in shape")
    if w.size == 0:
        return {}
    s = float(w.max()) if scale is None else scale
    if s <= 0:
        return {}
    q = quantize(w, s, bits)
    out: dict[str, int] = {}
    for tid, imp in zip(t.tolist(), q.tolist(), strict=True):
        if imp > 0:
            tok = _tokens_of([tid], vocab)[0]
            if tok in out:
                raise ValueError(f"query repeats term id {tid}")
            out[tok] = imp
    return out


class ImpactSearcher:
    """Exact dot-product search over a Lucene impact index (``io.anserini.search.SimpleImpactSearcher``).

    Scores are ``Σ_t q_t · impact_{d,t}`` over integer query weights and the index's integer impacts. Lucene
    returns float scores that can sit one ulp below that integer (measured with Anserini 1.7.1: 239.99998 for
    an exact 240), so the returned scores are rounded to the nearest integer, which recovers the exact dot
    product while it stays below 2**22 (one float ulp ≤ 0.5 there). Called through the Java class directly,
    so no query term is dropped: Pyserini's Python wrapper filters query terms by ``min_idf`` (its default 0
    drops terms that occur in every document); that filter is not used here.
    """

    def __init__(self, index_dir: str | os.PathLike, max_heap: str = "4g"):
        path = Path(index_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"Lucene index {path} does not exist")
        ensure_jvm(max_heap)
        from jnius import autoclass

        self.meta = json.loads((path / IMPACT_META_FILE).read_text()) if (path / IMPACT_META_FILE).is_file() \
            else None
        self.vocab: list[str | None] | None = (json.loads((path / VOCAB_FILE).read_text())
                                               if (path / VOCAB_FILE).is_file() else None)
        self._searcher = autoclass("io.anserini.search.SimpleImpactSearcher")(str(path))
        self.num_docs = int(self._searcher.get_total_num_docs())

    def search_int(self, query_ids: Sequence[str], queries: Sequence[Mapping[str, int]], k: int = 1000,
                   threads: int = 2, batch_size: int = 1024, show_progress: bool = False) -> Run:
        """Search integer queries ``{token: weight}`` (the index's token scheme, weights ≥ 1)."""
        if len(query_ids) != len(queries):
            raise ValueError(f"{len(query_ids)} query ids but {len(queries)} queries")
        if len(set(query_ids)) != len(query_ids):
            raise ValueError("query ids are not unique")
        from jnius import autoclass

        jlist, jmap, jint = (autoclass("java.util.ArrayList"), autoclass("java.util.HashMap"),
                             autoclass("java.lang.Integer"))
        run: Run = {}
        with tqdm(total=len(query_ids), desc="impact search", unit="query", disable=not show_progress) as bar:
            for sl in slice_batches(len(query_ids), batch_size):
                ids, qs = jlist(), jlist()
                for qid, q in zip(query_ids[sl], queries[sl], strict=True):
                    m = jmap()
                    for tok, wt in q.items():
                        if int(wt) != wt or wt < 1:
                            raise ValueError(f"query {qid}: weight of {tok!r} must be an integer >= 1, got {wt}")
                        m.put(str(tok), jint(int(wt)))
                    ids.add(str(qid))
                    qs.add(m)
                results = self._searcher.batch_search(qs, ids, int(k), int(threads))
                run.update(hits_to_run(results, [str(q) for q in query_ids[sl]], integer_scores=True))
                bar.update(sl.stop - sl.start)
        top = max((max(h.values()) for h in run.values() if h), default=0.0)
        if top > _EXACT_LIMIT:
            log.warning("impact search: a score reached %.0f > 2**22; rounding no longer guarantees the exact "
                        "dot product (lower bits or query_scale)", top)
        return run

    def search(self, query_ids: Sequence[str], term_ids: Sequence[np.ndarray], weights: Sequence[np.ndarray],
               k: int = 1000, threads: int = 2, query_scale: float | None = None, bits: int = 8,
               batch_size: int = 1024, show_progress: bool = False) -> Run:
        """Quantize sparse queries (:func:`quantize_query`) and search.

        Args:
            query_ids: (Q,) unique ids.
            term_ids, weights: (Q,) lists of aligned 1-D arrays (int term ids, float weights ≥ 0).
            query_scale: None = per-query max (see :func:`quantize_query`).

        Returns:
            run ``{qid: {doc_id: score}}``; queries left with no term get ``{}`` (counted in a log warning).
        """
        if not (len(query_ids) == len(term_ids) == len(weights)):
            raise ValueError(f"{len(query_ids)} ids, {len(term_ids)} term id arrays, {len(weights)} weight arrays")
        qs = [quantize_query(t, w, query_scale, bits, vocab=self.vocab)
              for t, w in zip(term_ids, weights, strict=True)]
        empty = sum(1 for q in qs if not q)
        if empty:
            log.warning("impact search: %d of %d queries have no term with quantized weight >= 1", empty, len(qs))
        return self.search_int(query_ids, qs, k=k, threads=threads, batch_size=batch_size,
                               show_progress=show_progress)

    def close(self) -> None:
        self._searcher.close()


def impact_search(index_dir: str | os.PathLike, query_ids: Sequence[str], term_ids: Sequence[np.ndarray],
                  weights: Sequence[np.ndarray], k: int = 1000, *, threads: int = 2, query_scale: float | None = None,
                  bits: int = 8, show_progress: bool = True) -> Run:
    """One-shot exact impact search of sparse queries; see :class:`ImpactSearcher` and :func:`quantize_query`."""
    searcher = ImpactSearcher(index_dir)
    try:
        return searcher.search(list(query_ids), term_ids, weights, k=k, threads=threads, query_scale=query_scale,
                               bits=bits, show_progress=show_progress)
    finally:
        searcher.close()


_EXACT_LIMIT = float(1 << 22)


def weight_scores(run: Run, index_dir: str | os.PathLike, query_ids: Sequence[str],
                  weights: Sequence[np.ndarray]) -> Run:
    """An impact search's run with scores back in weight units, ``Σ_t q_t·w_{t,d}`` (≈ the exact backend's).

    :meth:`ImpactSearcher.search` (per-query scale) scores ``Σ_t q̂_t·î_{t,d}`` with ``q̂ = quantize(q, max q)``
    and ``î = quantize(w, doc scale)``, so the score times ``(max q / L)·(doc scale / L)``, ``L = 2**bits - 1``,
    is the dot product up to quantization. Fusion by raw score sum (lexray.index.fusion, ``sum``) needs it.
    """
    meta = json.loads((Path(index_dir) / IMPACT_META_FILE).read_text())
    levels = float((1 << int(meta["bits"])) - 1)
    doc = float(meta["scale"]) / levels
    out: Run = {}
    for qid, w in zip(query_ids, weights, strict=True):
        qmax = float(np.max(w)) if len(w) else 0.0
        f = doc * qmax / levels
        out[qid] = {d: s * f for d, s in (run.get(qid) or {}).items()}
    return out
