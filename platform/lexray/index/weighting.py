"""IDF document weighting of CAI (Iida & Okazaki, AACL 2022, arXiv:2211.03988, §3.2.2, Eq. 6-7), computed once.

Eq. 6: ``w_t = log(N / N_t)`` if ``N_t ≠ 0``, else 1, with N the number of documents of the target collection and
N_t the number of those documents that include token t; Eq. 7: ``ŝ = w ⊙ s`` for *document* vectors only.

Which N and N_t (``index.idf_source``):

* ``tokens`` (default, the paper's): N_t counts the documents whose *text* contains token t, tokenized with the
  encoder's tokenizer, untruncated, title + " " + text (BEIR's ``full_text``), as CAI's public code does
  (``calc_idf_and_doclen`` in meshidenn/CAI ``search/search_splade_bm25.py``). Special tokens are not counted
  (so they keep weight 1; CAI's code counts them, finds idf 0 and then also leaves them at 1). A term SPLADE
  activates but no document text contains (an expansion) has N_t = 0 and keeps its weight (Eq. 6's "otherwise
  1", which only matters under this reading).
* ``postings``: N_t = the term's posting count in the index (documents whose *sparse vector* holds t), read from
  the index's ``offsets.npy``; free for any index, collection-store versions included.

N is the number of documents in the index (``stats.json`` ``n_docs``); the token counts must cover the same
documents (checked).

``doc_weighting``: ``idf`` is the paper's Eq. 6; ``sqrt_idf`` is ``√idf`` (1 where N_t = 0), the default of
CAI's public code (``BEIRSpladeModelIDF(sqrt=True)``). Terms in every document get idf 0 and drop out (the paper;
CAI's code leaves weight 0 at 1).

Where it is applied: at search time, on the *query*. For a dot product Σ_t q_t·(w_t·d_t) = Σ_t (q_t·w_t)·d_t,
so weighting the query's terms equals weighting every document (exact backend: identical scores up to float
round-off). Applying it to queries keeps the index's 8-bit impacts at the encoder's own scale (weighting the
postings would stretch the global quantization range by up to log N, ≈ 8.6 for SciFact, and crush common terms
into a few impact levels), needs no re-encoding and no re-indexing when the statistics change (a growing
collection store only recounts), and serves the exact, Lucene (queries are quantized per query) and Seismic
backends alike. SPLADE-Doc with IDF (bag-of-words queries) becomes q_t = w_t for the query's tokens.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

import numpy as np

log = logging.getLogger(__name__)

Weighting = Literal["none", "idf", "sqrt_idf"]
WEIGHTINGS = ("none", "idf", "sqrt_idf")
STATS_FILE = "term_stats.json"
DF_FILE = "term_df.npy"

__all__ = ["WEIGHTINGS", "collection_stats", "postings_df", "term_weights", "token_df", "weight_queries"]


def term_weights(df: np.ndarray, n_docs: int, weighting: Weighting) -> np.ndarray:
    """(|V|,) float32 term weights of Eq. 6 (``idf``), their square root (``sqrt_idf``) or ones (``none``).

    Args:
        df: (|V|,) integer N_t. n_docs: N (> 0 unless every N_t is 0).

    Raises:
        ValueError: an unknown ``weighting`` (names ``index.doc_weighting``), negative counts, or N_t > N.
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"index.doc_weighting: unknown weighting {weighting!r}; one of {', '.join(WEIGHTINGS)}")
    df = np.asarray(df, dtype=np.float64)
    if df.size and (df.min() < 0 or df.max() > n_docs):
        raise ValueError(f"document frequencies must lie in [0, N={n_docs}]; got [{df.min():.0f}, {df.max():.0f}]")
    w = np.ones(df.shape, dtype=np.float64)
    if weighting == "none":
        return w.astype(np.float32)
    seen = df > 0
    w[seen] = np.log(n_docs / df[seen])
    if weighting == "sqrt_idf":
        w[seen] = np.sqrt(w[seen])
    return w.astype(np.float32)


def weight_queries(q_ids: list[np.ndarray], q_ws: list[np.ndarray], weights: np.ndarray
                   ) -> list[np.ndarray]:
    """Each query's weights times the term weights: ``q_t · w_t`` (float32; see the module docstring for why the
    query side)."""
    return [np.asarray(w, np.float32) * weights[np.asarray(t, np.int64)] for t, w in zip(q_ids, q_ws, strict=True)]


def postings_df(index_dir: str | os.PathLike) -> tuple[np.ndarray, int]:
    """``(N_t (|V|,) int64, N)`` from an index folder: posting-list lengths and ``stats.json``'s ``n_docs``."""
    index_dir = Path(index_dir)
    offsets = np.load(index_dir / "offsets.npy")
    n_docs = int(json.loads((index_dir / "stats.json").read_text())["n_docs"])
    return np.diff(offsets).astype(np.int64), n_docs


def token_df(tokenizer, texts, vocab_size: int, batch_size: int = 512) -> tuple[np.ndarray, int]:
    """``(N_t (|V|,) int64, N)``: documents whose untruncated tokenization contains each token, special tokens
    not counted; N = the number of texts."""
    df = np.zeros(vocab_size, dtype=np.int64)
    special = set(tokenizer.all_special_ids)
    n = 0
    batch: list[str] = []

    def flush() -> None:
        for ids in tokenizer(batch, add_special_tokens=False, truncation=False)["input_ids"]:
            u = np.fromiter((i for i in set(ids) if i not in special), dtype=np.int64)
            if u.size and u.max() >= vocab_size:
                raise ValueError(f"tokenizer emits id {u.max()} >= |V| = {vocab_size}")
            df[u] += 1
        batch.clear()

    for text in texts:
        batch.append(text)
        n += 1
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    return df, n


def collection_stats(index_dir: str | os.PathLike, source: Literal["tokens", "postings"], tokenizer=None,
                     texts: Callable[[], Iterable[str]] | None = None, corpus: str = "",
                     record_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, int]:
    """N_t and N of the collection an index holds, and their record (``term_stats.json`` + ``term_df.npy``)
    written to ``record_dir`` (default the index folder; a published store version is left untouched by passing
    another folder). A record already there for the same source and N is reused.

    ``source="tokens"`` tokenizes ``texts()`` (the indexed documents' text, in any order; ``corpus`` names them
    in the record) with ``tokenizer``.

    Raises:
        ValueError: the corpus holds a different number of documents than the index (they would not describe
            the same collection), or ``source`` is unknown (names ``index.idf_source``).
    """
    index_dir = Path(index_dir)
    n_index = int(json.loads((index_dir / "stats.json").read_text())["n_docs"])
    vocab_size = int(json.loads((index_dir / "stats.json").read_text())["vocab_size"])
    rec_dir = Path(record_dir) if record_dir is not None else index_dir
    meta_path = rec_dir / STATS_FILE
    if meta_path.is_file() and (rec_dir / DF_FILE).is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("source") == source and meta.get("n_docs") == n_index and meta.get("corpus") == corpus:
            return np.load(rec_dir / DF_FILE), n_index
    if source == "postings":
        df, n = postings_df(index_dir)
    elif source == "tokens":
        df, n = token_df(tokenizer, texts(), vocab_size)
        if n != n_index:
            raise ValueError(f"index.idf_source=tokens: the corpus {corpus} has {n} documents but the index "
                             f"{index_dir} holds {n_index}: the statistics would describe another collection")
    else:
        raise ValueError(f"index.idf_source: unknown source {source!r}; one of tokens, postings")
    rec_dir.mkdir(parents=True, exist_ok=True)
    np.save(rec_dir / DF_FILE, df)
    meta_path.write_text(json.dumps({"source": source, "n_docs": n, "corpus": corpus,
                                     "n_terms": int(np.count_nonzero(df)),
                                     "equation": "idf_t = log(N / N_t), 1 where N_t = 0 (CAI Eq. 6)"}, indent=2))
    log.info("term statistics (%s): N = %d, %d terms with N_t > 0", source, n, int(np.count_nonzero(df)))
    return df, n
