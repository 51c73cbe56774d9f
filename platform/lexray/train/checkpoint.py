"""Trainer state in checkpoints: which phase, which step, where the phase's model came from.

A checkpoint folder (one per ``ray.train.report(..., checkpoint=...)``; Ray merges every rank's files into it):

* ``trainer_state.json`` (rank 0) — :class:`TrainerState`;
* the strategy's files (``dcp/`` + ``scheduler.pt`` for ddp/fsdp, ``deepspeed/`` for deepspeed), absent in
  phase-boundary checkpoints (``step == 0``: the next phase starts from ``init_dir``).

Resume = rerun with the same ``RunConfig(name, storage_path)``: Ray Train hands the latest checkpoint to
``ray.train.get_checkpoint()``; the loop rebuilds the phase's model from ``init_dir``, loads model, optimizer and
scheduler state, and continues at ``step`` — the data position follows from it (``StepSampler.position``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_FILE = "trainer_state.json"


@dataclass
class TrainerState:
    """phase: index of the phase in progress (== number of phases when done); step: optimizer steps completed
    in that phase; init_dir: merged model the phase starts from (None = ``cfg.model``); phase_dirs: merged
    model of each completed phase; done: all phases complete."""

    phase: int = 0
    step: int = 0
    init_dir: str | None = None
    phase_dirs: list[str] = field(default_factory=list)
    done: bool = False

    def save(self, directory: Path) -> Path:
        p = Path(directory) / STATE_FILE
        p.write_text(json.dumps(asdict(self), indent=2))
        return p

    @classmethod
    def load(cls, directory: Path) -> TrainerState:
        p = Path(directory) / STATE_FILE
        if not p.is_file():
            raise FileNotFoundError(f"{directory}: not a lexray training checkpoint (no {STATE_FILE})")
        return cls(**json.loads(p.read_text()))

    @property
    def model_dir(self) -> str | None:
        return self.phase_dirs[-1] if self.phase_dirs else None
