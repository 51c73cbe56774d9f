"""One trial: a Ray Train ``TorchTrainer`` fitted inside a Ray Tune function trainable.

Why not ``Tuner(TorchTrainer)``: under Ray Train V2 (the default) a trainer is no longer a Tune trainable; the
supported pattern is a function trainable that builds and fits the trainer itself and relays the workers'
reports to Tune (``ray.tune.integration.ray_train.TuneReportCallback``). :class:`DevReportCallback` relays only
the reports that carry a dev evaluation, so every Tune result has the objective metrics and ASHA can compare
trials at the same step.

Each trial runs in its own Tune actor process (``reuse_actors=False`` in :mod:`lexray.tune.search`), so the
trainer is the first and only Ray Train fit of that process; the driver itself never fits (docs/tuning.md on
the "second fit in one driver" hang). The trainable holds ``{"CPU": 0.01}``; the trainer's workers hold the
real CPUs, and the search's concurrency is derived from them.

Storage per trial: ``<out>/trials/<trial_id>/`` — Ray Train's run ``train/`` with ``lexray/metrics.jsonl``,
``lexray/tensorboard/`` and the merged encoder in ``lexray/models/``. Re-running the trial (a restored search)
resumes the trainer from its latest checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune.integration.ray_train import TuneReportCallback

from lexray.config import LexrayConfig
from lexray.tune.dev import DevEvaluator, DevSet
from lexray.tune.space import trial_config

TRIAL_DONE = "trial_done"


class DevReportCallback(TuneReportCallback):
    """Relay to Ray Tune only the reports that carry a dev evaluation (numbers only, no checkpoint)."""

    def after_report(self, run_context, metrics, checkpoint):
        m = metrics[0]
        if "dev_nDCG@10" not in m:
            return
        self._training_actor_item_queue.put({k: v for k, v in m.items() if isinstance(v, int | float)})


def trial_dir(out: str | Path, trial_id: str) -> Path:
    return Path(out) / "trials" / trial_id


def run_trial(params: dict[str, Any], *, base: dict, dev: DevSet, out: str, hybrid: str | None = None,
              fault_injection: dict | None = None) -> None:
    """The function trainable: config = ``base`` + ``params`` → fit → final report with ``model_dir``.
    ``hybrid="bm25"`` (the space's ``hybrid``): the dev evaluations fuse with BM25 by the trial's ``hybrid.*``.
    ``fault_injection``: tests only (:func:`lexray.tune.search.run_search`).

    Raises (the trial is then recorded as failed, with the message as its reason):
        lexray.config.ConfigError: a sampled value the config rejects (names the key).
        lexray.train.metrics.TrainingCollapsedError: the collapse guard stopped training.
        ray.train.TrainingFailedError: a worker failed.
    """
    import ray.tune

    from lexray.train.loop import build_trainer, train_result, training_run_dir

    ctx = ray.tune.get_context()
    trial_id = ctx.get_trial_id()
    cfg = trial_config(LexrayConfig.model_validate(base), params, source=f"trial {trial_id}")
    storage = trial_dir(out, trial_id)
    evaluator = DevEvaluator(dev, every=cfg.tune.eval_every, batch_size=cfg.tune.eval_batch_size,
                             hybrid=cfg.hybrid if hybrid else None)
    trainer = build_trainer(cfg, name="train", storage_path=storage, evaluator=evaluator,
                            callbacks=[DevReportCallback()], fault_injection=fault_injection)
    result = train_result(trainer.fit(), training_run_dir(cfg, "train", storage)[2])
    last = next((m for m in reversed(result.history) if "dev_nDCG@10" in m), {})
    final = {k: v for k, v in last.items() if isinstance(v, int | float)}
    final.update({TRIAL_DONE: 1.0, "model_dir": str(result.model_dir)})
    ray.tune.report(final)
