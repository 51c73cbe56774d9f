"""Distribution strategies behind one interface: DDP, FSDP2 and DeepSpeed ZeRO-2/3.

The phase runner and step functions (:mod:`lexray.train.runner`, :mod:`lexray.train.splade`,
:mod:`lexray.vocab.adapt`) only call :class:`Strategy` methods: ``forward`` (one call per micro-batch, with the
wrapped module's own arguments), ``backward`` inside ``sync(last)`` (gradient
synchronisation only on the last micro-batch of a step), ``step`` (clip, optimizer, LR schedule), ``save`` /
``load`` (every rank writes and reads its own files) and ``full_state_dict`` (the unsharded weights on rank 0, for
LoRA merging and ``save_pretrained``).

* ``ddp``: :class:`torch.nn.parallel.DistributedDataParallel` (as ``ray.train.torch.prepare_model`` would build;
  built directly so ``no_sync`` is available); torch AdamW.
* ``fsdp``: FSDP2 — :func:`torch.distributed.fsdp.fully_shard` on every transformer layer
  (``SparseEncoder.transformer_layers()``), then on the root; parameters become DTensor shards; torch AdamW on them.
* ``deepspeed``: ZeRO stage from a JSON file (default ``jobs/configs/deepspeed/zero2.json``). ``"auto"`` values are
  filled from the phase: lr, weight decay, micro batch, accumulation, clipping, bf16. On CPU the workers need
  ``DS_ACCELERATOR=cpu`` (set by :func:`lexray.train.loop.torch_trainer` in the workers' runtime env) and
  ``"torch_adam": true`` (DeepSpeed's own CPU Adam needs a ~130 s C++ build).

All three average gradients over the W workers; the loop compensates for that where a loss term is computed on the
gathered global batch (see :mod:`lexray.losses.infonce`).

Checkpoint files: ddp/fsdp write a ``torch.distributed.checkpoint`` (DCP) folder ``dcp/`` (each rank its
``__<rank>_0.distcp``, rank 0 the ``.metadata``; optimizer state included; re-shardable) plus ``scheduler.pt``;
deepspeed writes ``deepspeed/`` with ``engine.save_checkpoint`` (per-rank ZeRO shards; scheduler included).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from pathlib import Path

import torch
from torch import nn

from lexray.paths import REPO_ROOT

log = logging.getLogger(__name__)

DEFAULT_DEEPSPEED_CONFIG = REPO_ROOT / "jobs" / "configs" / "deepspeed" / "zero2.json"


def _dist():
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def rank() -> int:
    """This worker's rank in the default process group; 0 outside one (in-process runs, single worker)."""
    d = _dist()
    return d.get_rank() if d else 0


def world_size() -> int:
    """Workers in the default process group (W); 1 outside one."""
    d = _dist()
    return d.get_world_size() if d else 1


def barrier() -> None:
    """Wait for every worker (``dist.barrier``; gloo on CPU, NCCL on GPU); a no-op outside a process group."""
    d = _dist()
    if d:
        d.barrier()


def param_groups(module: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW groups: decay for matrices, none for biases and norm weights (1-D parameters); trainable only.

    A parameter tagged ``_lexray_lr`` (a float; e.g. the output bias of ``lora.train_output_bias``) gets a group of
    its own with that learning rate and no decay; the LR schedule scales it like the others.
    """
    decay, no_decay, own = [], [], []
    for p in module.parameters():
        if not p.requires_grad:
            continue
        if getattr(p, "_lexray_lr", None) is not None:
            own.append(p)
        else:
            (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    for p in own:
        groups.append({"params": [p], "weight_decay": 0.0, "lr": float(p._lexray_lr)})
    return groups


def warmup_steps_of(total_steps: int, warmup_ratio: float) -> int:
    """Linear warm-up steps of the cosine schedule: ``ceil(total_steps × warmup_ratio)``."""
    return int(math.ceil(total_steps * warmup_ratio))


class Strategy:
    """Common interface; see the module docstring. ``module`` is the (unwrapped) model whose ``forward`` is the
    objective's: e.g. ``forward(q, d) -> (q_reps (B, |V|), d_reps (B·(1+N), |V|))`` for SPLADE
    (:class:`lexray.train.splade.DualEncoder`), ``forward(inputs, labels) -> loss`` for VT adaptation."""

    name = "base"

    def __init__(self, module: nn.Module, *, lr: float, weight_decay: float, total_steps: int,
                 warmup_ratio: float, max_grad_norm: float | None, device: torch.device, **_):
        self.module = module
        self.device = device
        self.max_grad_norm = max_grad_norm
        self.total_steps = total_steps
        self.warmup = warmup_steps_of(total_steps, warmup_ratio)
        self.lr0, self.weight_decay = lr, weight_decay

    # --- to implement
    def forward(self, *args, **kwargs):
        """One forward of the wrapped model (DDP / FSDP / DeepSpeed engine) on a micro-batch: the module's own
        arguments and outputs (e.g. ``(q, d) -> (q_reps, d_reps)`` for the SPLADE objective)."""
        return self.model(*args, **kwargs)

    def sync(self, last: bool):
        """Context for one micro-batch's backward: gradients are synchronised across workers only when ``last``
        (DDP ``no_sync``, FSDP ``set_requires_gradient_sync``); a null context where there is nothing to skip."""
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        """Back-propagate ``loss`` (a scalar) into the trainable parameters' gradients."""
        loss.backward()

    def step(self) -> float:
        """End of an optimizer step: clip (``max_grad_norm``), optimizer and LR-schedule step, zero the
        gradients; returns the gradient norm before clipping (global over workers and shards)."""
        raise NotImplementedError

    def lr(self) -> float:
        """The learning rate in force (first parameter group), after the schedule's last step."""
        return float(self.optimizer.param_groups[0]["lr"])

    def save(self, directory: Path) -> None:
        """Every rank writes its part of model, optimizer and scheduler state under ``directory`` (a
        collective: all ranks must call it)."""
        raise NotImplementedError

    def load(self, directory: Path) -> None:
        """Every rank reads back what :meth:`save` wrote (a collective).

        Raises:
            FileNotFoundError: no checkpoint of this strategy under ``directory``.
        """
        raise NotImplementedError

    def full_state_dict(self) -> dict[str, torch.Tensor] | None:
        """The unsharded model weights on CPU, keys of the unwrapped module, on rank 0; None on the other
        ranks. A collective for fsdp and ZeRO-3 (every rank must call it)."""
        raise NotImplementedError


class TorchStrategy(Strategy):
    """What ddp and fsdp share: torch AdamW with the cosine schedule (built by the subclass once the module is
    wrapped), its step, and a ``torch.distributed.checkpoint`` of model + optimizer (see the module docstring).
    DeepSpeed brings its own optimizer and checkpoints."""

    def _make_optimizer(self) -> None:
        """torch AdamW over :func:`param_groups` + the cosine schedule with linear warm-up."""
        from transformers import get_cosine_schedule_with_warmup

        self.optimizer = torch.optim.AdamW(param_groups(self.module, self.weight_decay), lr=self.lr0)
        self.scheduler = get_cosine_schedule_with_warmup(self.optimizer, self.warmup, self.total_steps)

    def step(self) -> float:
        """:meth:`Strategy.step` with torch AdamW: clip (or only measure: ``inf``), step, schedule, zero; a DTensor
        norm (FSDP) is gathered first."""
        params = [p for p in self.module.parameters() if p.requires_grad]
        if self.max_grad_norm:
            norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)
        else:
            norm = torch.nn.utils.clip_grad_norm_(params, float("inf"))
        if hasattr(norm, "full_tensor"):
            norm = norm.full_tensor()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    def save(self, directory: Path) -> None:
        """``torch.distributed.checkpoint`` of model + optimizer in ``dcp/`` (each rank its shard; works with gloo
        on CPU), the scheduler in ``scheduler.pt`` (rank 0)."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(self.module, self.optimizer)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=str(directory / "dcp"))
        if rank() == 0:
            torch.save(self.scheduler.state_dict(), directory / "scheduler.pt")

    def load(self, directory: Path) -> None:
        """Load ``dcp/`` into this rank's model and optimizer (re-sharded to the current layout) and the
        scheduler from ``scheduler.pt``."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        msd, osd = get_state_dict(self.module, self.optimizer)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=str(directory / "dcp"))
        set_state_dict(self.module, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        self.scheduler.load_state_dict(torch.load(directory / "scheduler.pt", weights_only=False))


class DDPStrategy(TorchStrategy):
    """Every worker holds the full model; DDP all-reduces (averages) gradients, on CPU over gloo. With one
    worker the module is used unwrapped (no process group needed: the in-process references)."""

    name = "ddp"

    def __init__(self, module: nn.Module, **kw):
        super().__init__(module, **kw)
        module.to(self.device)
        if world_size() > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = DDP(module, device_ids=ids)
        else:
            self.model = module
        self._make_optimizer()

    def sync(self, last: bool):
        """DDP's ``no_sync`` on all but the last micro-batch (with one worker there is nothing to skip)."""
        if last or not hasattr(self.model, "no_sync"):
            return contextlib.nullcontext()
        return self.model.no_sync()

    def full_state_dict(self):
        """The module's state dict copied to CPU on rank 0 (every rank holds it; no collective)."""
        if rank() != 0:
            return None
        return {k: v.detach().cpu().clone() for k, v in self.module.state_dict().items()}


class FSDPStrategy(TorchStrategy):
    """FSDP2: parameters sharded per transformer layer (``layers``) and at the root, gathered per layer for
    forward and backward; gradients reduce-scattered (averaged). Needs a process group (gloo on CPU)."""

    name = "fsdp"

    def __init__(self, module: nn.Module, layers: list[nn.Module] | None = None, **kw):
        super().__init__(module, **kw)
        from torch.distributed.fsdp import fully_shard

        module.to(self.device)
        for layer in layers or []:
            fully_shard(layer)
        fully_shard(module)
        self.model = module
        self._make_optimizer()

    def sync(self, last: bool):
        """``set_requires_gradient_sync(last)``: gradients stay unreduced (and unsharded) until the last
        micro-batch."""
        self.model.set_requires_gradient_sync(last)
        return contextlib.nullcontext()

    def full_state_dict(self):
        """Gather the shards into full CPU tensors (a collective: every rank calls it); rank 0 keeps them."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = get_model_state_dict(self.module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return sd if rank() == 0 else None


def fill_deepspeed_config(path: str | Path | None, *, lr: float, weight_decay: float, micro_batch: int,
                          grad_accum: int, world: int, max_grad_norm: float | None, bf16: bool) -> dict:
    """Read a DeepSpeed JSON config and fill its ``"auto"`` values from the phase (explicit values win).

    Raises:
        FileNotFoundError / ValueError: missing file or invalid JSON (names the file).
    """
    from lexray.paths import resolve_local

    p = resolve_local(path) if path else DEFAULT_DEEPSPEED_CONFIG
    if p is None or not Path(p).is_file():
        raise FileNotFoundError(f"DeepSpeed config not found: {path}")
    try:
        cfg = json.loads(Path(p).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: invalid JSON: {e}") from None
    fills = {"train_micro_batch_size_per_gpu": micro_batch, "gradient_accumulation_steps": grad_accum,
             "train_batch_size": micro_batch * grad_accum * world,
             "gradient_clipping": float(max_grad_norm or 0.0)}
    for k, v in fills.items():
        if cfg.get(k, "auto") == "auto":
            cfg[k] = v
    opt = cfg.setdefault("optimizer", {"type": "AdamW", "params": {"torch_adam": True}})
    params = opt.setdefault("params", {})
    for k, v in (("lr", lr), ("weight_decay", weight_decay)):
        if params.get(k, "auto") == "auto":
            params[k] = v
    bf = cfg.setdefault("bf16", {})
    if bf.get("enabled", "auto") == "auto":
        bf["enabled"] = bool(bf16)
    return cfg


def _no_shm_inference_op() -> None:
    """On DeepSpeed's CPU accelerator, do not build its shared-memory all-reduce op.

    Why: DeepSpeed's ``TorchBackend`` JIT-compiles ``deepspeed_shm_comm`` with g++ when its process group starts
    (``deepspeed.comm.torch.build_shm_op``): about 30 s on both cores of the 2-core VM at the first run on a machine,
    and again whenever ninja finds the build out of date (it rebuilt twice in one day here, plausibly because two
    checkouts' include paths differ). The build also needs a C++ compiler on every worker machine. The op serves
    only ``inference_all_reduce`` (DeepSpeed's tensor-parallel inference); ZeRO training all-reduces through
    ``torch.distributed`` (gloo here), which is what lexray uses. The op is left alone on GPUs, and if a DeepSpeed
    release renames the function nothing changes.
    """
    from deepspeed.accelerator import get_accelerator

    if get_accelerator().device_name() != "cpu":
        return
    import importlib

    # not `import deepspeed.comm.torch as m`: deepspeed.comm's attribute `torch` is the torch package itself
    ds_torch_comm = importlib.import_module("deepspeed.comm.torch")
    if hasattr(ds_torch_comm, "build_shm_op"):
        ds_torch_comm.build_shm_op = lambda: None


class DeepSpeedStrategy(Strategy):
    """ZeRO via ``deepspeed.initialize``; the engine steps at accumulation boundaries it counts itself, so
    ``backward`` also calls ``engine.step()`` (a no-op except on the last micro-batch of a step).

    On CPU: ``DS_ACCELERATOR=cpu`` must be set before ``deepspeed`` is imported (the workers' runtime env) and the
    optimizer needs ``"torch_adam": true`` (the default config has it; DeepSpeed's CPU Adam is a ~130 s build).
    """

    name = "deepspeed"

    def __init__(self, module: nn.Module, *, deepspeed_config: str | None = None, micro_batch: int = 1,
                 grad_accum: int = 1, bf16: bool = False, **kw):
        super().__init__(module, **kw)
        import deepspeed
        from transformers import get_cosine_schedule_with_warmup

        cfg = fill_deepspeed_config(deepspeed_config, lr=self.lr0, weight_decay=self.weight_decay,
                                    micro_batch=micro_batch, grad_accum=grad_accum, world=world_size(),
                                    max_grad_norm=self.max_grad_norm, bf16=bf16)
        self.stage = int(cfg.get("zero_optimization", {}).get("stage", 0))
        warm, total = self.warmup, self.total_steps
        _no_shm_inference_op()
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=module, model_parameters=[p for p in module.parameters() if p.requires_grad], config=cfg,
            lr_scheduler=lambda opt: get_cosine_schedule_with_warmup(opt, warm, total))
        self.model = self.engine

    def backward(self, loss: torch.Tensor) -> None:
        """``engine.backward`` without DeepSpeed's 1/accumulation scaling (the loop scales its losses itself),
        then ``engine.step`` (applies the update only at the accumulation boundary)."""
        self.engine.backward(loss, scale_wrt_gas=False)
        self.engine.step()

    def step(self) -> float:
        """The update already happened in :meth:`backward`; returns the engine's global gradient norm (NaN when
        it reports none, e.g. before the first boundary)."""
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    def lr(self) -> float:
        """The engine's learning rate in force (its scheduler wraps the cosine schedule)."""
        return float(self.engine.get_lr()[0])

    def save(self, directory: Path) -> None:
        """``engine.save_checkpoint`` under ``deepspeed/`` (tag ``state``; per-rank ZeRO shards, scheduler)."""
        self.engine.save_checkpoint(str(directory / "deepspeed"), tag="state")

    def load(self, directory: Path) -> None:
        """``engine.load_checkpoint`` of ``deepspeed/`` tag ``state``.

        Raises:
            FileNotFoundError: no such checkpoint (DeepSpeed itself only logs a warning).
        """
        path, _ = self.engine.load_checkpoint(str(directory / "deepspeed"), tag="state")
        if path is None:
            raise FileNotFoundError(f"{directory / 'deepspeed'}: no DeepSpeed checkpoint with tag 'state'")

    def full_state_dict(self):
        """The module's weights on CPU, rank 0; under ZeRO-3 the partitioned parameters are gathered first (a
        collective: every rank calls it)."""
        mod = self.engine.module
        if self.stage == 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(mod.parameters()), modifier_rank=None):
                sd = {k: v.detach().cpu().clone() for k, v in mod.state_dict().items()} if rank() == 0 else None
            return sd
        return {k: v.detach().cpu().clone() for k, v in mod.state_dict().items()} if rank() == 0 else None


STRATEGIES = {"ddp": DDPStrategy, "fsdp": FSDPStrategy, "deepspeed": DeepSpeedStrategy}


def make_strategy(name: str, module: nn.Module, **kw) -> Strategy:
    """Build a strategy by name (``ddp``, ``fsdp``, ``deepspeed``); see the classes for keyword arguments.

    Raises:
        ValueError: unknown name.
    """
    if name not in STRATEGIES:
        raise ValueError(f"unknown train.strategy {name!r}; expected one of {sorted(STRATEGIES)}")
    return STRATEGIES[name](module, **kw)
