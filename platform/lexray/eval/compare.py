"""Per-query comparison of a run against a baseline run: wins / ties / losses and a paired significance test.

The test itself comes from ranx (``ranx.statistical_tests``): the two-sided paired Student's t-test (default) or
Fisher's randomization test (Smucker, Allan & Carterette, CIKM 2007, "A Comparison of Statistical Significance
Tests for Information Retrieval Evaluation"), on the per-query values of each metric over the queries both
runs were evaluated on. ranx is an optional dependency (``pip install ranx``), imported only here.

Per-query files are the ``per_query.<split>.jsonl`` that evaluation writes: one ``{"qid": ..., "<metric>": value}``
object per line (:func:`lexray.eval.report.write_per_query`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

Test = Literal["t-test", "fisher"]


def compare_per_query(per_query: Mapping[str, Mapping[str, float]], baseline: Mapping[str, Mapping[str, float]],
                      metrics: Sequence[str], test: Test = "t-test", alpha: float = 0.05, tie_eps: float = 1e-9
                      ) -> dict[str, dict]:
    """Compare per-query metric values of a system with a baseline.

    Args:
        per_query, baseline: ``{qid: {metric: value}}``.
        metrics: metric names present in both.
        test: ``"t-test"`` (paired Student's t, two-sided) or ``"fisher"`` (randomization, 10,000 permutations).
        alpha: significance level for the ``significant`` flag.
        tie_eps: |difference| at most this counts as a tie.

    Returns:
        ``{metric: {"n", "mean", "baseline_mean", "delta", "wins", "ties", "losses", "p_value", "significant",
        "test"}}`` over the queries in both inputs.

    Raises:
        ValueError: no query in common, or a metric missing from either input (names it and a query).
        ImportError: ranx is not installed (the message says how to install it).
    """
    common = sorted(set(per_query) & set(baseline))
    if not common:
        raise ValueError("the run and the baseline have no query in common")
    try:
        from ranx.statistical_tests import fisher_randomization_test, paired_student_t_test
    except ImportError as e:
        raise ImportError("comparing against a baseline needs ranx (pip install 'ranx>=0.3.21')") from e
    out: dict[str, dict] = {}
    for m in metrics:
        for name, src in (("run", per_query), ("baseline", baseline)):
            missing = next((q for q in common if m not in src[q]), None)
            if missing is not None:
                raise ValueError(f"metric {m!r} missing for query {missing!r} in the {name}'s per-query values")
        a = np.array([float(per_query[q][m]) for q in common])
        b = np.array([float(baseline[q][m]) for q in common])
        d = a - b
        if np.allclose(d, 0.0, atol=tie_eps):
            p = 1.0
        elif test == "fisher":
            p, _ = fisher_randomization_test(b, a, 10_000, alpha, 42)
        else:
            p, _ = paired_student_t_test(b, a, alpha)
        out[m] = {"n": len(common), "mean": float(a.mean()), "baseline_mean": float(b.mean()),
                  "delta": float(d.mean()), "wins": int((d > tie_eps).sum()), "ties": int((abs(d) <= tie_eps).sum()),
                  "losses": int((d < -tie_eps).sum()), "p_value": float(p), "significant": bool(p <= alpha),
                  "test": test}
    return out


def comparison_table(name: str, comparison: Mapping[str, Mapping]) -> str:
    """Markdown rows ``metric | run | baseline | Δ | W/T/L | p`` for one dataset."""
    lines = [f"| {name} | metric | run | baseline | Δ | wins/ties/losses | p |", "|---|---|---:|---:|---:|---:|---:|"]
    for m, c in comparison.items():
        star = " *" if c["significant"] else ""
        lines.append(f"| | {m} | {c['mean']:.4f} | {c['baseline_mean']:.4f} | {c['delta']:+.4f}{star} | "
                     f"{c['wins']}/{c['ties']}/{c['losses']} | {c['p_value']:.3g} |")
    return "\n".join(lines) + "\n"
