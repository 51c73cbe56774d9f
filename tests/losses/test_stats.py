import pytest
import torch

from lexray.losses import active_dims


def test_active_dims():
    w = torch.tensor([[0.0, 1.0, 2.0, 0.0], [0.0, 0.0, 0.5, 0.0]])
    s = active_dims(w)
    assert s == {"mean": 1.5, "fraction": pytest.approx(1.5 / 4), "min": 1.0, "max": 2.0}
    assert active_dims(w, threshold=0.75)["mean"] == 1.0
