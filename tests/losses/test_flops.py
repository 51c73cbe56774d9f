"""FLOPS (Paria et al. 2020) and λ schedules against hand-computed values."""

import math

import pytest
import torch

from lexray.losses import FlopsSchedule, flops_loss, lambda_at


def test_flops_hand_computed():
    w = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 0.0]])
    # per-term means: [2, 0, 1] -> 4 + 0 + 1
    assert flops_loss(w).item() == pytest.approx(5.0)
    # unbiased: ((Σw)² − Σw²)/(n(n−1)): term0 (16−10)/2 = 3, term1 0, term2 (4−4)/2 = 0
    assert flops_loss(w, unbiased=True).item() == pytest.approx(3.0)


def test_flops_is_a_mean_over_rows():
    """λ does not scale with batch size: duplicating the batch leaves FLOPS unchanged."""
    w = torch.rand(5, 11)
    assert flops_loss(torch.cat([w, w, w])).item() == pytest.approx(flops_loss(w).item(), rel=1e-6)


def test_unbiased_estimator_does_not_depend_on_batch_size():
    torch.manual_seed(0)
    pop = torch.rand(4000, 6) * (torch.rand(4000, 6) < 0.3)
    truth = float((pop.mean(0) ** 2).sum())
    for n in (2, 4, 32):
        batches = pop.view(-1, n, 6)
        biased = torch.stack([flops_loss(b) for b in batches]).mean().item()
        unbiased = torch.stack([flops_loss(b, unbiased=True) for b in batches]).mean().item()
        assert unbiased == pytest.approx(truth, rel=0.05)
        if n == 2:
            assert biased > truth * 1.2  # the squared mean overestimates at small n


def test_schedules():
    assert lambda_at(5, 1e-3, 10, "quadratic") == pytest.approx(1e-3 * 0.25)
    assert lambda_at(50, 1e-3, 10, "quadratic") == pytest.approx(1e-3)
    assert lambda_at(5, 1e-3, 10, "linear") == pytest.approx(5e-4)
    assert lambda_at(0, 1.0, 10, "exponential") == pytest.approx(math.exp(-5))
    assert lambda_at(5, 1.0, 10, "exponential") == pytest.approx(math.exp(-1.25))
    assert lambda_at(10, 1.0, 10, "exponential") == pytest.approx(1.0)
    assert lambda_at(1, 2.0, 10, "constant") == 2.0
    assert lambda_at(1, 2.0, 0, "quadratic") == 2.0
    with pytest.raises(ValueError, match="unknown"):
        lambda_at(1, 1.0, 10, "cubic")
    sched = FlopsSchedule(1e-3, 3e-3, warmup_steps=4, schedule="quadratic")
    assert sched(2) == pytest.approx((2.5e-4, 7.5e-4))
