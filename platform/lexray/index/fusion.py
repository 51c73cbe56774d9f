"""Hybrid retrieval: fuse a sparse run with a BM25 run, through ranx (the one search-time fusion, used by
``lexray evaluate --hybrid bm25`` and meant for ``lexray search``).

The paper's fusion (CAI, Iida & Okazaki, arXiv:2211.03988, §3.3, Eq. 8-9): ``S_H(Q, D) = S_BM25(Q, D) +
S_SPL(Q, D)``. Eq. 8 does not say which documents are scored; CAI's public code (meshidenn/CAI
``search/search_splade_bm25.py``) takes the union of both top-k lists (k = 100 there) and a document missing
from one list gets 0 from it (a ``defaultdict(float)``). That is ``method: sum``, ranx's ``wsum`` without
normalization, which also treats a missing document as 0.

Methods (``hybrid.method``), α = ``hybrid.weight`` (the sparse run's share, default 0.5):

* ``sum``: ``(1-α)·BM25 + α·sparse`` on raw scores; α = 0.5 ranks exactly as Eq. 8 (scores are half of it).
* ``minmax``: ranx ``min-max`` normalization of each run per query, then the same weighted sum.
* ``zscore``: ranx ``zmuv`` normalization (zero mean, unit variance per query), then the weighted sum. A document
  missing from one list gets 0 there, i.e. that list's *mean*, not its minimum (ranx's convention).
* ``rrf``: ranx ``rrf`` (Cormack et al. 2009), Σ 1/(k + rank), ``hybrid.rrf_k`` = 60; unweighted (ranx's
  RRF takes no weights, so ``hybrid.weight`` is refused with it).

Every fused list covers the union of the inputs' lists; each input is cut to ``depth`` first. Queries missing
from one run take an empty list there (ranx requires equal query sets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Method = Literal["sum", "minmax", "zscore", "rrf"]
METHODS = ("sum", "minmax", "zscore", "rrf")
_NORM = {"sum": None, "minmax": "min-max", "zscore": "zmuv"}
RunDict = dict[str, dict[str, float]]

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
    from ranx import Run, fuse

    if method not in METHODS:
        raise ValueError(f"hybrid.method: unknown method {method!r}; one of {', '.join(METHODS)}")
    if method == "rrf" and weight is not None:
        raise ValueError("hybrid.weight: ranx's rrf is unweighted; leave hybrid.weight unset with method rrf")
    alpha = 0.5 if weight is None else float(weight)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"hybrid.weight must lie in [0, 1], got {alpha}")
    qids = sorted(set(sparse) | set(bm25))
    a, b = _cut(sparse, qids, depth), _cut(bm25, qids, depth)
    nonempty = [q for q in qids if a[q] or b[q]]
    out: RunDict = {q: {} for q in qids}
    if not nonempty:
        return out
    # ranx's numba kernels cannot hold an empty inner dict: a query empty in one run gets a placeholder
    # document that scores nothing and is removed after fusion.
    pad = "\x00lexray-empty"
    runs = []
    for r in (a, b):
        runs.append(Run({q: (r[q] or {pad: 0.0}) for q in nonempty}))
    if method == "rrf":
        fused = fuse(runs, norm=None, method="rrf", params={"k": int(rrf_k)})
    else:
        fused = fuse(runs, norm=_NORM[method], method="wsum", params={"weights": [alpha, 1.0 - alpha]})
    for q, hits in fused.to_dict().items():
        ranked = sorted(((d, float(s)) for d, s in hits.items() if d != pad), key=lambda kv: (-kv[1], kv[0]))
        out[q] = dict(ranked if k is None else ranked[:k])
    return out
