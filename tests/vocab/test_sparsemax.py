"""Sparsemax against hand-computed projections onto the simplex (Martins & Astudillo 2016; VT eq. 8)."""

from __future__ import annotations

import torch

from lexray.vocab.sparsemax import sparsemax, sparsemax_topk


def test_hand_computed_cases():
    # z = (1, 0.5, -1): support {1, 2}: tau = (1 + 0.5 - 1) / 2 = 0.25 -> (0.75, 0.25, 0)
    assert torch.allclose(sparsemax(torch.tensor([1.0, 0.5, -1.0])), torch.tensor([0.75, 0.25, 0.0]))
    # a clear winner takes everything: z = (3, 0, 0): tau = 2 -> (1, 0, 0)
    assert torch.equal(sparsemax(torch.tensor([3.0, 0.0, 0.0])), torch.tensor([1.0, 0.0, 0.0]))
    # ties share: z = (0.2, 0.2, 0.2, -5): tau = (0.6 - 1) / 3 -> 1/3 each on the first three
    out = sparsemax(torch.tensor([0.2, 0.2, 0.2, -5.0]))
    assert torch.allclose(out, torch.tensor([1 / 3, 1 / 3, 1 / 3, 0.0]))
    # close scores: z = (0.9, 0.8, 0.7, 0.1): k=3 (1 + 3*0.7 = 3.1 > 2.4), tau = (2.4 - 1)/3
    tau = 1.4 / 3
    assert torch.allclose(sparsemax(torch.tensor([0.9, 0.8, 0.7, 0.1])),
                          torch.tensor([0.9 - tau, 0.8 - tau, 0.7 - tau, 0.0]))


def test_properties_on_cosine_rows_and_dim_argument():
    g = torch.Generator().manual_seed(0)
    z = torch.nn.functional.normalize(torch.randn(50, 16, generator=g), dim=1) @ \
        torch.nn.functional.normalize(torch.randn(400, 16, generator=g), dim=1).T
    p = sparsemax(z)
    assert (p >= 0).all()
    assert torch.allclose(p.sum(1), torch.ones(50), atol=1e-5)
    assert ((p > 0).sum(1) < 400).all()                       # sparse
    assert torch.allclose(sparsemax(z.T, dim=0), p.T)


def test_topk_is_exact_including_rows_with_large_support():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(30, 500, generator=g) * 0.01              # nearly flat rows: supports far above k=8
    z[:10] = torch.randn(10, 500, generator=g) * 3            # peaked rows: small supports
    full = sparsemax(z)
    vals, idx, ks = sparsemax_topk(z, k=8)
    dense = torch.zeros_like(z).scatter_add_(1, idx, vals)
    assert torch.allclose(dense, full, atol=1e-6)
    assert torch.equal(ks, (full > 0).sum(1))
    assert ks.max() > 8 and ks[:10].max() <= 8
