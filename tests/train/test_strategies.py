import json

import pytest

from lexray.train.strategies import fill_deepspeed_config, make_strategy


def test_deepspeed_auto_values_filled_and_explicit_values_kept(tmp_path):
    cfg = fill_deepspeed_config(None, lr=1e-4, weight_decay=0.01, micro_batch=4, grad_accum=2, world=2,
                                max_grad_norm=1.0, bf16=False)
    assert cfg["train_batch_size"] == 16 and cfg["gradient_accumulation_steps"] == 2
    assert cfg["optimizer"]["params"]["lr"] == 1e-4 and cfg["optimizer"]["params"]["torch_adam"] is True
    assert cfg["bf16"]["enabled"] is False and cfg["zero_optimization"]["stage"] == 2
    p = tmp_path / "ds.json"
    p.write_text(json.dumps({"zero_optimization": {"stage": 3}, "optimizer": {"type": "AdamW",
                             "params": {"lr": 5e-5}}}))
    cfg = fill_deepspeed_config(p, lr=1e-4, weight_decay=0.0, micro_batch=1, grad_accum=1, world=1,
                                max_grad_norm=None, bf16=True)
    assert cfg["optimizer"]["params"]["lr"] == 5e-5 and cfg["bf16"]["enabled"] is True
    p.write_text("{not json")
    with pytest.raises(ValueError, match="ds.json: invalid JSON"):
        fill_deepspeed_config(p, lr=1, weight_decay=0, micro_batch=1, grad_accum=1, world=1, max_grad_norm=None,
                              bf16=False)


def test_unknown_strategy():
    with pytest.raises(ValueError, match="unknown train.strategy 'horovod'"):
        make_strategy("horovod", None)


def test_deepspeed_on_cpu_does_not_compile_its_shm_inference_op():
    """DeepSpeed's CPU accelerator JIT-compiles a shared-memory all-reduce op (g++, ~30 s) when its process group
    starts; it serves only tensor-parallel inference, so the strategy turns it off before ``deepspeed.initialize``.
    In a fresh process (DS_ACCELERATOR is read at DeepSpeed's import): the builder DeepSpeed would call returns None
    afterwards, where it would otherwise return the compiled module."""
    import os
    import subprocess
    import sys

    code = ("import importlib, lexray.train.strategies as s; s._no_shm_inference_op(); "
            "print(importlib.import_module('deepspeed.comm.torch').build_shm_op())")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "DS_ACCELERATOR": "cpu"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "None"
