"""The LexSemBridge ablation's rows (``lexray.eval.lsb_ablation``): what a row's commands train, read through the
same config loader the command uses."""

from __future__ import annotations

import pytest

from lexray.config import load_config
from lexray.eval import lsb_ablation as lsb


def _row(name: str) -> lsb.Row:
    return next(r for r in lsb.rows() if r.name == name)


@pytest.mark.parametrize(("name", "steps", "bridge", "bridge_lr"), [
    ("tiny-none", 30, "none", 1e-3),
    ("tiny-slr-300", 300, "slr", 1e-3),
    ("tiny-slr-300-s1", 300, "slr", 1e-3),
    ("tiny-slr-tied-300", 300, "slr", 5e-4),
])
def test_a_rows_sets_give_its_schedule_and_bridge(name, steps, bridge, bridge_lr):
    """The 300-step rows put ``max_steps=300`` after the recipe sets' 30: the later ``--set`` of a key wins, so the
    trained schedule is 300 steps (and the bridge's own settings stay the row's)."""
    row = _row(name)
    cfg = load_config(row.recipe, list(row.sets))
    phase = cfg.train.phases[0]
    assert phase.max_steps == steps and cfg.train.checkpoint_every == steps
    assert cfg.model.dense.bridge == bridge and phase.bridge_lr == pytest.approx(bridge_lr)
    assert cfg.train.seed == (1 if name.endswith("-s1") else 0)


def test_row_names_are_unique():
    names = [r.name for r in lsb.rows()]
    assert len(names) == len(set(names))
