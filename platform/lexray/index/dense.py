"""Dense retrieval over dense shards: exact search (blocked matmul, running top-k) and an ANN option via faiss.

Exact: the (N, d) document matrix is scored against a query block in document blocks of ``block`` rows; each
block's top-k (``np.argpartition``) is merged into the running top-k of every query, so memory is
O(queries × (block + k)) whatever N, and the result equals a full sort of ``Q · Dᵀ`` (ties broken by document
order). Scores are inner products; cosine models store L2-normalised vectors (:mod:`lexray.models.dense`), so
the inner product *is* the cosine (LexSemBridge, arXiv:2508.17858, Eq. 2).

ANN: faiss (``faiss-cpu``, a library rather than our code) HNSW over inner product; :func:`recall_at_k` against
the exact top-k is reported beside its metrics. faiss is optional: without it, asking for it raises ImportError
naming the requirement.
"""

from __future__ import annotations

import numpy as np

from lexray.index.search import run_from_topk
from lexray.index.seismic import recall_at_k

__all__ = ["DenseExactSearcher", "FaissSearcher", "recall_at_k", "run_from_topk"]

FAISS_REQUIREMENT = "faiss-cpu>=1.8"


class DenseExactSearcher:
    """Exact inner-product top-k over a (N, d) float32 matrix.

    Args:
        vectors: (N, d) document vectors (float32 or float16; computed in float32). doc_ids: N ids.
        block: documents per scoring block.
    """

    def __init__(self, vectors: np.ndarray, doc_ids: list[str], block: int = 65536):
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.doc_ids = np.asarray(list(doc_ids), dtype=object)
        self.block = int(block)
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.doc_ids):
            raise ValueError(f"vectors {self.vectors.shape} and {len(self.doc_ids)} doc ids disagree")

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k of every query: ``(scores (Q, k') float32, doc indexes (Q, k') int64)``, k' = min(k, N), scores
        descending, ties by ascending document index.

        Raises:
            ValueError: query dimension differs from the documents'.
        """
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if q.ndim != 2 or q.shape[1] != self.vectors.shape[1]:
            raise ValueError(f"queries have shape {q.shape}, documents have d={self.vectors.shape[1]}")
        n = self.vectors.shape[0]
        k = min(k, n)
        best_s = np.full((q.shape[0], 0), -np.inf, np.float32)
        best_i = np.zeros((q.shape[0], 0), np.int64)
        for s in range(0, n, self.block):
            sc = q @ self.vectors[s:s + self.block].T
            kk = min(k, sc.shape[1])
            part = np.argpartition(-sc, kk - 1, axis=1)[:, :kk] if kk < sc.shape[1] else \
                np.broadcast_to(np.arange(sc.shape[1]), sc.shape)
            cand_s = np.concatenate([best_s, np.take_along_axis(sc, part, 1)], 1)
            cand_i = np.concatenate([best_i, part + s], 1)
            order = np.lexsort((cand_i, -cand_s), axis=1)[:, :k]  # score desc, then doc index asc
            best_s, best_i = np.take_along_axis(cand_s, order, 1), np.take_along_axis(cand_i, order, 1)
        return best_s, best_i

    def search_run(self, qids: list[str], queries: np.ndarray, k: int) -> dict[str, dict[str, float]]:
        """A run ``{qid: {doc_id: score}}`` of the top-k."""
        return run_from_topk(qids, *self.search(queries, k), self.doc_ids)


class FaissSearcher:
    """faiss HNSW (inner product) over the same vectors: approximate top-k.

    Raises:
        ImportError: faiss is not installed (names the requirement ``faiss-cpu``).
    """

    def __init__(self, vectors: np.ndarray, doc_ids: list[str], m: int = 32, ef_search: int = 128):
        try:
            import faiss
        except ImportError:
            raise ImportError(f"eval.dense_ann=faiss needs faiss: pip install '{FAISS_REQUIREMENT}'") from None
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        self.index = faiss.IndexHNSWFlat(x.shape[1], m, faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efSearch = ef_search
        self.index.add(x)
        self.doc_ids = np.asarray(list(doc_ids), dtype=object)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        s, i = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return s, i.astype(np.int64)
