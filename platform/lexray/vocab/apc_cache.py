"""A cache of APC results (:func:`lexray.vocab.apc.apply_apc`), keyed by everything that determines them.

Why: APC with a probe (``apc.target_rate`` or ``apc.per_term``) runs the unfused backbone over ``probe_docs``
documents and all of |V| once per *process that builds the encoder*. In the LACONIC default (SmolLM2-135M, 2
layers, 256 probe documents of 128 tokens, |V| = 49,152) that is about 2.3 TFLOP — by FLOPs (not timed) ~25 s on two cores, 50 s in a
one-thread encode actor — and the same numbers are computed again by the training worker, by each encode actor of
the zero-shot evaluation and by the driver that encodes its queries. With this cache the first process computes
the bias and every later one (other actors wait on a file lock instead of computing it alongside) loads it, so all
processes also use bit-identical biases, whatever their thread count.

Key: sha256 of the format version, the backbone's parameters and buffers (names, dtypes, shapes, bytes — after
:func:`lexray.models.head.ensure_output_bias`, so the starting bias is in it), the tokenizer's serialized state,
the encoder's settings, the APC settings, the probe texts and the probe length. Value: the output bias after APC
and :func:`apply_apc`'s report, in ``<cache_dir>/apc/<key>.pt`` (:func:`lexray.paths.cache_dir`), written to a
temporary file and renamed, so a reader never sees a partial entry. Delete the folder to reclaim the space.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from lexray.paths import cache_dir

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


def _tokenizer_state(tokenizer) -> bytes:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend.to_str().encode()
    return repr(sorted(tokenizer.get_vocab().items())).encode()


def apc_key(encoder, apc, texts: list[str], max_length: int | None) -> str:
    """The cache key (64 hex digits) of APC on ``encoder`` with settings ``apc`` over ``texts``."""
    h = hashlib.sha256()
    h.update(f"lexray-apc-v{FORMAT_VERSION}\0".encode())
    for name, t in sorted({**dict(encoder.backbone.named_parameters()),
                           **dict(encoder.backbone.named_buffers())}.items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    h.update(_tokenizer_state(encoder.tokenizer))
    settings = encoder.settings
    settings = settings.model_dump(mode="json") if hasattr(settings, "model_dump") else repr(settings)
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    h.update(json.dumps(apc.model_dump(mode="json"), sort_keys=True).encode())
    h.update(json.dumps([max_length, texts]).encode())
    return h.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (released by the kernel if the holder dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def cached_apc(key: str, bias: torch.Tensor, compute: Callable[[], dict], root: Path | None = None) -> dict:
    """Set ``bias`` (the head's output bias, (|V|,)) to APC's result: loaded from the entry ``key`` when it exists,
    else ``compute()`` (which changes ``bias`` in place and returns the report) is run and its result stored.
    Returns the report, with ``"cached": True`` when it was loaded. A broken entry is recomputed and replaced."""
    root = Path(root) if root is not None else cache_dir() / "apc"
    entry = root / f"{key}.pt"
    with _locked(root / f"{key}.lock"):
        if entry.is_file():
            try:
                saved = torch.load(entry, map_location="cpu", weights_only=True)
                if tuple(saved["bias"].shape) != tuple(bias.shape):
                    raise ValueError(f"bias shape {tuple(saved['bias'].shape)} != {tuple(bias.shape)}")
                with torch.no_grad():
                    bias.copy_(saved["bias"].to(bias.device, bias.dtype))
                info = dict(json.loads(saved["info"]), cached=True)
                log.info("APC: loaded from cache %s (shift %.4f)", entry, info.get("shift") or 0.0)
                return info
            except Exception as e:  # a damaged entry costs one recomputation, never a wrong bias
                log.warning("APC cache entry %s unreadable (%s): computing again", entry, e)
        info = compute()
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        torch.save({"bias": bias.detach().cpu().clone(), "info": json.dumps(info)}, tmp)
        os.replace(tmp, entry)
        return info
