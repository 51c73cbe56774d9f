"""A hyper-parameter search: dev split → Ray Tune trials (Ray Train inside) → trials table, Pareto front,
catalogue, one test evaluation of the chosen configurations (docs/tuning.md).

Output folder (``out``)::

    config.resolved.yaml, space.yaml          the base recipe and the search space as run
    dev/split.json, dev/corpus_ids.txt        the dev split (rule, seed, query ids) and its corpus
    hardneg/, bm25-index/                     training negatives mined without the dev queries; BM25 index
    tune/<experiment>/                        Ray Tune's experiment (state for resuming, per-trial result files)
    trials/<trial_id>/train/lexray/           each trial's metrics.jsonl, tensorboard/, merged encoder (models/)
    trials.csv, trials.parquet                one row per trial: params, last dev metrics, status, reason
    pareto.json, pareto.png                   dev nDCG@10 against dev FLOPS; the non-dominated finished trials
    catalogue/<name>.yaml, catalogue/index.json   per FLOPS budget the best config as a ready-to-run recipe
    test/<trial_id>/                          the test evaluation of the chosen entries (lexray.eval.pipeline)
    summary.json                              what the job printed

Resuming: running again with the same ``out`` and experiment name restores the experiment
(``Tuner.restore``): finished and failed trials are kept as they are, unfinished ones continue (their trainers
from their latest checkpoints), and the search adds trials up to ``num_samples``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lexray.config import LexrayConfig, save_config
from lexray.tune.space import SearchSpace, check_space_against_config
from lexray.tune.trainable import TRIAL_DONE, run_trial

log = logging.getLogger(__name__)

TRIAL_CPUS = 0.01
"""CPUs the function trainable itself holds; the real work runs in its trainer's workers."""


def derive_concurrency(cfg: LexrayConfig, resources: dict[str, float]) -> int:
    """Trials that fit at once: cluster CPUs ÷ CPUs per trial (``tune.cpus_per_trial`` or
    ``num_workers × cpus_per_worker``), and GPUs ÷ GPUs per trial when training uses GPUs; at least 1."""
    tc = cfg.train
    per_cpu = cfg.tune.cpus_per_trial or tc.num_workers * tc.cpus_per_worker
    n = int(math.floor(float(resources.get("CPU", 1)) / (per_cpu + TRIAL_CPUS) + 1e-9))
    if tc.use_gpu:
        n = min(n, int(float(resources.get("GPU", 0)) // tc.num_workers))
    return max(1, n)


def _searcher(space: SearchSpace):
    s = space.search
    if s.algorithm in ("random", "grid"):
        return None  # Ray Tune's BasicVariantGenerator
    from optuna.samplers import NSGAIISampler, TPESampler
    from ray.tune.search.optuna import OptunaSearch

    metrics = [o.metric for o in space.objective]
    modes = [o.mode for o in space.objective]
    if s.algorithm == "optuna_tpe":
        return OptunaSearch(metric=metrics[0], mode=modes[0], sampler=TPESampler(seed=s.seed))
    # population = half the trials (2..50): a small search still gets a bred second generation, not only the
    # random first one that NSGA-II's default population of 50 would make of it
    population = min(50, max(2, s.num_samples // 2))
    return OptunaSearch(metric=metrics, mode=modes, sampler=NSGAIISampler(population_size=population, seed=s.seed))


def _scheduler(space: SearchSpace, cfg: LexrayConfig):
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    sc = space.scheduler
    if sc.kind == "fifo":
        return FIFOScheduler()
    max_t = sc.max_t or cfg.train.phases[-1].max_steps or 10**6
    # stop_last_trials=False: a trial that reaches max_t finishes by itself (merged encoder, final report)
    return ASHAScheduler(time_attr="step", metric=space.main.metric, mode=space.main.mode, max_t=max_t,
                         grace_period=min(sc.grace_period, max_t), reduction_factor=sc.reduction_factor,
                         stop_last_trials=False)


class SearchInterrupted(RuntimeError):
    """Tune stopped before every trial ended (Ctrl-C); the experiment state is saved for a resume."""


@dataclass
class SearchResult:
    out: Path
    rows: list[dict]
    pareto: list[dict]
    catalogue: list[dict]
    seconds: float


def run_search(cfg: LexrayConfig, space: SearchSpace, out: str | Path, experiment: str | None = None,
               evaluate_test: bool = True, fault_injection: dict | None = None) -> SearchResult:
    """Run (or resume) the search of ``space`` over ``cfg`` and write every output (module docstring).
    ``fault_injection``: tests only, passed to every trial's training (:func:`lexray.train.runner.run_phase`);
    the trials share its marker, so the first trial to reach the step takes the fault.

    Raises:
        lexray.tune.space.SpaceError: a parameter the config does not accept (key named), before anything runs.
        lexray.tune.dev.DevSetError: training data containing dev queries.
    """
    import ray
    from ray import tune

    from lexray.ray_utils import init_ray
    from lexray.tune.dev import prepare_dev

    t0 = time.perf_counter()
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    check_space_against_config(space, cfg)
    cfg = cfg.model_copy(update={"out_dir": str(out)})
    (out / "space.yaml").write_text(yaml.safe_dump(space.model_dump(mode="json"), sort_keys=False))
    cfg, dev = prepare_dev(cfg, out)
    save_config(cfg, out)
    print(f"[lexray.tune] dev split: {len(dev.split.dev)} queries ({len(dev.split.train)} left for training), "
          f"dev corpus {len(dev.doc_ids)} documents -> {out / 'dev'}", flush=True)

    init_ray()
    concurrency = space.search.max_concurrent or derive_concurrency(cfg, ray.cluster_resources())
    experiment = experiment or space.name
    storage = out / "tune"
    trainable = tune.with_resources(
        tune.with_parameters(run_trial, base=cfg.model_dump(mode="json"), dev=dev, out=str(out),
                             hybrid=space.hybrid, fault_injection=fault_injection),
        {"cpu": TRIAL_CPUS})
    exp_path = storage / experiment
    if tune.Tuner.can_restore(str(exp_path)):
        print(f"[lexray.tune] resuming experiment {exp_path} (finished trials are kept)", flush=True)
        tuner = tune.Tuner.restore(str(exp_path), trainable=trainable, resume_unfinished=True,
                                   resume_errored=False, restart_errored=False, param_space=space.param_space())
    else:
        tuner = tune.Tuner(
            trainable, param_space=space.param_space(),
            tune_config=tune.TuneConfig(
                num_samples=space.search.num_samples, search_alg=_searcher(space), scheduler=_scheduler(space, cfg),
                max_concurrent_trials=concurrency, reuse_actors=False, trial_dirname_creator=lambda t: t.trial_id),
            run_config=tune.RunConfig(name=experiment, storage_path=str(storage),
                                      failure_config=tune.FailureConfig(max_failures=cfg.tune.max_failures,
                                                                      fail_fast=False),
                                      verbose=1))
    n_grid = math.prod(len(d.grid) for d in space.params.values() if d.kind == "grid")
    print(f"[lexray.tune] {space.search.num_samples * n_grid} trials of {space.name} ({space.search.algorithm}, "
          f"{space.scheduler.kind}), {concurrency} at a time; follow: Ray dashboard, "
          f"tensorboard --logdir {out / 'trials'}", flush=True)
    grid = tuner.fit()
    unfinished = len(grid) - grid.num_terminated - grid.num_errors
    if unfinished:  # Ctrl-C (Tune saved the experiment state): no outputs from half a search
        raise SearchInterrupted(f"search interrupted with {unfinished} unfinished trials; run the same command "
                                f"again to resume {exp_path}")
    rows = trial_rows(grid, space)
    from lexray.tune.report import write_outputs

    pareto, catalogue = write_outputs(rows, space, cfg, out, evaluate_test=evaluate_test)
    seconds = time.perf_counter() - t0
    summary = {"space": space.name, "experiment": str(exp_path), "trials": len(rows),
               "by_status": _count(r["status"] for r in rows), "pareto": pareto, "catalogue": catalogue,
               "seconds": seconds}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return SearchResult(out, rows, pareto, catalogue, seconds)


def _count(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _reason(err: Any) -> str:
    """The failure's own message: the last ``SomeError: message`` line of the (remote) traceback Tune keeps."""
    if err is None:
        return ""
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    named = [i for i, ln in enumerate(lines) if re.match(r"^[\w.]*(Error|Exception)\b.*:", ln)]
    if not named:
        return (lines[-1] if lines else repr(err))[:500]
    i = named[-1]
    text = lines[i] if not lines[i].endswith(":") else " ".join(lines[i:i + 3])  # "invalid configuration:" + key
    return text[:500]


def trial_rows(grid, space: SearchSpace) -> list[dict]:
    """One dict per trial: ``trial_id``, ``status`` (``finished`` / ``stopped`` by ASHA / ``failed``), ``reason``,
    ``param:<key>`` values, last ``dev_*`` metrics, ``step``, ``model_dir``."""
    rows = []
    for res in grid:
        m = dict(res.metrics or {})
        row: dict[str, Any] = {"trial_id": m.get("trial_id") or Path(res.path).name}
        for k in space.params:
            row[f"param:{k}"] = (res.config or {}).get(k)
        if res.error is not None:
            row["status"] = "failed"
            reason = _reason(res.error)
            row["reason"] = ("collapsed: " + reason) if "Collapsed" in str(res.error) else reason
        elif m.get(TRIAL_DONE):
            row["status"], row["reason"] = "finished", ""
        else:
            row["status"] = "stopped"
            step = m.get("step")  # Ray carries metrics as floats; the reason names a step count
            row["reason"] = f"stopped by {space.scheduler.kind} at step {int(step) if step is not None else '?'}"
        for k, v in m.items():
            if k.startswith("dev_") or k in ("step", "model_dir", "loss", "d_active", "q_active"):
                row[k] = v
        row["time_total_s"] = m.get("time_total_s")
        rows.append(row)
    rows.sort(key=lambda r: r["trial_id"])
    return rows
