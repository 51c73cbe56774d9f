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
    ("minilm-none", 30, "none", 1e-3),
    ("minilm-slr-300-s1", 300, "slr", 1e-3),
    ("tiny-slr-heldout-1000-s1", 1000, "slr", 1e-3),
    ("tiny-slr-tied-heldout-1000-s1", 1000, "slr", 5e-4),
])
def test_a_rows_sets_give_its_schedule_and_bridge(name, steps, bridge, bridge_lr):
    """A row trains the schedule its name says (30, 300 or 1,000 steps, one checkpoint at the end) with its bridge
    and its bridge learning rate (that each key is set once: the test below, for every row)."""
    row = _row(name)
    cfg = load_config(row.recipe, list(row.sets))
    phase = cfg.train.phases[0]
    assert phase.max_steps == steps and cfg.train.checkpoint_every == steps
    assert cfg.model.dense.bridge == bridge and phase.bridge_lr == pytest.approx(bridge_lr)
    assert cfg.train.seed == (1 if name.endswith("-s1") else 0)
    assert (cfg.model.dense.bridge_align == "tied") == ("-tied" in name)


def test_row_names_are_unique():
    names = [r.name for r in lsb.rows()]
    assert len(names) == len(set(names))


def test_every_trained_row_sets_each_key_once():
    """No row relies on a later ``--set`` overriding an earlier one: its printed commands say what it trains."""
    for row in (r for r in lsb.rows() if r.kind == "train"):
        keys = [x.split("=", 1)[0] for x in row.sets]
        assert len(keys) == len(set(keys)), (row.name, row.sets)


def test_a_heldout_row_trains_on_the_tasks_heldout_pairs_and_a_claims_row_on_the_shared_negatives(tmp_path):
    """The held-out rows' command trains on title → abstract pairs of ``<out>/tasks/_heldout`` (in-batch negatives
    only), never on the mined claims file, even when one exists; a claims row picks that file up."""
    (tmp_path / lsb.NEGATIVES).write_text("")

    def trained(name: str):
        train_cmd = lsb.row_commands(_row(name), tmp_path)[0]
        sets = [train_cmd[i + 1] for i, a in enumerate(train_cmd) if a == "--set"]
        keys = [s.split("=", 1)[0] for s in sets]
        assert len(keys) == len(set(keys)), sets  # the printed command says what it trains
        return load_config(train_cmd[train_cmd.index("--config") + 1], sets).train.phases[0]

    phase = trained("tiny-slr-heldout-s1")
    assert phase.data == "title_abstract_pairs" and phase.num_negatives == 0 and phase.max_steps == 300
    assert phase.data_path == str(tmp_path / "tasks" / lsb.HELDOUT)
    phase = trained("tiny-slr-300")
    assert phase.data == "hard_negatives" and phase.data_path == str(tmp_path / lsb.NEGATIVES)
