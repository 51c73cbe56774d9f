"""The phase runner with a toy objective (least squares on fixed data, ddp strategy, one process): the log and
checkpoint cadence, what reaches the reporter, resume after a failure reproducing the uninterrupted weights,
the stop check, and the phase-end save / state / report — what every objective plugged into it relies on."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from lexray.train.checkpoint import TrainerState
from lexray.train.metrics import MetricsSink, read_metrics
from lexray.train.runner import LocalReporter, PhaseSteps, resume_state, run_phase
from lexray.train.splade import SparsePhase
from lexray.train.strategies import make_strategy

TOTAL = 5


class LeastSquares(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, x, y):
        return ((self.lin(x) - y) ** 2).mean()


class ToyPhase(PhaseSteps):
    name = "toy"

    def __init__(self, stop_at: int | None = None):
        torch.manual_seed(0)
        self.module = LeastSquares()
        self.total = TOTAL
        self.strategy = make_strategy("ddp", self.module, lr=0.1, weight_decay=0.0, total_steps=TOTAL,
                                      warmup_ratio=0.0, max_grad_norm=None, device=torch.device("cpu"))
        g = torch.Generator().manual_seed(1)
        self.x, self.y = torch.randn(8, 3, generator=g), torch.randn(8, 1, generator=g)
        self.stop_at = stop_at
        self.saved: dict | None = None

    def step(self, step):
        loss = self.strategy.forward(self.x, self.y)
        self.strategy.backward(loss)
        return {"loss": float(loss.detach()), "grad_norm": self.strategy.step()}

    def record(self, out, done, elapsed):
        return {"phase": 0.0, "step": float(done), "loss": out["loss"], "grad_norm": out["grad_norm"]}

    def console_line(self, m):
        return f"[lexray] toy step {int(m['step'])}/{self.total} loss {m['loss']:.4f}"

    def check(self, m, done):
        return f"stopped at {done}" if done == self.stop_at else None

    def save(self, state_dict, out_dir):
        out_dir.mkdir(parents=True, exist_ok=True)
        torch.save(state_dict, out_dir / "weights.pt")


def run(tmp: Path, reporter, fault=None, stop_at=None) -> TrainerState:
    state = resume_state(reporter, TrainerState())
    sink = MetricsSink(tmp, tensorboard=False)

    def end(out):
        return TrainerState(1, 0, None, [str(out)], done=True), {"done": 1.0, "model_dir": str(out)}, None

    try:
        return run_phase(lambda: ToyPhase(stop_at), state, reporter, sink, tmp / "model", end, log_every=2,
                         checkpoint_every=2, fault_injection=fault)
    finally:
        sink.close()


def test_cadence_reports_and_phase_end(tmp_path, capsys):
    rep = LocalReporter(tmp_path / "ckpt")
    state = run(tmp_path, rep)
    assert [int(m["step"]) for m in read_metrics(tmp_path)] == [2, 4, 5]  # every log_every steps and the last
    assert [m.get("step", m.get("done")) for m in rep.metrics] == [2.0, 4.0, 1.0]  # checkpoints, then the end
    assert "[lexray] toy step 2/5 loss" in capsys.readouterr().out  # integer step counters
    assert state.done and state.model_dir == str(tmp_path / "model")
    assert TrainerState.load(rep.latest) == state
    ckpt4 = tmp_path / "ckpt" / "checkpoint_000002"
    assert TrainerState.load(ckpt4).step == 4 and (ckpt4 / "dcp").is_dir() and (ckpt4 / "scheduler.pt").is_file()


def test_resume_after_a_failure_gives_the_uninterrupted_weights(tmp_path, capsys):
    run(tmp_path / "plain", LocalReporter(tmp_path / "plain" / "ckpt"))
    rep = LocalReporter(tmp_path / "resumed" / "ckpt")
    fault = {"step": 3, "marker": str(tmp_path / "fault")}
    with pytest.raises(RuntimeError, match="injected failure after step 3"):
        run(tmp_path / "resumed", rep, fault)
    run(tmp_path / "resumed", rep, fault)  # the marker exists: no second failure
    assert "phase 'toy': resumed at step 2/5" in capsys.readouterr().out
    a = torch.load(tmp_path / "plain" / "model" / "weights.pt")
    b = torch.load(tmp_path / "resumed" / "model" / "weights.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [int(m["step"]) for m in read_metrics(tmp_path / "resumed")] == [2, 4, 5]


def test_check_stops_the_phase(tmp_path):
    rep = LocalReporter(tmp_path / "ckpt")
    state = run(tmp_path, rep, stop_at=4)
    assert state.done and state.step == 4 and state.model_dir is None
    assert rep.metrics[-1]["collapsed"] == 1.0 and rep.metrics[-1]["collapse_message"] == "stopped at 4"
    assert not (tmp_path / "model").exists()


def test_sparse_console_line_prints_integer_steps():
    m = {"step": 10.0, "loss": 1.0, "rank_loss": 0.5, "reg_q": 1.0, "reg_d": 2.0, "lambda_q": 1e-3,
         "lambda_d": 1e-3, "q_active": 30.0, "d_active": 90.0, "lr": 1e-4, "examples_per_s": 8.0}
    line = SparsePhase.console_line(SimpleNamespace(name="finetune", total=160), m)
    assert line.startswith("[lexray] finetune step 10/160 loss 1.0000")


KILLED_MID_REPORT = """
import os, signal, sys
from lexray.train.checkpoint import TrainerState
from lexray.train.runner import report_checkpoint

class Killed:
    def report(self, metrics, checkpoint_dir):  # the checkpoint is staged: the worker dies before Ray takes it
        os.kill(os.getpid(), signal.SIGKILL)

report_checkpoint(Killed(), {"step": 2.0}, TrainerState(0, 2))
"""


def test_a_worker_killed_mid_report_leaves_a_staging_folder_that_the_next_report_removes(tmp_path, monkeypatch):
    """Issue 24, resource hygiene: a worker SIGKILLed while its checkpoint was staged left ``lexray-ckpt-*`` (a
    model copy) in /tmp for good; the next report on the node removes the folders of dead writers only."""
    import os
    import subprocess
    import sys
    import tempfile

    from lexray.paths import REPO_ROOT
    from lexray.train.runner import report_checkpoint

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO_ROOT / "platform")}
    r = subprocess.run([sys.executable, "-c", KILLED_MID_REPORT], env=env, capture_output=True, text=True)
    assert r.returncode == -9, r.stderr[-2000:]
    left = list(tmp.glob("lexray-ckpt-*"))
    assert len(left) == 1 and (left[0] / "trainer_state.json").is_file()  # what the killed worker left
    alive = tmp / f"lexray-ckpt-{os.getpid()}-inflight"  # a live writer's folder (this process) is kept
    alive.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    report_checkpoint(LocalReporter(tmp_path / "ckpt"), {"step": 4.0}, TrainerState(0, 4))
    assert sorted(p.name for p in tmp.iterdir()) == [alive.name]
