"""Search-space files (``tune_spaces/*.yaml``): what is searched, the objective, the search algorithm, the scheduler.

A space file::

    description: FLOPS regularization strength of SPLADE fine-tuning
    recipe: null                      # base recipe when lexray tune gets no --config (repo-relative); null = default
    params:                           # any dotted config key that --set takes, one distribution each
      train.phases.0.flops.lambda_q: {loguniform: [1.0e-5, 1.0e-1]}
      train.phases.0.flops.lambda_d: {loguniform: [1.0e-5, 1.0e-1]}
    objective:                        # the first is the main one (ASHA stops trials on it)
      - {metric: dev_nDCG@10, mode: max}
      - {metric: dev_flops, mode: min}
    search: {algorithm: optuna_nsga2, num_samples: 8, seed: 0}
    scheduler: {kind: asha, grace_period: 20, reduction_factor: 2}
    hybrid: bm25                      # optional: dev metrics of the BM25 hybrid (hybrid.* searchable; null = none)

Distributions: ``{loguniform: [low, high]}``, ``{uniform: [low, high]}``, ``{randint: [low, high]}`` (high
exclusive, as Ray Tune), ``{choice: [v, ...]}``, ``{grid: [v, ...]}`` (every value is run ``num_samples`` times;
only with ``random`` or ``grid`` search). Algorithms: ``random``, ``grid`` (Ray Tune's variant generator),
``optuna_tpe`` (Optuna's TPE, one objective), ``optuna_nsga2`` (Optuna's NSGA-II, several objectives) through
Ray Tune's Optuna integration. Schedulers: ``asha`` (asynchronous successive halving on the main objective, time
unit = optimizer step) or ``fifo``.

Validation (:func:`load_space` then :func:`check_space_against_config`) rejects unknown fields, empty or
inverted ranges, non-positive log-uniform bounds, grids under Optuna, several objectives under a
single-objective algorithm, unknown objective metrics, and any parameter whose key is not a config key or whose
bounds/values the config rejects (e.g. a negative λ) — every error names the file and the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lexray.config import ConfigError, LexrayConfig, apply_overrides, read_yaml

DEV_METRICS = ("dev_nDCG@10", "dev_MRR@10", "dev_R@100", "dev_flops", "dev_q_terms", "dev_d_terms",
               "dev_sparse_nDCG@10")
"""Metrics a dev evaluation reports (:class:`lexray.tune.dev.DevEvaluator`; ``dev_sparse_nDCG@10`` only with
``hybrid: bm25``, where the first three are the fused run's); objectives pick from these."""


class SpaceError(ValueError):
    """An invalid search-space file; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Distribution(_Strict):
    """Exactly one of the fields."""

    loguniform: tuple[float, float] | None = None
    uniform: tuple[float, float] | None = None
    randint: tuple[int, int] | None = None
    choice: list[Any] | None = None
    grid: list[Any] | None = None

    @model_validator(mode="after")
    def _one(self) -> Distribution:
        set_ = [k for k in ("loguniform", "uniform", "randint", "choice", "grid") if getattr(self, k) is not None]
        if len(set_) != 1:
            raise ValueError("give exactly one of loguniform, uniform, randint, choice, grid; got "
                             f"{set_ or 'none'}")
        kind = set_[0]
        if kind in ("loguniform", "uniform", "randint"):
            lo, hi = getattr(self, kind)
            if not lo < hi:
                raise ValueError(f"{kind}: low must be < high, got [{lo}, {hi}]")
            if kind == "loguniform" and lo <= 0:
                raise ValueError(f"loguniform: bounds must be > 0, got [{lo}, {hi}]")
        elif not getattr(self, kind):
            raise ValueError(f"{kind}: needs at least one value")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("loguniform", "uniform", "randint", "choice", "grid") if getattr(self, k) is not None)

    def probe_values(self) -> list[Any]:
        """Values the config must accept: both bounds of a range (randint: low and high − 1), every listed value."""
        v = getattr(self, self.kind)
        if self.kind == "randint":
            return [v[0], v[1] - 1]
        return list(v)

    def to_ray(self):
        from ray import tune

        v = getattr(self, self.kind)
        return {"loguniform": lambda: tune.loguniform(*v), "uniform": lambda: tune.uniform(*v),
                "randint": lambda: tune.randint(*v), "choice": lambda: tune.choice(v),
                "grid": lambda: tune.grid_search(v)}[self.kind]()


class Objective(_Strict):
    metric: str
    mode: Literal["max", "min"]

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in DEV_METRICS:
            raise ValueError(f"unknown metric {v!r}; one of {', '.join(DEV_METRICS)}")
        return v


class SearchSettings(_Strict):
    algorithm: Literal["random", "grid", "optuna_tpe", "optuna_nsga2"] = "random"
    num_samples: int = Field(8, ge=1, description="trials (with grid: repetitions of the whole grid)")
    seed: int = 0
    max_concurrent: int | None = Field(None, ge=1, description="None = derived from the cluster's CPUs/GPUs")


class SchedulerSettings(_Strict):
    kind: Literal["asha", "fifo"] = "asha"
    grace_period: int = Field(10, ge=1, description="steps every trial runs before ASHA may stop it")
    reduction_factor: float = Field(2.0, gt=1)
    max_t: int | None = Field(None, ge=1, description="steps; None = the last phase's max_steps")


class SearchSpace(_Strict):
    """One ``tune_spaces/*.yaml`` file (see the module docstring)."""

    description: str = ""
    recipe: str | None = None
    params: dict[str, Distribution]
    objective: list[Objective] = Field(default_factory=lambda: [Objective(metric="dev_nDCG@10", mode="max")])
    search: SearchSettings = Field(default_factory=SearchSettings)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    hybrid: Literal["bm25"] | None = Field(None, description="bm25: every dev evaluation fuses the trial's run "
                                           "with BM25 (cfg.hybrid, lexray.index.fusion) — CAI §3.3")
    path: str | None = Field(None, description="the file it was read from (set by load_space)")

    @model_validator(mode="before")
    @classmethod
    def _objective_forms(cls, data: Any) -> Any:
        # objective: {metric, mode}  or  [{metric, mode}, ...]
        if isinstance(data, dict) and isinstance(data.get("objective"), dict):
            data = {**data, "objective": [data["objective"]]}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> SearchSpace:
        if not self.params:
            raise ValueError("params: at least one parameter")
        if not self.objective:
            raise ValueError("objective: at least one")
        grids = [k for k, d in self.params.items() if d.kind == "grid"]
        alg = self.search.algorithm
        if grids and alg.startswith("optuna"):
            raise ValueError(f"params.{grids[0]}: grid needs search.algorithm random or grid, not {alg}")
        if alg == "grid" and not grids:
            raise ValueError("search.algorithm grid: no parameter is a grid")
        if len(self.objective) > 1 and alg == "optuna_tpe":
            raise ValueError("objective: several objectives need search.algorithm optuna_nsga2 (or random/grid, "
                             "which only record them); optuna_tpe optimizes one")
        fusion = [k for k in self.params if k.startswith("hybrid.")]
        if fusion and self.hybrid is None:
            raise ValueError(f"params.{fusion[0]}: a fusion parameter needs hybrid: bm25 (the dev evaluation "
                             "fuses with BM25 only then)")
        if self.hybrid is None and any(o.metric == "dev_sparse_nDCG@10" for o in self.objective):
            raise ValueError("objective: dev_sparse_nDCG@10 is reported only with hybrid: bm25")
        if alg == "optuna_nsga2" and len(self.objective) < 2:
            raise ValueError("search.algorithm optuna_nsga2: give at least two objectives")
        return self

    @property
    def main(self) -> Objective:
        return self.objective[0]

    @property
    def name(self) -> str:
        return Path(self.path).stem if self.path else "space"

    def param_space(self) -> dict[str, Any]:
        """Ray Tune ``param_space``: ``{dotted key: tune distribution}``."""
        return {k: d.to_ray() for k, d in self.params.items()}


def _format(err: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid search space:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-"))
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"  {loc or '<root>'}: {msg}")
    return "\n".join(lines)


def load_space(path: str | Path) -> SearchSpace:
    """Read and validate a space file (structure only; see :func:`check_space_against_config`).

    Raises:
        SpaceError: missing file, bad YAML, unknown field, bad distribution/objective/algorithm (file + key).
    """
    path = Path(path)
    try:
        data = read_yaml(path)  # the recipes' reader: YAML errors, a non-mapping, include:
    except ConfigError as e:
        raise SpaceError(str(e).replace("recipe not found", "search space not found")) from None
    try:
        return SearchSpace.model_validate({**data, "path": str(path)})
    except ValidationError as e:
        raise SpaceError(_format(e, str(path))) from None


def check_space_against_config(space: SearchSpace, cfg: LexrayConfig) -> None:
    """Every parameter must be a config key, and the config must accept every bound / listed value.

    Raises:
        SpaceError: names the space file, the key and the config's complaint (e.g. ``lambda_q: Input should be
            greater than or equal to 0``, or ``unknown key`` for a key the config does not have).
    """
    src = space.path or "search space"
    for key, dist in space.params.items():
        for value in dist.probe_values():
            try:
                apply_overrides(cfg, [(key, value)], source=f"{src}: params.{key}={value!r}")
            except ConfigError as e:
                raise SpaceError(str(e)) from None


def trial_config(cfg: LexrayConfig, params: dict[str, Any], source: str = "trial") -> LexrayConfig:
    """``cfg`` with one trial's sampled values set (raises :class:`lexray.config.ConfigError` naming the key)."""
    return apply_overrides(cfg, [(k, _plain(v)) for k, v in params.items()], source=source)


def _plain(v: Any) -> Any:
    """numpy scalars (from samplers) → Python scalars, so pydantic and YAML see plain values."""
    return v.item() if hasattr(v, "item") and not isinstance(v, list | dict | str) else v
