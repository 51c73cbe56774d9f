"""KL-Div distillation (Formal et al. 2022, arXiv:2205.04733) against a hand computation."""

import math

import pytest
import torch

from lexray.losses import kl_div_loss


def test_hand_computed():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # groups [pos, neg]: student scores q0 [2, 1], q1 [0, 0]
    d = torch.tensor([[2.0, 0.0], [1.0, 5.0], [7.0, 0.0], [3.0, 0.0]])
    tpos, tneg = torch.tensor([3.0, 1.0]), torch.tensor([[3.0], [0.0]])

    def kl(t, s):
        pt = [math.exp(x) / sum(math.exp(y) for y in t) for x in t]
        ps = [math.exp(x) / sum(math.exp(y) for y in s) for x in s]
        return sum(a * (math.log(a) - math.log(b)) for a, b in zip(pt, ps, strict=True))

    # q0: teacher uniform [.5, .5] vs student softmax([2, 1]); q1: teacher softmax([1, 0]) vs student uniform
    expect = (kl([3, 3], [2, 1]) + kl([1, 0], [0, 0])) / 2
    assert kl_div_loss(q, d, tpos, tneg).item() == pytest.approx(expect, rel=1e-6)
    # temperatures divide the scores: τ_s = 2 halves the student's, τ_t = 0.5 doubles the teacher's
    expect_t = (kl([6, 6], [1, 0.5]) + kl([2, 0], [0, 0])) / 2
    got = kl_div_loss(q, d, tpos, tneg, temperature=2.0, teacher_temperature=0.5).item()
    assert got == pytest.approx(expect_t, rel=1e-6)


def test_zero_when_distributions_agree_gradient_and_errors():
    q = torch.rand(2, 3, requires_grad=True)
    d = torch.rand(4, 3, requires_grad=True)
    s = torch.einsum("bv,bgv->bg", q, d.view(2, 2, 3)).detach()
    assert kl_div_loss(q, d, s[:, 0] + 5, s[:, 1:] + 5).item() == pytest.approx(0.0, abs=1e-6)  # shift-invariant
    kl_div_loss(q, d, torch.zeros(2), torch.ones(2, 1)).backward()
    assert q.grad.abs().sum() > 0 and d.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="at least one negative"):
        kl_div_loss(q, d[:2], torch.zeros(2), torch.ones(2, 0))
    with pytest.raises(ValueError, match="teacher scores"):
        kl_div_loss(q, d, torch.zeros(3), torch.ones(2, 1))
    with pytest.raises(ValueError, match="temperatures"):
        kl_div_loss(q, d, torch.zeros(2), torch.ones(2, 1), temperature=0)
