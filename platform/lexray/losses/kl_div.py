"""KL-Div distillation loss over each query's candidates (Formal et al. 2022, "From distillation to hard negative
sampling: making sparse neural IR models more effective", arXiv:2205.04733, §3: the KL-Div loss of Lin et al.
2021, "In-batch negatives for knowledge distillation with tightly-coupled teachers", arXiv:2010.11386).

For query q with candidates ``[d+, d-_1 .. d-_N]`` (its positive and its hard negatives, no in-batch documents),
teacher and student scores become distributions over those 1+N candidates::

    p_t = softmax(t(q, ·) / τ_t),   p_s = softmax(s(q, ·) / τ_s),   s(q, d) = <Q, D>
    L = mean_q  KL(p_t || p_s) = mean_q Σ_j p_t(j) (log p_t(j) - log p_s(j))

as naver/splade's ``DistilKLLoss`` computes it (τ_s = τ_t = 1 in the paper). Unlike MarginMSE
(:mod:`lexray.losses.margin_mse`) it matches only the teacher's *ranking distribution*, not score margins, so a
teacher on another scale (BM25's 10-80) needs its own temperature τ_t.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lexray.losses.candidates import candidate_scores


def kl_div_loss(q_reps: torch.Tensor, d_reps: torch.Tensor, teacher_pos: torch.Tensor, teacher_neg: torch.Tensor,
                temperature: float = 1.0, teacher_temperature: float = 1.0) -> torch.Tensor:
    """KL(teacher || student) over each query's 1+N candidates, averaged over the B queries.

    Args:
        q_reps: (B, |V|) float queries.
        d_reps: (B·(1+N), |V|) float documents grouped per query ``[pos, neg_1..neg_N]`` (as for InfoNCE).
        teacher_pos: (B,) teacher scores of the positives.
        teacher_neg: (B, N) teacher scores of the negatives.
        temperature: τ_s > 0, divides the student's scores. teacher_temperature: τ_t > 0, divides the teacher's.

    Returns:
        0-dim float32 tensor, ≥ 0 (0 when the two distributions agree).

    Raises:
        ValueError: inconsistent shapes, N = 0 (a one-candidate distribution carries nothing), or τ ≤ 0.
    """
    if temperature <= 0 or teacher_temperature <= 0:
        raise ValueError(f"temperatures must be > 0, got {temperature} and {teacher_temperature}")
    s = candidate_scores(q_reps, d_reps, teacher_pos, teacher_neg, "KL-Div distillation")
    t = torch.cat([teacher_pos.float().unsqueeze(1), teacher_neg.float()], 1).to(s.device)
    log_p_s = F.log_softmax(s / temperature, dim=1)
    log_p_t = F.log_softmax(t / teacher_temperature, dim=1)
    return F.kl_div(log_p_s, log_p_t, reduction="batchmean", log_target=True)
