"""InfoNCE (LACONIC eq. (2)) against hand-computed values, and the 2-worker gathered loss against one process."""

from __future__ import annotations

import math
import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from lexray.losses import infonce_loss, infonce_scores


def _hand_loss(scores_row, label):
    return -(scores_row[label] - math.log(sum(math.exp(s) for s in scores_row)))


def test_hand_computed_in_batch_and_hard_negatives():
    # 2 queries, 1 hard negative each, |V| = 3. Documents: [pos0, neg0, pos1, neg1].
    q = torch.tensor([[1.0, 0.0, 0.5], [0.0, 2.0, 0.0]])
    d = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    # scores q0: [1, .5, 0, .5]; q1: [0, 0, 2, 1]
    expect = (_hand_loss([1, .5, 0, .5], 0) + _hand_loss([0, 0, 2, 1], 2)) / 2
    assert infonce_loss(q, d, num_negatives=1).item() == pytest.approx(expect, rel=1e-6)
    # without in-batch negatives: each query only vs its own group
    expect_own = (_hand_loss([1, .5], 0) + _hand_loss([2, 1], 0)) / 2
    assert infonce_loss(q, d, num_negatives=1, in_batch_negatives=False).item() == pytest.approx(expect_own, rel=1e-6)
    # temperature divides the scores
    expect_t = (_hand_loss([2, 1, 0, 1], 0) + _hand_loss([0, 0, 4, 2], 2)) / 2
    assert infonce_loss(q, d, num_negatives=1, temperature=0.5).item() == pytest.approx(expect_t, rel=1e-6)


def test_labels_and_shape_errors():
    q = torch.rand(3, 5)
    scores, labels = infonce_scores(q, torch.rand(9, 5), num_negatives=2)
    assert scores.shape == (3, 9) and labels.tolist() == [0, 3, 6]
    with pytest.raises(ValueError, match=r"B\*\(1\+N\)"):
        infonce_loss(q, torch.rand(8, 5), num_negatives=2)
    with pytest.raises(ValueError, match="temperature"):
        infonce_loss(q, torch.rand(9, 5), num_negatives=2, temperature=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, q, d, n_neg, out):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        b = q.shape[0] // world
        g = 1 + n_neg
        ql = q[rank * b:(rank + 1) * b].clone().requires_grad_(True)
        dl = d[rank * b * g:(rank + 1) * b * g].clone().requires_grad_(True)
        loss = infonce_loss(ql, dl, num_negatives=n_neg, gather=True)
        (loss * world).backward()  # what the loop does: strategies average gradients over workers
        out[rank] = (loss.item(), ql.grad.clone(), dl.grad.clone())
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(120)
def test_two_workers_gathered_equals_one_process():
    torch.manual_seed(0)
    B, N, V = 4, 2, 7
    q = torch.rand(B, V)
    d = torch.rand(B * (1 + N), V)
    ref_q, ref_d = q.clone().requires_grad_(True), d.clone().requires_grad_(True)
    ref = infonce_loss(ref_q, ref_d, num_negatives=N)
    ref.backward()

    manager = mp.Manager()
    out = manager.dict()
    mp.spawn(_worker, args=(2, _free_port(), q, d, N, out), nprocs=2, join=True)
    losses = [out[r][0] for r in range(2)]
    assert losses[0] == pytest.approx(ref.item(), rel=1e-6) and losses[1] == pytest.approx(ref.item(), rel=1e-6)
    # per-worker gradients of the local slices, averaged as DDP does (x W / W), equal the global gradient
    gq = torch.cat([out[0][1], out[1][1]]) / 2
    gd = torch.cat([out[0][2], out[1][2]]) / 2
    torch.testing.assert_close(gq, ref_q.grad, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(gd, ref_d.grad, rtol=1e-5, atol=1e-7)
