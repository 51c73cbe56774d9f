import pytest
import torch

from lexray.losses import l1_loss


def test_l1_hand_computed():
    assert l1_loss(torch.tensor([[1.0, -2.0, 0.0], [0.0, 0.0, 3.0]])).item() == pytest.approx(3.0)
