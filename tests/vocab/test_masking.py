"""Overlap-Aware Masking Curriculum (VT §4.2.3): P_mask ∝ ω with ω = 1 (overlap), λ (new), mean rate 0.3."""

from __future__ import annotations

import numpy as np
import torch

from lexray.vocab.masking import IGNORE, omc_mask, token_weights


def test_masking_frequencies_follow_omega():
    V = 1000
    is_new = np.zeros(V, dtype=bool)
    is_new[500:] = True                                  # ids >= 500 are new tokens
    omega = token_weights(is_new, new_weight=2.0, special_ids=[0, 1])
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, V, (4000, 64), generator=g)
    ids[:, 0] = 0                                        # a special token at every sequence start
    att = torch.ones_like(ids)
    att[:, 60:] = 0                                      # padding
    masked_ids, labels = omc_mask(ids, att, omega, mask_token_id=1, vocab_size=V, mask_rate=0.3, generator=g)
    m = labels != IGNORE
    assert not m[:, 0].any() and not m[:, 60:].any()     # specials and padding never masked
    maskable = att.bool().clone()
    maskable[:, 0] = False
    assert abs(float(m.sum()) / float(maskable.sum()) - 0.3) < 0.01
    new_pos, old_pos = maskable & (ids >= 500), maskable & (ids < 500)
    ratio = (m & new_pos).sum() / new_pos.sum() / ((m & old_pos).sum() / old_pos.sum())
    assert abs(float(ratio) - 2.0) < 0.05
    assert torch.equal(labels[m], ids[m])
    assert abs(float((masked_ids[m] == 1).float().mean()) - 0.8) < 0.02   # 80 % [MASK]
