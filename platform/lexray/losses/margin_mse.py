"""MarginMSE distillation loss (Hofstätter et al. 2020, "Improving Efficient Neural Ranking Models with
Cross-Architecture Knowledge Distillation", arXiv:2010.02666, eq. (1)).

``L = mean_{q, n} ( (s(q, d+) - s(q, d-_n)) - (t(q, d+) - t(q, d-_n)) )²`` with student scores ``s = <Q, D>`` and
teacher scores ``t`` (e.g. a cross-encoder). Only score *margins* are matched, so teacher and student scores may
live on different scales — why SPLADE v2 (arXiv:2109.10086) distillation uses it. With N hard negatives per query every (positive,
negative) pair is one term.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lexray.losses.candidates import candidate_scores


def margin_mse_loss(q_reps: torch.Tensor, d_reps: torch.Tensor, teacher_pos: torch.Tensor,
                    teacher_neg: torch.Tensor) -> torch.Tensor:
    """MarginMSE over B queries with N ≥ 1 negatives each.

    Args:
        q_reps: (B, |V|) float queries.
        d_reps: (B·(1+N), |V|) float documents grouped per query ``[pos, neg_1..neg_N]`` (as for InfoNCE).
        teacher_pos: (B,) teacher scores of the positives.
        teacher_neg: (B, N) teacher scores of the negatives.

    Returns:
        0-dim float32 tensor, the mean squared margin difference over the B·N pairs.

    Raises:
        ValueError: inconsistent shapes, or N = 0 (no margin to match).
    """
    s = candidate_scores(q_reps, d_reps, teacher_pos, teacher_neg, "MarginMSE")
    student = s[:, :1] - s[:, 1:]
    teacher = teacher_pos.float().unsqueeze(1) - teacher_neg.float()
    return F.mse_loss(student, teacher.to(student.device))
