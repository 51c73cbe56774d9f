"""Training examples, the step sampler (which examples form which step, on which worker) and tokenization.

An :class:`Example` is one query with its documents grouped ``[positive, negative_1 .. negative_N]`` and optional
teacher scores aligned with them — the layout :func:`lexray.losses.infonce_loss` and
:func:`lexray.losses.margin_mse_loss` expect after collation.

The sampler defines the data position used for resume: ``(epoch, step_in_epoch)``. Epoch e visits the examples in
``numpy.random.default_rng([seed, e]).permutation(n)``; step s of the epoch is the global batch
``perm[s·G : (s+1)·G]`` (G = global batch size; a trailing partial batch is dropped and counted). Worker r of W
takes the contiguous slice ``[r·G/W, (r+1)·G/W)`` of it and splits that into ``grad_accum`` micro-batches. So the
global batch of a step depends only on (seed, epoch, step) — not on W or the accumulation — which is what makes a
2-worker run comparable to a 1-worker run and makes resume exact: the checkpoint stores (epoch, step_in_epoch) and
the permutation is recomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Example:
    """One training query: ``docs[0]`` is the positive, ``docs[1:]`` the N negatives (none for pairs).

    ``teacher`` (optional) holds teacher scores aligned with ``docs`` (MarginMSE).
    """

    query: str
    docs: list[str]
    teacher: list[float] | None = None


@dataclass
class Batch:
    """A tokenized micro-batch.

    ``queries``/``docs``: the encoder's ``tokenize`` output (input_ids, attention_mask (B, L) long; pool_mask
    (B, L) bool) for B queries and B·(1+N) documents grouped per query. ``teacher``: (B, 1+N) float32 or None.
    """

    queries: dict[str, torch.Tensor]
    docs: dict[str, torch.Tensor]
    teacher: torch.Tensor | None
    n_queries: int
    num_negatives: int


def collate(examples: Sequence[Example], tokenize: Callable[..., dict[str, torch.Tensor]],
            query_max_length: int | None = None, doc_max_length: int | None = None) -> Batch:
    """Tokenize a micro-batch with the encoder's ``tokenize(texts, kind, max_length)``.

    Raises:
        ValueError: examples with different numbers of documents, or teacher scores on some examples only.
    """
    if not examples:
        raise ValueError("cannot collate an empty micro-batch")
    g = len(examples[0].docs)
    if any(len(e.docs) != g for e in examples):
        raise ValueError(f"every example of a batch needs the same number of documents; got "
                         f"{sorted({len(e.docs) for e in examples})}")
    has_t = [e.teacher is not None for e in examples]
    if any(has_t) and not all(has_t):
        raise ValueError("teacher scores present on some examples of the batch only")
    queries = tokenize([e.query for e in examples], kind="query", max_length=query_max_length)
    docs = tokenize([d for e in examples for d in e.docs], kind="document", max_length=doc_max_length)
    teacher = torch.tensor([e.teacher for e in examples], dtype=torch.float32) if all(has_t) else None
    return Batch(queries, docs, teacher, len(examples), g - 1)


class StepSampler:
    """Deterministic assignment of examples to (epoch, step, worker, micro-batch); see the module docstring.

    Args:
        n_examples: dataset size. global_batch_size: G, examples per optimizer step over all workers.
        world_size: W (must divide G). grad_accum: K micro-batches per worker per step (must divide G/W).
        seed: permutation seed.

    Raises:
        ValueError: G not divisible by W·K, or fewer examples than one global batch.
    """

    def __init__(self, n_examples: int, global_batch_size: int, world_size: int = 1, grad_accum: int = 1,
                 seed: int = 0):
        if global_batch_size % (world_size * grad_accum):
            raise ValueError(f"global_batch_size {global_batch_size} must be divisible by num_workers × grad_accum "
                             f"= {world_size} × {grad_accum}")
        if n_examples < global_batch_size:
            raise ValueError(f"only {n_examples} training examples, fewer than one global batch of "
                             f"{global_batch_size}")
        self.n, self.G, self.W, self.K, self.seed = n_examples, global_batch_size, world_size, grad_accum, seed
        self.steps_per_epoch = n_examples // global_batch_size
        self.dropped_per_epoch = n_examples - self.steps_per_epoch * global_batch_size
        self._perm_epoch: int | None = None
        self._perm: np.ndarray | None = None

    @property
    def micro_batch_size(self) -> int:
        return self.G // (self.W * self.K)

    def permutation(self, epoch: int) -> np.ndarray:
        if self._perm_epoch != epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            self._perm_epoch = epoch
        return self._perm

    def global_indices(self, epoch: int, step_in_epoch: int) -> np.ndarray:
        """Example indices of the global batch of a step (length G)."""
        if not 0 <= step_in_epoch < self.steps_per_epoch:
            raise IndexError(f"step {step_in_epoch} outside epoch of {self.steps_per_epoch} steps")
        return self.permutation(epoch)[step_in_epoch * self.G:(step_in_epoch + 1) * self.G]

    def micro_batches(self, epoch: int, step_in_epoch: int, rank: int) -> list[np.ndarray]:
        """The K micro-batches (index arrays of G/(W·K)) of worker ``rank`` for a step."""
        idx = self.global_indices(epoch, step_in_epoch)
        per = self.G // self.W
        mine = idx[rank * per:(rank + 1) * per]
        m = self.micro_batch_size
        return [mine[k * m:(k + 1) * m] for k in range(self.K)]

    def position(self, global_step: int) -> tuple[int, int]:
        """``(epoch, step_in_epoch)`` of the 0-based optimizer step ``global_step``."""
        return divmod(global_step, self.steps_per_epoch)
