"""MarginMSE (Hofstätter et al. 2020) against a hand-computed example."""

import pytest
import torch

from lexray.losses import margin_mse_loss


def test_hand_computed():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # groups [pos, neg1, neg2]: q0 scores [2, 1, 0]; q1 scores [3, 0, 1]
    d = torch.tensor([[2.0, 0.0], [1.0, 5.0], [0.0, 0.0], [9.0, 3.0], [0.0, 0.0], [0.0, 1.0]])
    tpos = torch.tensor([10.0, 4.0])
    tneg = torch.tensor([[9.0, 8.0], [0.0, 4.0]])
    # student margins: q0 [1, 2], q1 [3, 2]; teacher margins: q0 [1, 2], q1 [4, 0]
    expect = (0 + 0 + 1 + 4) / 4
    assert margin_mse_loss(q, d, tpos, tneg).item() == pytest.approx(expect)


def test_gradient_flows_and_errors():
    q = torch.rand(2, 3, requires_grad=True)
    d = torch.rand(4, 3, requires_grad=True)
    margin_mse_loss(q, d, torch.zeros(2), torch.ones(2, 1)).backward()
    assert q.grad.abs().sum() > 0 and d.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="at least one negative"):
        margin_mse_loss(q, d[:2], torch.zeros(2), torch.ones(2, 0))
    with pytest.raises(ValueError, match="teacher scores"):
        margin_mse_loss(q, d, torch.zeros(3), torch.ones(2, 1))
