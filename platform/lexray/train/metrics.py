"""Per-step training metrics, their sink (TensorBoard, JSONL, console) and the collapse guard.

Each objective's step functions (:class:`lexray.train.runner.PhaseSteps`) build their records and console line;
the sink writes them on rank 0. The SPLADE / LACONIC phase's names (:mod:`lexray.train.splade`, all floats):
``loss`` (the objective: ranking loss + λ_Q·reg_Q + λ_D·reg_D, global batch), ``rank_loss``, ``reg_q`` / ``reg_d``
(unweighted FLOPS or L1 terms), ``lambda_q`` / ``lambda_d`` (weights in force), ``q_active`` / ``d_active`` (mean
non-zero dimensions per query / document), ``q_active_frac`` / ``d_active_frac`` (÷|V|), ``lr``, ``grad_norm``
(before clipping), ``examples_per_s`` (global queries per second of wall time for the step), ``step`` (1-based
within the phase), ``phase``, ``epoch``. VT adaptation (:mod:`lexray.vocab.adapt`): ``loss`` (masked-LM
cross-entropy), ``lr``, ``grad_norm``, ``masked`` (masked positions on this worker), ``examples_per_s``.

Evaluations after training join the same run's TensorBoard (:func:`write_eval_scalars`): tags
``<label>/<split>/<metric>`` (e.g. ``eval-trained/test/nDCG@10``) and ``<label>/<split>/efficiency/<key>``. Dev
evaluations during training (a search's trials, :mod:`lexray.tune.dev`) are part of the step records
(``<phase>/dev_nDCG@10``, ...).
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


EVAL_EFFICIENCY = ("avg_query_nnz", "index_avg_nnz_per_doc", "index_flops", "search_qps")


def write_eval_scalars(run_dir: str | Path, record: dict, label: str, step: int | None = None) -> Path | None:
    """Add an evaluation's metrics (a ``metrics.json`` record, :mod:`lexray.eval.report`) to the training run's
    TensorBoard event files (``<run_dir>/tensorboard``, beside the step scalars) so one TensorBoard run shows
    the training curves and the scores they led to.

    Args:
        run_dir: the run folder of :class:`MetricsSink` (``TrainResult.run_dir``).
        record: ``{"split", "metrics": {name: value}, "efficiency": {...}}``.
        label: tag prefix, e.g. ``"eval-trained"`` or ``"eval-zero-shot"``.
        step: the global step to file the scalars at; default the last logged step of the run (0 without one).

    Returns:
        the TensorBoard folder, or None when TensorBoard cannot be imported (said once on the console).
    """
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception as e:  # noqa: BLE001 - TensorBoard is optional; say so
        print(f"[lexray] evaluation metrics not added to TensorBoard: {e}", flush=True)
        return None
    run_dir = Path(run_dir)
    if step is None:
        records = read_metrics(run_dir)
        step = int(records[-1].get("step", 0)) if records else 0
    split = record.get("split", "eval")
    writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
    try:
        for k, v in record.get("metrics", {}).items():
            writer.add_scalar(f"{label}/{split}/{k}", float(v), step)
        eff = record.get("efficiency", {})
        for k in EVAL_EFFICIENCY:
            if isinstance(eff.get(k), int | float):
                writer.add_scalar(f"{label}/{split}/efficiency/{k}", float(eff[k]), step)
    finally:
        writer.close()
    return run_dir / "tensorboard"
