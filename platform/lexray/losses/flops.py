"""FLOPS sparsity regularizer (Paria et al. 2020, "Minimizing FLOPs to Learn Efficient Sparse Representations",
arXiv:2004.05665, §3; as used by SPLADE, Formal et al. 2021, arXiv:2107.05720, and LACONIC, arXiv:2601.01684,
§2.2) and the warm-up schedules of its weights λ_Q, λ_D.

``FLOPS(W) = Σ_j ( (1/n) Σ_i |w_ij| )²`` over a batch of n representations (n, |V|): the squared mean activation of
each vocabulary term, summed. Its expectation approximates the expected number of floating-point operations of
an inverted-index dot product (a term costs in proportion to how often it is active in queries *and* documents),
so it pushes down frequently-active terms harder than a plain L1 penalty does.

The λ rule (why the same λ means the same thing at any scale): the regularizer of an optimizer step is computed
on the **global batch of that step** — every query (document) representation that contributes to the update,
over all workers and all gradient-accumulation micro-batches — never per micro-batch or per worker:

* across workers, representations are gathered (:func:`lexray.losses.infonce.gather_with_grad`, like the
  in-batch negatives) and every worker evaluates the same global term;
* across micro-batches, the training loop first encodes all micro-batches of the step without a graph, evaluates
  the loss and this regularizer on the cached (n_global, |V|) representations, and back-propagates the cached
  representation gradients micro-batch by micro-batch (GradCache, Gao et al. 2021).

Because the term is a *mean* over rows (not a sum), λ does not scale with the batch size, and because it is
evaluated on the whole step batch, the gradient of an update is identical whether a global batch of G is run as
1 worker × 1 micro-batch, W workers, or W workers × K micro-batches (tests/train/test_loop.py checks the last two
against the first). What remains batch-size dependent is only the statistics of the estimator itself:
``E[(mean_i |w_ij|)²] = (E|w_j|)² + Var|w_j| / n``; ``unbiased=True`` removes the ``Var/n`` term
(``((Σ_i w_ij)² − Σ_i w_ij²) / (n(n−1))``, a U-statistic whose expectation is ``(E|w_j|)²`` at any n).
"""

from __future__ import annotations

import math
from typing import Literal

import torch

Schedule = Literal["quadratic", "exponential", "linear", "constant"]


def flops_loss(reps: torch.Tensor, unbiased: bool = False) -> torch.Tensor:
    """FLOPS regularizer of one batch of representations.

    Args:
        reps: (n, |V|) float representations (SPLADE weights are ≥ 0; ``|·|`` is applied anyway).
        unbiased: use the U-statistic ``((Σ_i w)² − Σ_i w²) / (n(n−1))`` per term instead of the squared mean
            (needs n ≥ 2).

    Returns:
        0-dim float32 tensor ``Σ_j (mean_i |w_ij|)²``.
    """
    if reps.dim() != 2:
        raise ValueError(f"expected (n, |V|) representations, got shape {tuple(reps.shape)}")
    a = reps.float().abs()
    n = a.shape[0]
    if not unbiased:
        return (a.mean(0) ** 2).sum()
    if n < 2:
        raise ValueError("the unbiased FLOPS estimator needs at least 2 rows")
    s = a.sum(0)
    return ((s * s - (a * a).sum(0)) / (n * (n - 1))).sum()


def lambda_at(step: int, lam: float, warmup_steps: int, schedule: Schedule = "quadratic") -> float:
    """Weight λ in force at optimizer step ``step`` (1-based: the first update is step 1).

    With ``r = min(1, step / T)`` for ``T = warmup_steps``:

    * ``quadratic``: ``λ·r²`` — SPLADE's schedule (Formal et al. 2021, arXiv:2107.05720, §4: λ grows quadratically to its
      final value over the first T steps; naver/splade ``RegWeight``).
    * ``exponential``: ``λ·exp(−5(1−r)²)`` — the "exponential ramp-up" of Laine & Aila 2017, arXiv:1610.02242 (§3.1); LACONIC §2.3-2.4
      names an exponential warm-up without giving its formula, this is the standard one (starts at λ·e⁻⁵ ≈ 0.0067λ).
    * ``linear``: ``λ·r``.
    * ``constant``: ``λ``.

    ``T = 0`` means no warm-up (λ from the first step). Raises ValueError on an unknown schedule or negative T.
    """
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
    if schedule not in ("quadratic", "exponential", "linear", "constant"):
        raise ValueError(f"unknown λ schedule {schedule!r}; expected quadratic, exponential, linear or constant")
    if schedule == "constant" or warmup_steps == 0:
        return float(lam)
    r = min(1.0, max(0, step) / warmup_steps)
    if schedule == "quadratic":
        return float(lam * r * r)
    if schedule == "linear":
        return float(lam * r)
    return float(lam * math.exp(-5.0 * (1.0 - r) ** 2))


class FlopsSchedule:
    """λ_Q and λ_D with their warm-up, from a :class:`lexray.config.FlopsConfig`: ``sched(step) -> (λ_Q, λ_D)``."""

    def __init__(self, lambda_q: float, lambda_d: float, warmup_steps: int = 0, schedule: Schedule = "quadratic"):
        self.lambda_q, self.lambda_d = float(lambda_q), float(lambda_d)
        self.warmup_steps, self.schedule = int(warmup_steps), schedule
        lambda_at(1, 1.0, self.warmup_steps, schedule)  # validate now, not at step 1

    @classmethod
    def from_config(cls, cfg) -> FlopsSchedule:
        """From a phase's ``flops`` config section (``lambda_q``, ``lambda_d``, ``warmup_steps``, ``schedule``)."""
        return cls(cfg.lambda_q, cfg.lambda_d, cfg.warmup_steps, cfg.schedule)

    def __call__(self, step: int) -> tuple[float, float]:
        return (lambda_at(step, self.lambda_q, self.warmup_steps, self.schedule),
                lambda_at(step, self.lambda_d, self.warmup_steps, self.schedule))
