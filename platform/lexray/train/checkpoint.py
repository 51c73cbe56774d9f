"""Trainer state in checkpoints: which phase, which step, where the phase's model came from.

A checkpoint folder (one per ``ray.train.report(..., checkpoint=...)``; Ray merges every rank's files into it):

* ``trainer_state.json`` (rank 0) — :class:`TrainerState`;
* ``model/`` (rank 0) — the merged encoder the phase in progress starts from (absent while phase 0 starts from
  ``cfg.model``, which the recipe itself names), or, in the final checkpoint, the trained encoder;
* the strategy's files (``dcp/`` + ``scheduler.pt`` for ddp/fsdp, ``deepspeed/`` for deepspeed), absent in
  phase-boundary checkpoints (``step == 0``: the next phase starts from ``model/``).

Why the model travels inside: a checkpoint that only pointed at an absolute folder on the node that wrote it could
not resume on another node of a cluster, nor after the run folder moved. So a checkpoint is self-contained: the
storage (a local folder, a shared mount, ``s3://``, ``gs://``) is the only thing a resumed run needs.

Resume = rerun with the same ``RunConfig(name, storage_path)``: Ray Train hands the latest checkpoint to
``ray.train.get_checkpoint()``; the loop copies ``model/`` to local disk (:func:`materialize`), rebuilds the
phase's model from it, loads model, optimizer and scheduler state, and continues at ``step`` — the data position
follows from it (``StepSampler.position``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_FILE = "trainer_state.json"
MODEL_DIR = "model"
"""Sub-folder of a checkpoint holding a saved encoder (``SparseEncoder.save_pretrained``)."""


@dataclass
class TrainerState:
    """phase: index of the phase in progress (== number of phases when done); step: optimizer steps completed
    in that phase; init_dir: local folder of the merged model the phase starts from (None = ``cfg.model``);
    phase_dirs: local folders of each completed phase's merged model, on the node that wrote them (informative:
    the checkpoint's ``model/`` is what resumes and evaluation read); done: all phases complete."""

    phase: int = 0
    step: int = 0
    init_dir: str | None = None
    phase_dirs: list[str] = field(default_factory=list)
    done: bool = False

    def save(self, directory: Path) -> Path:
        """Write ``trainer_state.json`` into ``directory``; returns its path."""
        p = Path(directory) / STATE_FILE
        p.write_text(json.dumps(asdict(self), indent=2))
        return p

    @classmethod
    def load(cls, directory: Path) -> TrainerState:
        """Read ``trainer_state.json`` from ``directory``.

        Raises:
            FileNotFoundError: not a lexray training checkpoint.
        """
        p = Path(directory) / STATE_FILE
        if not p.is_file():
            raise FileNotFoundError(f"{directory}: not a lexray training checkpoint (no {STATE_FILE})")
        return cls(**json.loads(p.read_text()))

    @property
    def model_dir(self) -> str | None:
        """The last completed phase's model folder (the run's result once ``done``), or None."""
        return self.phase_dirs[-1] if self.phase_dirs else None


def add_model(checkpoint_dir: Path, model_dir: str | Path | None) -> None:
    """Copy a saved encoder folder into ``<checkpoint_dir>/model`` (no-op for None). Rank 0 only."""
    if model_dir is None:
        return
    import shutil

    shutil.copytree(model_dir, Path(checkpoint_dir) / MODEL_DIR)


def materialize(checkpoint_dir: Path, dest: Path) -> Path | None:
    """Copy ``<checkpoint_dir>/model`` to local ``dest`` (once) and return ``dest``; None if the checkpoint has none.

    Several processes may do this at once (every worker on a node resumes together):
    :func:`lexray.fsio.publish_folder` makes that safe.
    """
    import shutil

    from lexray.fsio import publish_folder

    src = Path(checkpoint_dir) / MODEL_DIR
    if not src.is_dir():
        return None
    return publish_folder(dest, lambda tmp: shutil.copytree(src, tmp, dirs_exist_ok=True), "config.json")
