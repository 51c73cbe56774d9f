"""The LACONIC compute curve (arXiv:2601.01684 trains Llama-3 1B-8B for GPU-days; this asks what depth and steps
buy on SmolLM2-135M on a 2-core CPU): the main job's recipe (jobs/configs/laconic-smollm2-cpu.yaml) rerun over
kept layers × training steps, each cell one plain command (``lexray laconic-curve --dry-run`` prints them) through
the one table runner (:mod:`lexray.ablation`).

Why depth is the axis: per token one SmolLM2 layer costs 2 × 3.54M = 7.1 MFLOP (q, o 576×576; k, v 576×192; MLP
3 × 576×1,536; attention scores add 4·L·576 ≈ 0.3 MFLOP at L = 128) against 2 × 576 × 21,201 = 24.4 MFLOP for the
head restricted to SciFact's output vocabulary, so 8 layers cost about 2× the 2-layer model, not 4×, and all 30
about 6×; and a truncated stack feeds the LM head features it was never trained on.

A cell's steps are split between the two phases in the recipe's own proportion (the default's 40 + 280 since the
default-budget grid of 2026-11-27, docs/recipes.md: 1,280 = 160 + 1,120; at 1,440 steps the long grid scored a 1:8
split below a 1:3 one on one seed, so long cells follow the default, not necessarily their best split). Each cell
records zero-shot and trained SciFact test metrics, query and document terms, and where the wall time went: the
zero-shot encode (0 when the evaluation cache answered), phase 1 and phase 2 (from the training log's wall clock)
and the trained model's encode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lexray import ablation
from lexray.eval.cache import MARKER
from lexray.paths import REPO_ROOT

TRAIN_JOB = REPO_ROOT / "jobs" / "train_laconic.py"
RECIPE = REPO_ROOT / "jobs" / "configs" / "laconic-smollm2-cpu.yaml"
LAYERS = (2, 4, 8, 16, 30)
STEPS = (320, 1280)


@dataclass(frozen=True)
class Cell:
    """One cell: the first ``layers`` of the backbone, ``steps`` training steps in all, ``seed`` (``train.seed``;
    None = the recipe's)."""

    layers: int
    steps: int
    seed: int | None = None

    @property
    def name(self) -> str:
        return f"L{self.layers}-S{self.steps}" + (f"-seed{self.seed}" if self.seed is not None else "")

    def phase_steps(self, recipe: Path = RECIPE) -> tuple[int, int]:
        """``self.steps`` split between pre-finetuning and finetuning in ``recipe``'s proportion (its two phases'
        ``max_steps``; the default's 40 + 280 gives 100 + 700 for 800 steps). Raises ValueError for a recipe
        without exactly two phases with ``max_steps``."""
        from lexray.config import load_config

        steps = [p.max_steps for p in load_config(str(recipe)).train.phases]
        if len(steps) != 2 or None in steps:
            raise ValueError(f"{recipe}: the compute curve needs two phases with max_steps, got {steps}")
        first = round(self.steps * steps[0] / (steps[0] + steps[1]))
        return first, self.steps - first


def cells(layers=LAYERS, steps=STEPS, seeds: tuple[int | None, ...] = (None,)) -> list[Cell]:
    """Cells in table order: by steps, then depth, then seed (cheapest first, so a partial table is useful)."""
    return [Cell(n, s, seed) for s in steps for n in layers for seed in seeds]


def parse_cell(name: str) -> Cell:
    """``L4-S200`` or ``L2-S200-seed1`` → :class:`Cell`. Raises ValueError on any other form."""
    parts = name.split("-")
    try:
        if len(parts) not in (2, 3) or parts[0][0] != "L" or parts[1][0] != "S":
            raise ValueError
        seed = None
        if len(parts) == 3:
            if not parts[2].startswith("seed"):
                raise ValueError
            seed = int(parts[2][4:])
        cell = Cell(int(parts[0][1:]), int(parts[1][1:]), seed)
    except (ValueError, IndexError):
        raise ValueError(f"cell {name!r}: expected L<layers>-S<steps>[-seed<n>], e.g. L4-S200") from None
    if cell.layers < 1 or cell.steps < 5:
        raise ValueError(f"cell {name!r}: layers must be >= 1 and steps >= 5")
    return cell


def cell_commands(cell: Cell, out: Path, recipe: Path = RECIPE, sets: tuple[str, ...] = ()) -> list[list[str]]:
    """The cell's one command: the main job with the cell's depth, steps and seed, into ``out/<cell>/``."""
    p1, p2 = cell.phase_steps(recipe)
    cell_sets = [f"model.num_layers={cell.layers}", f"train.phases.0.max_steps={p1}",
                 f"train.phases.1.max_steps={p2}"]
    if cell.seed is not None:
        cell_sets.append(f"train.seed={cell.seed}")
    return [["python", str(TRAIN_JOB), "--config", str(recipe),
             *ablation.set_args([*cell_sets, *sets, f"out_dir={out / cell.name}"])]]


def phase_seconds(train_log: Path) -> list[float]:
    """Wall seconds of each phase from the training log (``metrics.jsonl``: ``phase``, the step within the phase,
    ``wall_time`` and ``step_time_s`` every ``log_every`` steps): the last log's wall clock minus the first's,
    plus the steps before the first log at the first log's step time."""
    recs = [json.loads(line) for line in train_log.read_text().splitlines() if line.strip()]
    recs = [r for r in recs if "wall_time" in r and "phase" in r]
    out = []
    for ph in sorted({int(r["phase"]) for r in recs}):
        rs = [r for r in recs if int(r["phase"]) == ph]
        out.append(rs[-1]["wall_time"] - rs[0]["wall_time"] + rs[0]["step"] * rs[0].get("step_time_s", 0.0))
    return out


def collect(cell: Cell, out: Path, seconds: list[float], recipe_name: str = "laconic-smollm2-cpu") -> dict:
    """The cell's record from ``out/<cell>/metrics.json`` (zero-shot, trained) and its training log."""
    d = out / cell.name
    zero, trained = ablation.metrics_entries(d / "metrics.json")[-2:]
    logs = sorted((d / "train").glob("*/lexray/metrics.jsonl"))
    ph = phase_seconds(logs[0]) if logs else []

    def row(e: dict) -> dict:
        eff = e["efficiency"]
        return {"metrics": e["metrics"], "avg_query_terms": eff.get("avg_query_nnz"),
                "avg_doc_terms": eff.get("index_avg_nnz_per_doc"), "encode_s": eff.get("encode_seconds", 0.0)}

    z = row(zero)
    marker = d / "eval" / "zero-shot" / MARKER
    if marker.is_file() and json.loads(marker.read_text()).get("hit"):
        z["encode_s"] = 0.0  # the evaluation cache answered: this cell paid nothing for it
    return {"cell": cell.name, "layers": cell.layers, "steps": cell.steps, "seed": cell.seed,
            "zero_shot": z, "trained": row(trained), "phase_s": ph, "wall_s": sum(seconds)}


def markdown(results: list[dict]) -> str:
    """The curve: per cell zero-shot and trained nDCG@10 / R@100, terms, and where the wall time went."""
    lines = ["| layers | steps | seed | zero-shot nDCG@10 | trained nDCG@10 | trained R@100 | query terms | "
             "document terms | wall min | zero-shot encode min | phase 1 min | phase 2 min | trained encode min |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        z, t, ph = r["zero_shot"], r["trained"], r["phase_s"] + [0.0, 0.0]
        lines.append(f"| {r['layers']} | {r['steps']} | {r['seed'] if r['seed'] is not None else 'recipe'} | "
                     f"{z['metrics']['nDCG@10']:.4f} | {t['metrics']['nDCG@10']:.4f} | {t['metrics']['R@100']:.4f} | "
                     f"{t['avg_query_terms']:.1f} | {t['avg_doc_terms']:.1f} | {r['wall_s'] / 60:.1f} | "
                     f"{z['encode_s'] / 60:.1f} | {ph[0] / 60:.1f} | {ph[1] / 60:.1f} | {t['encode_s'] / 60:.1f} |")
    return "\n".join(lines)
