"""The VT Table 3 ablation's rows and commands (lexray.vocab.ablation, jobs/vt_ablation.py): every row's commands
are valid configurations of the real recipes, the native row trains the migration's source with the same APC,
the table reads what the training job writes, and finished rows are not rerun."""

from __future__ import annotations

import json

import pytest

from lexray.config import load_config
from lexray.vocab import ablation


def _sets(cmd):
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"]


@pytest.fixture(scope="module")
def rows():
    return ablation.table3_rows(ablation.native_overrides(ablation.MIGRATE_RECIPE))


def test_rows_have_table3_structure(rows):
    names = [r.name for r in rows]
    assert len(names) == len(set(names)) == 10
    assert rows[0].name == "native" and rows[0].migrate is None
    for init in ("semantic", "rand_new", "mean", "subtoken"):
        assert {f"{init}-direct", f"{init}-adapted"} <= set(names)
    no_apc = next(r for r in rows if r.name == "semantic-adapted-no-apc")
    assert "vt.apc.target_rate=null" in no_apc.migrate and "vt.apc.shift=null" in no_apc.migrate


def test_native_row_is_the_source_with_the_migrations_apc(rows):
    mig = load_config(ablation.MIGRATE_RECIPE)
    ft = load_config(ablation.FINETUNE_RECIPE, _sets(ablation.row_commands(rows[0], ablation.REPO_ROOT)[0]))
    assert ft.model.name_or_path == mig.model.name_or_path
    assert ft.model.num_layers == mig.model.num_layers
    assert ft.model.apc.target_rate == mig.vt.apc.target_rate and ft.model.apc.shift == mig.vt.apc.shift
    assert ft.model.apc.per_term == mig.vt.apc.per_term
    assert ft.model.apc.probe_docs == mig.vt.apc.probe_docs
    assert ft.model.apc.probe_max_length == mig.vt.apc.probe_max_length


def test_every_command_is_a_valid_config(rows, tmp_path):
    for r in rows:
        cmds = ablation.row_commands(r, tmp_path)
        assert len(cmds) == (1 if r.migrate is None else 2)
        train = load_config(ablation.FINETUNE_RECIPE, _sets(cmds[-1]))
        assert train.out_dir is not None and str(train.out_dir).endswith(f"{r.name}/ft")
        if r.migrate is not None:
            mig = load_config(ablation.MIGRATE_RECIPE, _sets(cmds[0]))
            assert train.model.name_or_path == str(tmp_path / r.name / "model")
            assert mig.vt.init == r.name.split("-")[0]
            assert mig.vt.adapt.enabled == ("adapted" in r.name)
            assert mig.vt.apc.enabled == (not r.name.endswith("no-apc"))
        # the shared training is the same for every row: only the model and the output folder differ
        assert {s.split("=")[0] for s in _sets(cmds[-1])} - {"model.name_or_path", "out_dir"} <= \
            {s.split("=")[0] for s in rows[0].finetune}


def test_collect_reads_the_trained_entry_and_skips_done_rows(rows, tmp_path):
    r = rows[1]
    ft = tmp_path / r.name / "ft"
    ft.mkdir(parents=True)
    entry = lambda nd: {"metrics": {"nDCG@10": nd, "R@100": 0.7}, "efficiency": {  # noqa: E731
        "avg_query_nnz": 30.0, "index_avg_nnz_per_doc": 300.0, "index_flops": 12.5}}
    (ft / "metrics.json").write_text(json.dumps(entry(0.3)))  # --no-zero-shot: one object
    assert ablation.collect(r, tmp_path, [1.0], [])["metrics"]["nDCG@10"] == 0.3
    (ft / "metrics.json").write_text(json.dumps([entry(0.1), entry(0.5)]))  # zero-shot, then trained
    res = ablation.collect(r, tmp_path, [60.0, 120.0], ablation.row_commands(r, tmp_path))
    assert res["metrics"]["nDCG@10"] == 0.5 and res["wall_s"] == 180.0
    table = ablation.markdown([res])
    assert "| VT Semantic-Init, Direct | 0.5000 | 0.7000 | 30.0 | 300.0 | 12.50 | 3.0 min |" in table
    (tmp_path / r.name / "row.json").write_text(json.dumps(res))
    assert ablation.run_row(r, tmp_path, log=lambda m: None) == res  # done: nothing runs (a run would fail here)
