"""The Python search API: open an index once, then ask it queries as text or as sparse vectors.

    import lexray
    index = lexray.open_index("outputs/laconic-smollm2-cpu")      # or an evaluate --out folder, a store, an index
    for hit in index.search("what causes obesity?", k=5):
        print(hit.rank, hit.doc_id, round(hit.score, 2), hit.title)
    hits = index.search(["first query", "second query"], k=10)      # a batch: one list of hits per query
    enc = lexray.load_encoder("../shared/models/splade-tiny")      # a SparseEncoder
    ids, ws = enc.encode_sparse(["a query"], "query")
    hits = index.search_vectors(ids[0], ws[0], k=10)

Why it exists: evaluation already encodes queries (:mod:`lexray.models`) and searches exactly
(:class:`lexray.index.search.ExactSearcher`), but answers with row indexes. This module joins the pieces a user
expects: the encoder recorded with the index (:mod:`lexray.search.locate`), document ids, titles and texts
(:mod:`lexray.search.corpus`) and, on request, the matching terms of each hit (``explain``).

Scores: the SPLADE dot product ``s(q, d) = Σ_t q_t · w_{t,d}`` over the float weights of the index (arXiv:2107.05720
§3), exactly as ``lexray evaluate`` ranks with the exact backend; ``lucene`` returns the quantized impact scores
of the Lucene index (integers), ``seismic`` approximate scores (pyseismic-lsr).

Memory and threads: the postings are memory-mapped read-only by ``ExactSearcher`` (never copied), and the corpus
is read through a memory map as well, so processes searching the same index share their pages through the page
cache. One :class:`Index` may be searched from several threads: the searcher only reads its arrays; the encoder is
used under a lock (its forward pass already uses every core); the numba kernel runs concurrently when numba's
threading layer is thread-safe (``omp``, ``tbb``) and under a lock with ``workqueue``; the lazily built Seismic
and Lucene searchers are built once under a lock and searched under it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

import numpy as np

from lexray.search.locate import IndexLocation, locate_index

if TYPE_CHECKING:
    from lexray.config import ModelConfig
    from lexray.models import SparseEncoder

__all__ = ["Hit", "Index", "MatchedTerm", "load_encoder", "open_index"]

SearchBackend = Literal["exact", "lucene", "seismic"]


@dataclass(frozen=True)
class MatchedTerm:
    """One query term a hit's document also holds: ``contribution = query_weight · doc_weight`` (float weights
    of the index; their sum over the matched terms is the exact score). ``token`` is the vocabulary entry
    (``Ġbone`` in a byte-level BPE vocabulary), ``text`` what it reads as (``bone``; :func:`readable_tokens`)."""

    term_id: int
    token: str
    query_weight: float
    doc_weight: float
    text: str = ""

    @property
    def contribution(self) -> float:
        return self.query_weight * self.doc_weight


@dataclass(frozen=True)
class Hit:
    """One retrieved document: 1-based ``rank``, ``doc_id``, ``score``, its ``title`` and ``text`` from the corpus
    (None when the index records no corpus, or the corpus lacks the document), its row ``doc_idx`` in the index,
    and with ``explain=True`` the matched terms, largest contribution first."""

    rank: int
    doc_id: str
    score: float
    title: str | None
    text: str | None
    doc_idx: int
    terms: tuple[MatchedTerm, ...] | None = None


def readable_tokens(tokenizer, tokens: Sequence[str]) -> list[str]:
    """Each vocabulary entry as it reads: ``tokenizer.convert_tokens_to_string([token])``, stripped (byte-level
    BPE: ``Ġbone`` → ``bone``, ``ĠâĢĶ`` → ``—``; WordPiece: ``##ing`` stays). The entry itself where that shows
    nothing printable (a lone space, a control byte, half of a multi-byte character) or the tokenizer cannot
    decode one token alone."""
    out = []
    for t in tokens:
        try:
            text = tokenizer.convert_tokens_to_string([t]).strip()
        except Exception:  # noqa: BLE001 - any tokenizer's failure on a lone token: show the entry
            text = ""
        out.append(text if text and text.isprintable() and "\ufffd" not in text else t)
    return out


def load_encoder(model: str | os.PathLike | ModelConfig, **settings) -> SparseEncoder:
    """Load a sparse encoder (:class:`lexray.models.SparseEncoder`) to encode text into sparse vectors.

    Args:
        model: a local folder, hub id, ``.gguf`` file or ``pkg:<module>/<file>`` (``model.name_or_path``), or a
            whole :class:`lexray.config.ModelConfig` (e.g. the one an output folder records).
        settings: other ``model.*`` keys for a path (e.g. ``num_layers=2``, ``query_max_length=64``).

    Returns:
        the encoder in eval mode; ``encoder.encode_sparse(texts, "query")`` gives ``(term ids int32, weights
        float32)`` per text.

    Raises:
        ConfigError / pydantic ValidationError: a bad setting; FileNotFoundError / OSError: the model is missing.
    """
    from lexray.config import ModelConfig
    from lexray.models import load_encoder as _load

    cfg = model if isinstance(model, ModelConfig) else ModelConfig(name_or_path=str(model), **settings)
    enc = _load(cfg.require_source())
    enc.eval()
    return enc


def _one_vector(term_ids) -> bool:
    """A single query's term ids (a 1-D array or a list of ints), not a batch of them."""
    if isinstance(term_ids, np.ndarray):
        return term_ids.ndim == 1 and term_ids.dtype != object
    return len(term_ids) == 0 or np.isscalar(term_ids[0])


def _thread_safe_numba() -> bool:
    """Whether numba's threading layer lets several threads run parallel kernels at once (``workqueue`` aborts
    the process when two do); False before any parallel kernel ran (the layer is chosen then)."""
    try:
        import numba

        return numba.threading_layer() in ("omp", "tbb")
    except Exception:  # noqa: BLE001 - no numba, or no kernel launched yet
        return False


class Index:
    """An opened index: search by text or by sparse vector, with document ids, scores and fields.

    Build it with :func:`open_index`. Attributes: ``location`` (:class:`~lexray.search.locate.IndexLocation`),
    ``n_docs``, ``vocab_size``, ``searcher`` (the :class:`~lexray.index.search.ExactSearcher`).
    """

    def __init__(self, location: IndexLocation, model: str | os.PathLike | ModelConfig | None = None,
                 dataset: str | os.PathLike | None = None, query_batch_size: int | None = None,
                 verify: bool = True, seismic_cache: str | os.PathLike | None = None):
        from lexray.index.search import ExactSearcher

        self.location = location
        self.seismic_cache = None if seismic_cache is None else Path(seismic_cache)
        if verify:
            from lexray.index.verify import verify_on_open

            verify_on_open(location.index_dir)
        self.searcher = ExactSearcher(location.index_dir)
        self.n_docs, self.vocab_size = self.searcher.n_docs, self.searcher.vocab_size
        self.doc_ids = self.searcher.doc_ids  # loaded now: no lazy first load racing between threads
        self._model = model if model is not None else location.model
        cfg = location.config
        self.query_batch_size = query_batch_size or (cfg.eval.query_batch_size if cfg is not None else 64)
        self._dataset = str(dataset) if dataset is not None else location.dataset
        self._fields = None
        self._encoder: SparseEncoder | None = None
        self._doc_idx: dict[str, int] | None = None
        self._lock = threading.Lock()  # encoder and lazily built searchers
        self._kernel_lock = threading.Lock()  # the numba kernel under a non-thread-safe threading layer
        self._others: dict[str, object] = {}

    # ------------------------------------------------------------------ parts loaded on first use
    @property
    def encoder(self) -> SparseEncoder:
        """The query encoder: the model given to :func:`open_index`, else the one recorded with the index.

        Raises:
            ValueError: none was given and the index records none (a store or index made before it was recorded).
        """
        with self._lock:
            if self._encoder is None:
                if self._model is None:
                    raise ValueError(f"{self.location.folder} records no model: give one (open_index(path, "
                                     f"model=...) or lexray search --model)")
                self._encoder = load_encoder(self._model)
                if self._encoder.vocab_size != self.vocab_size:
                    raise ValueError(f"model |V| = {self._encoder.vocab_size} but the index has |V| = "
                                     f"{self.vocab_size}: not the model that made this index")
            return self._encoder

    @property
    def fields(self):
        """The :class:`~lexray.search.corpus.CorpusFields` of the recorded corpus (None when none is recorded)."""
        if self._fields is None and self._dataset is not None:
            from lexray.search.corpus import CorpusFields

            with self._lock:
                if self._fields is None:
                    self._fields = CorpusFields(self._dataset, self.doc_ids)
        return self._fields

    def tokens(self, term_ids: Sequence[int]) -> list[str]:
        """Token strings of term ids (the encoder's tokenizer; ``"#<id>"`` when no model is known)."""
        if self._model is None and self._encoder is None:
            return [f"#{int(t)}" for t in term_ids]
        return list(self.encoder.tokenizer.convert_ids_to_tokens([int(t) for t in term_ids]))

    # ------------------------------------------------------------------ search
    def encode(self, queries: Sequence[str]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Queries → sparse vectors ``(term ids int32, weights float32)`` per query, with the index's encoder
        (batches of ``query_batch_size``, as evaluate encodes them)."""
        enc = self.encoder
        with self._lock:
            return enc.encode_sparse(list(queries), "query", batch_size=self.query_batch_size)

    @overload
    def search(self, query: str, k: int = 10, backend: SearchBackend = "exact", explain: bool = False
               ) -> list[Hit]: ...

    @overload
    def search(self, query: Sequence[str], k: int = 10, backend: SearchBackend = "exact", explain: bool = False
               ) -> list[list[Hit]]: ...

    def search(self, query, k=10, backend="exact", explain=False):
        """Top-``k`` documents of a query (a ``str`` → ``list[Hit]``) or of a batch (``list[str]`` → one list per
        query, in order). The batch is encoded once and searched in one call of the searcher.

        Args:
            k: hits per query (fewer when fewer documents share a term with the query; none for a query with no
                term, such as an empty one).
            backend: ``"exact"`` (default; evaluate's ranking), ``"lucene"`` (the Lucene impact index evaluate
                built with ``--backend lucene|both``) or ``"seismic"`` (approximate, built in memory on first use).
            explain: fill :attr:`Hit.terms`.

        Raises:
            ValueError: ``k < 1``, an unknown backend, no model known; FileNotFoundError: no Lucene index.
        """
        single = isinstance(query, str)
        texts = [query] if single else list(query)
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("query must be a str or a sequence of str")
        ids, ws = self.encode(texts) if texts else ([], [])
        hits = self._search(ids, ws, k, backend, explain)
        return hits[0] if single else hits

    def search_vectors(self, term_ids, weights, k: int = 10, backend: SearchBackend = "exact",
                       explain: bool = False):
        """Top-``k`` for precomputed sparse vectors: one query (1-D ``term_ids`` and ``weights`` → ``list[Hit]``)
        or a batch (sequences of 1-D arrays → ``list[list[Hit]]``). Term ids index the model's vocabulary
        ``[0, |V|)``; repeated ids are summed. No model is loaded unless ``explain`` needs token strings.

        Raises:
            ValueError: lengths differ, a term id outside ``[0, |V|)``, a non-finite weight, ``k < 1``.
        """
        single = _one_vector(term_ids)
        ids = [np.asarray(term_ids)] if single else [np.asarray(t) for t in term_ids]
        ws = [np.asarray(weights, np.float32)] if single else [np.asarray(w, np.float32) for w in weights]
        hits = self._search(ids, ws, k, backend, explain)
        return hits[0] if single else hits

    def _search(self, ids: list[np.ndarray], ws: list[np.ndarray], k: int, backend: str, explain: bool
                ) -> list[list[Hit]]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if backend == "exact":
            scores, idx = self._exact(ids, ws, k)
        elif backend == "seismic":
            sei = self._other("seismic")
            with self._lock:
                scores, idx = sei.search(ids, ws, k=k)
        elif backend == "lucene":
            scores, idx = self._lucene(ids, ws, k)
        else:
            raise ValueError(f"backend must be 'exact', 'lucene' or 'seismic', got {backend!r}")
        return [self._hits(scores[r], idx[r], ids[r], ws[r], explain) for r in range(len(ids))]

    def _exact(self, ids, ws, k):
        if _thread_safe_numba() or self.searcher.backend != "numba":
            return self.searcher.search(ids, ws, k=k)
        with self._kernel_lock:  # also the first call, which picks the threading layer
            return self.searcher.search(ids, ws, k=k)

    def prepare(self, backend: SearchBackend = "exact"):
        """Load now what the first search would load: the encoder (when a model is known), the corpus offsets and
        the backend's searcher (the JVM and Lucene index, or the Seismic index); returns that searcher
        (:class:`lexray.index.search.ExactSearcher` for ``"exact"``)."""
        if self._model is not None:
            self.encoder  # noqa: B018 - loads it
        self.fields  # noqa: B018
        return self.searcher if backend == "exact" else self._other(backend)

    def _other(self, name: str):
        with self._lock:
            if name not in self._others:
                if name == "seismic":
                    from lexray.index.seismic import SeismicSearcher

                    cfg = self.location.config
                    sc = cfg.eval.seismic.model_dump() if cfg is not None else {}
                    self._others[name] = SeismicSearcher(self.location.index_dir, cache=self.seismic_cache, **{
                        k: sc[k] for k in ("n_postings", "centroid_fraction", "summary_energy", "query_cut",
                                           "heap_factor") if k in sc}, **({"n_threads": sc["threads"]}
                                                                        if "threads" in sc else {}))
                else:
                    if self.location.lucene_dir is None:
                        raise FileNotFoundError(f"{self.location.folder}: no Lucene impact index (lucene/); "
                                                f"make one with lexray evaluate --backend both")
                    from lexray.index.lucene import ImpactSearcher

                    self._others[name] = ImpactSearcher(self.location.lucene_dir)
            return self._others[name]

    def _lucene(self, ids, ws, k):
        lucene = self._other("lucene")
        cfg = self.location.config
        bits = cfg.index.quant_bits if cfg is not None else 8
        qids = [str(i) for i in range(len(ids))]
        with self._lock:
            run = lucene.search(qids, ids, ws, k=k, bits=bits)
        if self._doc_idx is None:
            self._doc_idx = {d: i for i, d in enumerate(self.doc_ids)}
        scores = np.full((len(ids), k), -np.inf, np.float32)
        idx = np.full((len(ids), k), -1, np.int64)
        for r, q in enumerate(qids):
            ranked = sorted(run.get(q, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:k]
            for j, (d, s) in enumerate(ranked):
                scores[r, j], idx[r, j] = s, self._doc_idx.get(d, -1)
        return scores, idx

    def _hits(self, scores: np.ndarray, idx: np.ndarray, q_ids: np.ndarray, q_ws: np.ndarray, explain: bool
              ) -> list[Hit]:
        fields = self.fields
        out = []
        for r in range(len(idx)):
            d = int(idx[r])
            if d < 0:
                break
            f = fields.get(d) if fields is not None else None
            out.append(Hit(rank=r + 1, doc_id=str(self.doc_ids[d]), score=float(scores[r]),
                           title=f["title"] if f else None, text=f["text"] if f else None, doc_idx=d,
                           terms=self.explain(q_ids, q_ws, d) if explain else None))
        return out

    def explain(self, term_ids: np.ndarray, weights: np.ndarray, doc_idx: int) -> tuple[MatchedTerm, ...]:
        """The query terms document ``doc_idx`` holds, with both weights (float, from the postings), largest
        contribution first. One binary search per query term in its doc_idx-ascending posting list."""
        from lexray.index.search import prepare_queries

        _, terms, qw = prepare_queries([np.asarray(term_ids)], [np.asarray(weights, np.float32)], self.vocab_size)
        s = self.searcher
        found = []
        for t, w in zip(terms.tolist(), qw.tolist(), strict=True):
            a, b = int(s.offsets[t]), int(s.offsets[t + 1])
            j = a + int(np.searchsorted(s.postings_doc[a:b], doc_idx))
            if j < b and int(s.postings_doc[j]) == doc_idx:
                found.append((t, w, float(s.postings_value[j])))
        toks = self.tokens([t for t, _, _ in found])
        no_model = self._model is None and self._encoder is None  # tokens are "#<id>": nothing to decode
        texts = toks if no_model else readable_tokens(self.encoder.tokenizer, toks)
        terms_out = [MatchedTerm(t, tok, w, dw, text)
                     for (t, w, dw), tok, text in zip(found, toks, texts, strict=True)]
        return tuple(sorted(terms_out, key=lambda m: -m.contribution))

    def close(self) -> None:
        """Release the corpus map and any Lucene searcher (the postings maps go with the object)."""
        if self._fields is not None:
            self._fields.close()
        lucene = self._others.pop("lucene", None)
        if lucene is not None:
            lucene.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_index(path: str | os.PathLike, model: str | os.PathLike | ModelConfig | None = None,
               dataset: str | os.PathLike | None = None, query_batch_size: int | None = None,
               verify: bool = True, seismic_cache: str | os.PathLike | None = None) -> Index:
    """Open an index for searching (:class:`Index`).

    Args:
        path: an evaluated output folder (``lexray evaluate --out``, a training job's output such as
            ``outputs/laconic-smollm2-cpu``: its ``eval/trained``), a collection store (``current`` resolved once)
            or an index folder (:mod:`lexray.search.locate`).
        model: the query encoder (path or :class:`~lexray.config.ModelConfig`); default: the recorded one, loaded
            on the first text query.
        dataset: the BEIR folder for titles and texts; default: the recorded corpus.
        query_batch_size: queries per forward pass; default: the recorded ``eval.query_batch_size`` (so a batch
            gives bit-identical query vectors to evaluate's), else 64.
        verify: check the index files against the sha256 recorded at build (:func:`lexray.index.verify
            .verify_on_open`; one sequential read of the index: docs/operations.md gives the measured cost);
            False skips it.
        seismic_cache: a folder where the ``"seismic"`` backend keeps the index it builds and loads it from next
            time (:class:`lexray.index.seismic.SeismicSearcher`'s ``cache``): 112 s to build against 3 s to load
            on the default LACONIC job's index, for 781 MB of disk (19 times the index's 41 MB). None (default): built
            in memory, kept nowhere.

    Raises:
        FileNotFoundError / ValueError: see :func:`lexray.search.locate.locate_index`.
        IndexIntegrityError: ``verify`` and an index file differs from its recorded checksum (named).
    """
    return Index(locate_index(Path(path)), model=model, dataset=dataset, query_batch_size=query_batch_size,
                 verify=verify, seismic_cache=seismic_cache)
