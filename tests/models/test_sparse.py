from __future__ import annotations

import numpy as np
import torch

from lexray.models import to_sparse


def test_to_sparse_keeps_nonzeros_sorted_and_typed():
    reps = torch.tensor([[0.0, 2.0, 0.0, 1.0], [0.5, 0.0, 0.0, 0.0]])
    ids, ws = to_sparse(reps)
    assert ids[0].tolist() == [1, 3] and ws[0].tolist() == [2.0, 1.0]
    assert ids[1].tolist() == [0] and ids[0].dtype == np.int32 and ws[0].dtype == np.float32


def test_to_sparse_top_k_and_threshold():
    reps = torch.tensor([[0.1, 0.9, 0.4, 0.7]])
    ids, ws = to_sparse(reps, top_k=2)
    assert ids[0].tolist() == [1, 3]
    ids, _ = to_sparse(reps, threshold=0.45)
    assert ids[0].tolist() == [1, 3]
