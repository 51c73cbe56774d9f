"""Approximate top-k with Seismic (pyseismic-lsr), built from a lexray inverted index folder.

Seismic (Bruch, Nardini, Rulli, Venturini, "Efficient Inverted Indexes for Approximate Retrieval over Learned
Sparse Representations", SIGIR 2024, arXiv:2404.18812) keeps, per term, only the ``n_postings`` highest-weight postings, clusters
each list into blocks with a summary vector, and at query time scans blocks whose summary bound beats
``heap_factor`` × the current k-th score, using the ``query_cut`` highest-weight query terms. It is approximate:
lexray uses it as an opt-in backend (``eval.backend: seismic``) and always reports its recall@10 against the exact
top-10 of :class:`lexray.index.search.ExactSearcher` (same index, same queries).

We use the library as it is (no re-implementation): documents go in through
``SeismicDataset.add_documents_by_id`` (doc-major CSR with integer component ids, so term id ``t`` is the
component ``"t"``), and Seismic's document ids are lexray's ``doc_idx`` as strings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from lexray.console import native_stdout_to_stderr

__all__ = ["SeismicSearcher", "recall_at_k"]


def recall_at_k(exact_idx: np.ndarray, approx_idx: np.ndarray, k: int = 10) -> float:
    """Mean over queries of |approx top-k ∩ exact top-k| / |exact top-k| (rows of doc_idx, -1 = padding).

    Queries whose exact top-k is empty are skipped (nothing to recall)."""
    vals = []
    for e, a in zip(exact_idx, approx_idx, strict=True):
        e = set(int(x) for x in e[:k] if x >= 0)
        if e:
            vals.append(len(e & set(int(x) for x in a[:k] if x >= 0)) / len(e))
    return float(np.mean(vals)) if vals else 1.0


class SeismicSearcher:
    """Seismic index over a lexray index folder (``offsets.npy``, ``postings_doc.npy``, ``postings_weight.npy``).

    Args:
        index_dir: folder written by :func:`lexray.index.build.build_index`.
        n_postings, centroid_fraction, summary_energy: Seismic build parameters (library defaults).
        query_cut, heap_factor: Seismic search parameters (larger → slower, higher recall).
        n_threads: search / build threads (default: all cores).
        cache: a folder for built Seismic indexes (``lexray search --seismic-cache DIR``). The index is loaded
            from there when one was built from the same postings (the SHA-256 digests stats.json records), with
            the same build parameters and pyseismic version; otherwise it is built and saved there (written
            beside its name, then renamed). Why: the build takes minutes (112 s on the default LACONIC job's
            5,183 documents, 3 s to load) and a search command would pay it at every start. Opt-in, because the
            file is large: 781 MB there, 19 times the lexray index's 41 MB. None: build, keep nothing.

    Attributes:
        source: ``"built"`` or ``"cache"``; ``cache_file``: the cached file, when ``cache`` is given.

    Raises:
        ImportError: pyseismic-lsr is not installed. FileNotFoundError: not an index folder.
    """

    def __init__(self, index_dir: str | os.PathLike, n_postings: int = 3500, centroid_fraction: float = 0.1,
                 summary_energy: float = 0.4, query_cut: int = 20, heap_factor: float = 0.8,
                 n_threads: int | None = None, cache: str | os.PathLike | None = None):
        try:
            from seismic import SeismicDataset, SeismicIndex
        except ImportError as e:  # pragma: no cover - dependency is declared
            raise ImportError("the seismic backend needs pyseismic-lsr (pip install pyseismic-lsr==0.5.4)") from e
        import scipy.sparse as sp

        self.index_dir = Path(index_dir)
        stats_path = self.index_dir / "stats.json"
        if not stats_path.is_file():
            raise FileNotFoundError(f"{stats_path} not found: not a lexray index folder")
        stats = json.loads(stats_path.read_text())
        self.n_docs, self.vocab_size = int(stats["n_docs"]), int(stats["vocab_size"])
        self.query_cut, self.heap_factor = int(query_cut), float(heap_factor)
        self.n_threads = int(n_threads or os.cpu_count() or 1)
        self.build_params = {"n_postings": n_postings, "centroid_fraction": centroid_fraction,
                             "summary_energy": summary_energy}
        key = None if cache is None else self._cache_key(stats)
        self.cache_file = None if key is None else Path(cache) / f"{key}.index.seismic"
        if self.cache_file is not None and self.cache_file.is_file():
            with native_stdout_to_stderr():
                self.index, self.source = SeismicIndex.load(str(self.cache_file)), "cache"
            return
        off = np.load(self.index_dir / "offsets.npy")
        pdoc = np.load(self.index_dir / "postings_doc.npy", mmap_mode="r")
        pw = np.load(self.index_dir / "postings_weight.npy", mmap_mode="r")
        # term-major CSR (|V|, N) → doc-major CSR (N, |V|) with ascending term ids per row
        docs = sp.csr_matrix((np.asarray(pw), np.asarray(pdoc), off), shape=(self.vocab_size, self.n_docs)).T.tocsr()
        docs.sort_indices()
        ds = SeismicDataset()
        ds.add_documents_by_id([str(i) for i in range(self.n_docs)], docs.indices.astype(np.int64),
                               docs.data.astype(np.float32), docs.indptr.astype(np.int64))
        del docs
        with native_stdout_to_stderr():  # the library prints its build log to standard output
            self.index = SeismicIndex.build_from_dataset(
                ds, n_postings=n_postings, centroid_fraction=centroid_fraction, summary_energy=summary_energy,
                num_threads=self.n_threads)
        self.source = "built"
        if self.cache_file is not None:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_file.parent / f".{key}.tmp-{os.getpid()}"
            with native_stdout_to_stderr():
                self.index.save(str(tmp))  # writes tmp + ".index.seismic"
            os.replace(f"{tmp}.index.seismic", self.cache_file)

    def _cache_key(self, stats: dict) -> str | None:
        """SHA-256 over what the built index depends on: the postings' recorded digests and shape, the build
        parameters and pyseismic's version. None (with a warning: nothing to key a cache on) when stats.json
        records no digests, as in an index older than its checksums."""
        import hashlib
        from importlib.metadata import version

        files = stats.get("files_sha256") or {}
        postings = ("offsets.npy", "postings_doc.npy", "postings_weight.npy")  # what the build reads
        missing = [f for f in postings if f not in files]
        if missing:
            import logging

            logging.getLogger(__name__).warning(
                "%s: no SHA-256 recorded for %s: the Seismic index is built and not cached (rebuild the index with "
                "lexray index to cache it)", self.index_dir / "stats.json", ", ".join(missing))
            return None
        key = {"files": {f: files[f] for f in postings},
               "n_docs": self.n_docs, "vocab_size": self.vocab_size, "build": self.build_params,
               "pyseismic": version("pyseismic-lsr")}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]

    def search(self, q_ids: list[np.ndarray], q_weights: list[np.ndarray], k: int = 10,
               query_cut: int | None = None, heap_factor: float | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-``k``: ``(scores (Q, k) float32, doc_idx (Q, k) int64)``, padded with -inf / -1.

        Query terms with weight 0 are dropped; ``query_cut`` / ``heap_factor`` override the constructor's."""
        from seismic import get_seismic_string

        st = get_seismic_string()
        Q = len(q_ids)
        out_s = np.full((Q, k), -np.inf, np.float32)
        out_d = np.full((Q, k), -1, np.int64)
        comps, vals = [], []
        for t, w in zip(q_ids, q_weights, strict=True):
            w = np.asarray(w, np.float32)
            keep = w != 0
            comps.append(np.asarray(np.asarray(t)[keep], dtype=np.int64).astype(str).astype(st))
            vals.append(w[keep])
        if Q == 0:
            return out_s, out_d
        res = self.index.batch_search(np.array([str(i) for i in range(Q)], dtype=st), comps, vals, k,
                                      self.query_cut if query_cut is None else int(query_cut),
                                      self.heap_factor if heap_factor is None else float(heap_factor),
                                      num_threads=self.n_threads)
        # each row carries its query id: with several threads Seismic may return the queries in another order
        # (seen under load: results of query i landed in row i+1, recall@10 0.04)
        for rows in res:
            for r, (qid, score, doc) in enumerate(rows[:k]):
                i = int(qid)
                out_s[i, r] = score
                out_d[i, r] = int(doc)
        return out_s, out_d

    def search_run(self, query_ids: list[str], q_ids: list[np.ndarray], q_weights: list[np.ndarray],
                   doc_ids: np.ndarray, k: int = 1000) -> dict[str, dict[str, float]]:
        """Search and return a run ``{qid: {doc_id: score}}``; ``doc_ids[doc_idx]`` maps documents
        (:attr:`lexray.index.search.ExactSearcher.doc_ids` of the same index)."""
        from lexray.index.search import run_from_topk

        if len(query_ids) != len(q_ids):
            raise ValueError(f"{len(query_ids)} query ids but {len(q_ids)} query vectors")
        scores, idx = self.search(q_ids, q_weights, k=k)
        return run_from_topk(query_ids, scores, idx, doc_ids)
