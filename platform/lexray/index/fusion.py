"""Hybrid retrieval: fuse a sparse run with a BM25 run (the one search-time fusion, used by
``lexray evaluate --hybrid bm25`` and meant for ``lexray search``).

The paper's fusion (CAI, Iida & Okazaki, arXiv:2211.03988, §3.3, Eq. 8-9): ``S_H(Q, D) = S_BM25(Q, D) +
S_SPL(Q, D)``. Eq. 8 does not say which documents are scored; CAI's public code (meshidenn/CAI
``search/search_splade_bm25.py``) takes the union of both top-k lists (k = 100 there) and a document missing
from one list gets 0 from it (a ``defaultdict(float)``). That is ``method: sum``.

Methods (``hybrid.method``), α = ``hybrid.weight`` (the sparse run's share, default 0.5); the formulas are ranx's
(``ranx.fuse``: ``wsum`` over ``min-max`` / ``zmuv`` normalization, ``rrf``), the names ranx's:

* ``sum``: ``(1-α)·BM25 + α·sparse`` on raw scores (ranx ``wsum``, no normalization); α = 0.5 ranks exactly as
  Eq. 8 (scores are half of it).
* ``minmax``: ``(s - min) / max(max - min, 1e-9)`` of each run per query (ranx ``min-max``), then the same
  weighted sum.
* ``zscore``: ``(s - mean) / max(std, 1e-9)`` per query, population std (ranx ``zmuv``), then the weighted sum. A
  document missing from one list gets 0 there, i.e. that list's *mean*, not its minimum (ranx's convention).
* ``rrf``: Σ 1/(k + rank) (Cormack et al. 2009), ``hybrid.rrf_k`` = 60, rank 1 = the best score, ties ranked
  by document id; unweighted, as ranx's (``hybrid.weight`` is refused with it).

Every fused list covers the union of the inputs' lists; each input is cut to ``depth`` first (ties by document
id); a query missing from one run, or empty there, fuses with an empty list. The fused list is ordered by score,
ties by document id.

Why not ``ranx.fuse`` itself (used until 2026-11-26): its numba kernels compile on first use in every process
without a writable cache, and again for each new length of document id (ranx types ids as ``<U{max_len}``
arrays): 47.9 s before a first fused query on this project's 2-core machine, 67 s for all four methods, longer
than the search. The results are the same (checked against ranx on 300 random queries with ties, empty lists and
queries missing from one run; docs/bugs-and-fixes.md), up to the order of equal scores: ranx breaks RRF ties by
its unstable sort.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np

Method = Literal["sum", "minmax", "zscore", "rrf"]
METHODS = ("sum", "minmax", "zscore", "rrf")
RunDict = dict[str, dict[str, float]]
_EPS = 1e-9  # ranx's floor on a normalization's denominator (one document, or equal scores)


def _minmax(hits: dict[str, float]) -> dict[str, float]:
    """(s - min) / max(max - min, 1e-9) over one query's list (ranx ``min-max``)."""
    if not hits:
        return {}
    lo, hi = min(hits.values()), max(hits.values())
    den = max(hi - lo, _EPS)
    return {d: (s - lo) / den for d, s in hits.items()}


def _zmuv(hits: dict[str, float]) -> dict[str, float]:
    """(s - mean) / max(std, 1e-9) over one query's list, population std (ranx ``zmuv``, ``np.std``)."""
    if not hits:
        return {}
    v = np.fromiter(hits.values(), dtype=np.float64, count=len(hits))
    mean, den = float(v.mean()), max(float(v.std()), _EPS)
    return {d: (s - mean) / den for d, s in hits.items()}


_NORMS = {"sum": dict, "minmax": _minmax, "zscore": _zmuv}

__all__ = ["METHODS", "fuse_runs", "hybrid_name"]


def hybrid_name(sparse: str, method: str, weight: float | None) -> str:
    """The retriever name of a fused run: ``"<sparse> + bm25 hybrid (<method>[, α=<weight>])"``."""
    w = "" if method == "rrf" else f", α={0.5 if weight is None else weight:g}"
    return f"{sparse} + bm25 hybrid ({method}{w})"


def _cut(run: Mapping[str, Mapping[str, float]], qids: list[str], depth: int | None) -> RunDict:
    out: RunDict = {}
    for q in qids:
        hits = sorted((run.get(q) or {}).items(), key=lambda kv: (-kv[1], kv[0]))
        out[q] = {d: float(s) for d, s in (hits if depth is None else hits[:depth])}
    return out


def fuse_runs(sparse: Mapping[str, Mapping[str, float]], bm25: Mapping[str, Mapping[str, float]],
              method: Method = "sum", weight: float | None = None, depth: int | None = None,
              rrf_k: int = 60, k: int | None = None) -> RunDict:
    """Fuse two runs ``{qid: {doc_id: score}}`` (see the module docstring).

    Args:
        sparse, bm25: the runs; queries of either are kept. method: ``sum | minmax | zscore | rrf``.
        weight: α in [0, 1], the sparse run's share (None = 0.5); must be None for ``rrf``.
        depth: cut each input to its top ``depth`` before fusing (None = all). k: cut the fused list.

    Returns:
        the fused run, every query of either input (an empty dict where both lists are empty).

    Raises:
        ValueError: unknown method (names ``hybrid.method``), α outside [0, 1] or given with ``rrf``
            (``hybrid.weight``).
    """
    if method not in METHODS:
        raise ValueError(f"hybrid.method: unknown method {method!r}; one of {', '.join(METHODS)}")
    if method == "rrf" and weight is not None:
        raise ValueError("hybrid.weight: rrf is unweighted (as ranx's); leave hybrid.weight unset with method rrf")
    alpha = 0.5 if weight is None else float(weight)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"hybrid.weight must lie in [0, 1], got {alpha}")
    qids = sorted(set(sparse) | set(bm25))
    a, b = _cut(sparse, qids, depth), _cut(bm25, qids, depth)
    out: RunDict = {}
    if method == "rrf":  # a, b are in rank order (_cut): rank 1 first; unweighted
        norm, wa, wb = (lambda hits: {d: 1.0 / (rrf_k + i + 1) for i, d in enumerate(hits)}), 1.0, 1.0
    else:
        norm, wa, wb = _NORMS[method], alpha, 1.0 - alpha
    for q in qids:
        x, y = norm(a[q]), norm(b[q])
        fused = {d: wa * x.get(d, 0.0) + wb * y.get(d, 0.0) for d in (*x, *(d for d in y if d not in x))}
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
        out[q] = dict(ranked if k is None else ranked[:k])
    return out
