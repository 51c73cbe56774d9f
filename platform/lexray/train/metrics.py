"""Per-step training metrics, their sink (TensorBoard, JSONL, console) and the collapse guard.

Each objective's step functions (:class:`lexray.train.runner.PhaseSteps`) build their records and console line;
the sink writes them on rank 0. The SPLADE / LACONIC phase's names (:mod:`lexray.train.splade`, all floats):
``loss`` (the objective: ranking loss + λ_Q·reg_Q + λ_D·reg_D, global batch), ``rank_loss``, ``reg_q`` / ``reg_d``
(unweighted FLOPS or L1 terms), ``lambda_q`` / ``lambda_d`` (weights in force), ``q_active`` / ``d_active`` (mean
non-zero dimensions per query / document), ``q_active_frac`` / ``d_active_frac`` (÷|V|), ``lr``, ``grad_norm``
(before clipping), ``examples_per_s`` (global queries per second of wall time for the step), ``step`` (1-based
within the phase), ``phase``, ``epoch``. VT adaptation (:mod:`lexray.vocab.adapt`): ``loss`` (masked-LM
cross-entropy), ``lr``, ``grad_norm``, ``masked`` (masked positions on this worker), ``examples_per_s``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path


class TrainingCollapsedError(RuntimeError):
    """Document representations collapsed (≈0 or ≈|V| active dimensions) for too many logged steps."""


class CollapseGuard:
    """Stops a run whose document representations collapse.

    Collapse = mean active dimensions per document ``< min_active`` (all-zero representations: every score is 0
    and the ranking loss can no longer improve — typically λ too large) or ``> max_fraction·|V|`` (no sparsity —
    unindexable; typically λ too small or warm-up too long) for ``patience`` *consecutive logged* steps. A single
    excursion (e.g. right after initialisation, when random models activate many terms) does not stop the run.
    """

    def __init__(self, vocab_size: int, min_active: float = 1.0, max_fraction: float = 0.5, patience: int = 20):
        self.vocab_size, self.min_active, self.max_fraction = vocab_size, min_active, max_fraction
        self.patience = max(1, patience)
        self.bad = 0

    def update(self, d_active: float, step: int) -> str | None:
        """Feed one logged step; returns the error message once collapse has lasted ``patience`` steps."""
        low = d_active < self.min_active
        high = d_active > self.max_fraction * self.vocab_size
        self.bad = self.bad + 1 if (low or high) else 0
        if self.bad >= self.patience:
            what = (f"below {self.min_active} (representations are empty: lower lambda_d or lengthen the FLOPS "
                    f"warm-up)" if low else
                    f"above {self.max_fraction:.0%} of |V| = {self.vocab_size} (no sparsity: raise lambda_d)")
            return (f"training collapsed at step {step}: mean active dimensions per document = {d_active:.1f}, "
                    f"{what}, for {self.bad} consecutive logged steps")
        return None


class MetricsSink:
    """Rank-0 sinks: TensorBoard (``<run_dir>/tensorboard``), ``<run_dir>/metrics.jsonl`` and a console line."""

    def __init__(self, run_dir: Path, enabled: bool = True, tensorboard: bool = True):
        self.enabled = enabled
        self.writer = None
        self.jsonl = None
        if not enabled:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        self.jsonl = open(run_dir / "metrics.jsonl", "a", encoding="utf-8")
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
            except Exception as e:  # noqa: BLE001 - TensorBoard is optional; say so once
                print(f"[lexray] TensorBoard disabled: {e}", flush=True)
        self.t0 = time.time()

    def write(self, m: dict, global_step: int, phase_name: str, line: str) -> None:
        """Append the record ``m`` to ``metrics.jsonl``, its numbers to TensorBoard (tags ``<phase_name>/<key>``,
        not ``step`` / ``phase``) and print ``line`` (the objective's console line, :mod:`lexray.train.runner`)."""
        if not self.enabled:
            return
        self.jsonl.write(json.dumps(m) + "\n")
        self.jsonl.flush()
        if self.writer is not None:
            for k, v in m.items():
                if isinstance(v, int | float) and k not in ("step", "phase"):
                    self.writer.add_scalar(f"{phase_name}/{k}", v, global_step)
            self.writer.flush()
        print(line, flush=True)

    def close(self) -> None:
        if self.jsonl:
            self.jsonl.close()
        if self.writer:
            self.writer.close()


def read_metrics(run_dir: str | Path) -> list[dict]:
    """All metric records written to ``<run_dir>/metrics.jsonl`` (in order; resumed runs append)."""
    p = Path(run_dir) / "metrics.jsonl"
    if not p.is_file():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
