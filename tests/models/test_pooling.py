from __future__ import annotations

import torch

from lexray.models import splade_max_pool


def test_hand_computed_pooling():
    logits = torch.tensor([[[1.0, -2.0, 0.5], [3.0, -1.0, -0.5], [9.0, 9.0, 9.0]]])  # (1, 3, 3)
    mask = torch.tensor([[1, 1, 0]])  # last position is padding
    out = splade_max_pool(logits, mask)
    expected = torch.log1p(torch.tensor([[3.0, 0.0, 0.5]]))
    assert torch.allclose(out, expected)


def test_fully_masked_row_is_zero_and_shapes_are_checked():
    out = splade_max_pool(torch.randn(2, 4, 5), torch.zeros(2, 4, dtype=torch.bool))
    assert torch.equal(out, torch.zeros(2, 5))
    try:
        splade_max_pool(torch.randn(2, 4, 5), torch.ones(2, 3))
    except ValueError as e:
        assert "pool_mask" in str(e)
    else:
        raise AssertionError("shape mismatch not detected")


def test_pool_before_activation_equals_activation_then_pool():
    torch.manual_seed(0)
    logits = torch.randn(3, 7, 11)
    mask = torch.rand(3, 7) > 0.3
    ref = torch.log1p(torch.relu(logits)).masked_fill(~mask.unsqueeze(-1), 0).amax(1)
    assert torch.allclose(splade_max_pool(logits, mask), ref)
