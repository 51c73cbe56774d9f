"""Retrieval metrics (nDCG@k, MRR@k, R@k, P@k, MAP@k) through pytrec_eval, with BEIR's conventions made explicit.

Why a wrapper around pytrec_eval (trec_eval's C code) instead of our own formulas: the numbers must be comparable
with published BEIR / SPLADE / LACONIC tables. Three pitfalls are handled here:

1. **MRR@k**: trec_eval's ``recip_rank`` has no cut-off (``recip_rank.10`` is accepted and silently ignored), so
   the run is cut to its top ``k`` documents per query before ``recip_rank`` is computed.
2. **Ties**: trec_eval orders equal scores by document id *descending*, other tools differently. Here every
   query's ranking is fixed first – score descending, then document id ascending (string order) – and the run is
   re-scored with unique rank-based scores, so every metric sees the same ranking as :mod:`lexray.eval.runs`
   and the searchers.
3. **Missing queries**: pytrec_eval only reports queries present in both the run and the qrels. Following BEIR
   (which averages over the queries of the qrels split), a query that has qrels but no run entry scores 0 on
   every metric, and the mean is taken over *all* queries in ``qrels``. Run queries without qrels are ignored.

Relevance: graded integer scores; ``rel <= 0`` is not relevant (trec_eval's default ``relevance_level`` 1) for
recall / precision / MRR / MAP, while nDCG uses the graded gains (Järvelin & Kekäläinen 2002, trec_eval's
``ndcg_cut``: gain = rel, discount log2(rank + 1)).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pytrec_eval

Run = Mapping[str, Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]

DEFAULT_METRICS = ("nDCG@10", "MRR@10", "R@100", "R@1000")

__all__ = ["DEFAULT_METRICS", "MetricSpec", "parse_metric", "deterministic_run", "evaluate",
           "evaluate_per_query"]

_NAME_RE = re.compile(r"^\s*(ndcg|mrr|rr|r|recall|p|precision|map)\s*(?:@\s*(\d+))?\s*$", re.IGNORECASE)
_FAMILY = {"ndcg": "nDCG", "mrr": "MRR", "rr": "MRR", "r": "R", "recall": "R", "p": "P", "precision": "P",
           "map": "MAP"}


@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric name: ``family`` in {nDCG, MRR, R, P, MAP}; ``k`` the cut-off (None = whole ranking)."""

    name: str  # as the caller spelled it (the output key)
    family: str
    k: int | None

    @property
    def trec_measure(self) -> str:
        """The pytrec_eval measure requested (``ndcg_cut.10``, ``recall.100``, ``recip_rank`` ...)."""
        if self.family == "MRR":
            return "recip_rank"
        base = {"nDCG": ("ndcg", "ndcg_cut"), "R": ("recall", "recall"), "P": ("P", "P"),
                "MAP": ("map", "map_cut")}[self.family]
        if self.k is None:
            if self.family in ("R", "P"):
                raise ValueError(f"metric {self.name!r}: {self.family} needs a cut-off, e.g. {self.family}@100")
            return base[0]
        return f"{base[1]}.{self.k}"

    @property
    def trec_key(self) -> str:
        """The key pytrec_eval uses in its per-query output (``ndcg_cut_10``, ``recall_100`` ...)."""
        return self.trec_measure.replace(".", "_")


def parse_metric(name: str) -> MetricSpec:
    """Parse ``"nDCG@10"``, ``"MRR@10"``, ``"R@1000"`` / ``"Recall@100"``, ``"P@5"``, ``"MAP@100"``, ``"MAP"``.

    Case-insensitive. Raises ValueError naming the metric for anything else (or a cut-off < 1).
    """
    m = _NAME_RE.match(name)
    if not m:
        raise ValueError(f"unknown metric {name!r}; expected one of nDCG@k, MRR@k, R@k, P@k, MAP@k, MAP, MRR")
    k = int(m.group(2)) if m.group(2) is not None else None
    if k is not None and k < 1:
        raise ValueError(f"metric {name!r}: cut-off must be >= 1")
    spec = MetricSpec(name=name, family=_FAMILY[m.group(1).lower()], k=k)
    spec.trec_measure  # noqa: B018  (validates R/P without a cut-off)
    return spec


def deterministic_run(run: Run, top_k: int | None = None) -> dict[str, dict[str, float]]:
    """Fix each query's ranking (score desc, then doc id asc) and re-score it with unique scores ``n - rank``.

    Args:
        run: ``{qid: {doc_id: score}}``; scores may tie or be NaN-free floats of any scale.
        top_k: keep only the first ``top_k`` documents per query (None = all).

    Returns:
        ``{qid: {doc_id: float(n - rank)}}`` – any tool sorting by score now sees the same order.
    """
    out: dict[str, dict[str, float]] = {}
    for qid, docs in run.items():
        ranked = sorted(docs.items(), key=lambda kv: (-float(kv[1]), kv[0]))
        if top_k is not None:
            ranked = ranked[:top_k]
        n = len(ranked)
        out[str(qid)] = {str(d): float(n - i) for i, (d, _) in enumerate(ranked)}
    return out


def _clean_qrels(qrels: Qrels) -> dict[str, dict[str, int]]:
    out = {}
    for qid, docs in qrels.items():
        out[str(qid)] = {str(d): int(r) for d, r in docs.items()}
    return out


def evaluate_per_query(run: Run, qrels: Qrels, metrics: Iterable[str] = DEFAULT_METRICS
                       ) -> dict[str, dict[str, float]]:
    """Per-query metric values ``{qid: {metric_name: value}}`` for every query in ``qrels``.

    Queries of ``qrels`` missing from ``run`` get 0.0 for every metric (see module docstring). Raises
    ValueError for an unknown metric name or empty qrels.
    """
    specs = [parse_metric(m) for m in metrics]
    if not specs:
        raise ValueError("no metrics requested")
    q = _clean_qrels(qrels)
    if not q:
        raise ValueError("qrels are empty: nothing to evaluate")
    per_query: dict[str, dict[str, float]] = {qid: {s.name: 0.0 for s in specs} for qid in q}

    full = deterministic_run(run)
    full = {qid: docs for qid, docs in full.items() if qid in q and docs}
    plain = [s for s in specs if s.family != "MRR"]
    if plain and full:
        ev = pytrec_eval.RelevanceEvaluator(q, {s.trec_measure for s in plain})
        res = ev.evaluate(full)
        for qid, vals in res.items():
            for s in plain:
                per_query[qid][s.name] = float(vals[s.trec_key])
    # MRR@k: recip_rank ignores cut-offs, so evaluate on the run cut to k (one pass per distinct k).
    for k in sorted({s.k for s in specs if s.family == "MRR"}, key=lambda x: (x is None, x or 0)):
        cut = {qid: docs for qid, docs in deterministic_run(full, top_k=k).items() if docs}
        if not cut:
            continue
        res = pytrec_eval.RelevanceEvaluator(q, {"recip_rank"}).evaluate(cut)
        for qid, vals in res.items():
            for s in specs:
                if s.family == "MRR" and s.k == k:
                    per_query[qid][s.name] = float(vals["recip_rank"])
    return per_query


def evaluate(run: Run, qrels: Qrels, metrics: Iterable[str] = DEFAULT_METRICS,
             per_query: bool = False) -> dict:
    """Mean metrics over all queries in ``qrels`` (BEIR convention; missing run queries count 0).

    Args:
        run: ``{qid: {doc_id: score}}`` (higher = better; ties broken by doc id ascending).
        qrels: ``{qid: {doc_id: graded relevance int}}``.
        metrics: names such as ``"nDCG@10"``, ``"MRR@10"``, ``"R@100"``, ``"R@1000"``, ``"P@10"``, ``"MAP@100"``.
        per_query: if True return ``{"mean": {...}, "per_query": {qid: {...}}}`` instead of the means only.

    Returns:
        ``{metric_name: mean value in [0, 1]}`` (keys spelled as requested), or the dict described above.
    """
    metrics = list(metrics)
    pq = evaluate_per_query(run, qrels, metrics)
    n = len(pq)
    means = {m: sum(v[m] for v in pq.values()) / n for m in metrics}
    if per_query:
        return {"mean": means, "per_query": pq}
    return means
