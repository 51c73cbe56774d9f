"""InfoNCE ranking loss with hard and in-batch negatives (LACONIC, arXiv:2601.01684, eq. (2); Oord et al. 2018, arXiv:1807.03748).

Source: LACONIC (arXiv:2601.01684), ../shared/papers/laconic.txt §2.2, eq. (2):
``L_rank(Q, D+, {D_N}) = -log( e^{s(Q,D+)} / (e^{s(Q,D+)} + Σ_{D-} e^{s(Q,D-)}) )`` with ``s(Q, D) = <Q, D>``;
§2.3 uses in-batch negatives only, §2.4 one positive + 15 hard negatives + in-batch negatives. A temperature τ
divides the scores (τ = 1 is the paper's loss).

Document layout: documents arrive as one (B·(1+N), |V|) tensor grouped per query, ``[pos_0, neg_0_1 .. neg_0_N,
pos_1, ...]``, so query i's positive sits at row ``i·(1+N)``. With in-batch negatives every query is scored against
every document of the batch (the other queries' positives *and* hard negatives); without, only against its own
group of 1+N.

Across workers (``gather=True``): queries and documents of all workers are concatenated (:func:`gather_with_grad`)
and the loss is computed on the *global* batch — every worker gets the same value, equal to what one process
computes on the global batch. Only the worker's own slice keeps its autograd graph (the other slices arrive
through a collective and are constants), so the per-worker gradients sum — over workers — to the exact gradient
of the global loss. DDP, FSDP and DeepSpeed *average* gradients over the W workers, hence the training loop
multiplies the objective by W before ``backward`` (the convention of Tevatron's ``_dist_gather_tensor``). This is
exact, needs no autograd-aware collective (gloo has no reduce-scatter) and keeps labels simple: global query g's
positive is global document row ``g·(1+N)``, i.e. the local label ``i·(1+N)`` offset by the rows of lower ranks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def world_info() -> tuple[int, int]:
    """``(rank, world_size)`` of the default process group; ``(0, 1)`` when none is initialised."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` from every worker along dim 0, in rank order; the local slice keeps its gradient.

    Args:
        x: (n_r, ...) tensor; n_r may differ between workers (sizes are exchanged first).

    Returns:
        (Σ_r n_r, ...) tensor. Rows of other workers are detached copies; this worker's rows are ``x`` itself,
        so autograd flows into them. Without an initialised process group (or with one worker) returns ``x``.
    """
    import torch.distributed as dist

    rank, world = world_info()
    if world == 1:
        return x
    n = torch.tensor([x.shape[0]], device=x.device, dtype=torch.long)
    sizes = [torch.zeros_like(n) for _ in range(world)]
    dist.all_gather(sizes, n)
    sizes_i = [int(s.item()) for s in sizes]
    biggest = max(sizes_i)
    pad = x.detach()
    if pad.shape[0] < biggest:  # all_gather needs equal shapes
        pad = torch.cat([pad, pad.new_zeros((biggest - pad.shape[0], *pad.shape[1:]))], 0)
    parts = [torch.empty_like(pad) for _ in range(world)]
    dist.all_gather(parts, pad.contiguous())
    parts = [p[:s] for p, s in zip(parts, sizes_i, strict=True)]
    parts[rank] = x
    return torch.cat(parts, 0)


def infonce_scores(q_reps: torch.Tensor, d_reps: torch.Tensor, num_negatives: int,
                   in_batch_negatives: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores and target columns of eq. (2) before the temperature.

    Returns ``(scores, labels)``: with in-batch negatives scores are (B, B·(1+N)) = Q·Dᵀ and labels
    ``i·(1+N)``; without, (B, 1+N) (each query against its own group) and labels 0.
    """
    B, V = q_reps.shape
    g = 1 + num_negatives
    if d_reps.shape != (B * g, V):
        raise ValueError(f"expected documents of shape (B*(1+N), |V|) = ({B * g}, {V}) for B={B} queries and "
                         f"N={num_negatives} negatives, got {tuple(d_reps.shape)}")
    if in_batch_negatives:
        scores = q_reps @ d_reps.T
        labels = torch.arange(B, device=q_reps.device) * g
    else:
        scores = torch.einsum("bv,bgv->bg", q_reps, d_reps.view(B, g, V))
        labels = torch.zeros(B, dtype=torch.long, device=q_reps.device)
    return scores, labels


def infonce_loss(q_reps: torch.Tensor, d_reps: torch.Tensor, num_negatives: int = 0, temperature: float = 1.0,
                 in_batch_negatives: bool = True, gather: bool = False,
                 similarity: str = "dot") -> torch.Tensor:
    """InfoNCE loss, LACONIC eq. (2), averaged over queries.

    Args:
        q_reps: (B, |V|) float query representations.
        d_reps: (B·(1+N), |V|) float documents grouped per query ``[pos, neg_1..neg_N]``.
        num_negatives: N, hard negatives per query (0 for pairs).
        temperature: τ > 0; scores are divided by τ.
        in_batch_negatives: also use every other document of the (global) batch as a negative.
        gather: compute on the global batch of all workers (see the module docstring; multiply by the world
            size before ``backward`` under gradient-averaging strategies).
        similarity: ``"dot"`` (LACONIC's s(Q, D) = <Q, D>) or ``"cosine"`` (both sides L2-normalised first:
            LexSemBridge arXiv:2508.17858 Eq. 4, with τ = 0.02 in its training).

    Returns:
        0-dim float32 tensor: mean over the (global) queries of ``-log softmax(scores/τ)[label]``.

    Raises:
        ValueError: shapes do not match B, N or τ ≤ 0.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if gather:
        q_reps, d_reps = gather_with_grad(q_reps), gather_with_grad(d_reps)
    if similarity not in ("dot", "cosine"):
        raise ValueError(f"similarity must be 'dot' or 'cosine', got {similarity!r}")
    q_reps, d_reps = q_reps.float(), d_reps.float()
    if similarity == "cosine":
        q_reps, d_reps = F.normalize(q_reps, dim=-1), F.normalize(d_reps, dim=-1)
    scores, labels = infonce_scores(q_reps, d_reps, num_negatives, in_batch_negatives)
    return F.cross_entropy(scores / temperature, labels)
