"""Inference over a list of texts in length-sorted batches: the one loop behind ``SparseEncoder.encode`` and
``DenseEncoder.encode``.

Why length-sorted: a batch is padded to its longest text, so sorting by length (characters, a cheap proxy for
tokens) cuts the padding the model runs over; the output is put back in input order. Why a tokenless batch is
skipped: a tokenizer that adds no special token (SmolLM2's) gives an empty string zero positions, and a length-0
input fails inside the model's attention ("cannot reshape tensor of 0 elements"); such a text keeps the zero
vector, as it does when it is padded beside longer texts (its pooling mask is all zeros).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn


@torch.no_grad()
def encode_batched(model: nn.Module, texts: Sequence[str], kind: str, width: int, batch_size: int = 32,
                   device: str | torch.device | None = None, show_progress: bool = False,
                   finish: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Run ``model`` (with ``tokenize(texts, kind)`` and ``forward(**batch, kind=kind)``, e.g. an encoder) over
    ``texts`` without gradients.

    Args:
        width: the output's second dimension (|V| for a sparse encoder, d for a dense one).
        device: moves the model there first (it stays there); None keeps the model's device.
        finish: applied to each batch's (b, width) output before it is stored (e.g. L2 normalisation); default:
            cast to float32.

    Returns:
        (N, width) float32 on CPU, in input order; rows of tokenless texts are zero. The model's train/eval mode
        is restored afterwards.
    """
    was_training = model.training
    model.eval()
    if device is not None:
        model.to(device)
    dev = next(model.parameters()).device
    finish = finish or (lambda reps: reps.float())
    order = np.argsort([-len(t) for t in texts], kind="stable")
    out = torch.zeros(len(texts), width)
    it = range(0, len(texts), batch_size)
    if show_progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=f"encode {kind}s", unit="batch")
    try:
        for s in it:
            idx = order[s:s + batch_size]
            batch = model.tokenize([texts[i] for i in idx], kind)
            if batch["input_ids"].shape[1] == 0:  # every text of the batch is tokenless: zero vectors
                continue
            reps = model(**{k: v.to(dev) for k, v in batch.items()}, kind=kind)
            out[torch.as_tensor(idx)] = finish(reps).cpu()
    finally:
        if was_training:
            model.train()
    return out
