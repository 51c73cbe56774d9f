"""The LACONIC compute curve (lexray.train.curve, lexray laconic-curve): every cell's command is the main job's
recipe with the cell's depth, the recipe's step split and seed; the record reads zero-shot and trained metrics and
the phases' wall time; a cached zero-shot evaluation counts as no encode time."""

import json

import pytest

from lexray.config import load_config
from lexray.train import curve


def _sets(cmd):
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"]


def test_cells_and_parse():
    cells = curve.cells()
    assert [c.name for c in cells[:2]] == ["L2-S320", "L4-S320"] and len(cells) == 10
    assert curve.parse_cell("L8-S800-seed1") == curve.Cell(8, 800, 1)
    for bad in ("L4", "X4-S200", "L4-S200-s1", "L0-S200"):
        with pytest.raises(ValueError, match="cell"):
            curve.parse_cell(bad)


def test_cell_command_is_the_recipe_with_the_cell_applied(tmp_path):
    (cmd,) = curve.cell_commands(curve.Cell(4, 800, 3), tmp_path)
    assert cmd[1].endswith("jobs/train_laconic.py")
    cfg = load_config(curve.RECIPE, _sets(cmd))
    assert cfg.model.num_layers == 4 and cfg.train.seed == 3
    assert [p.max_steps for p in cfg.train.phases] == [100, 700]
    assert cfg.out_dir == str(tmp_path / "L4-S800-seed3")
    default = load_config(curve.RECIPE)
    assert [p.max_steps for p in default.train.phases] == list(curve.Cell(2, 320).phase_steps())


def test_steps_follow_the_given_recipes_split_and_a_one_phase_recipe_is_refused(tmp_path):
    three_to_one = tmp_path / "r.yaml"
    three_to_one.write_text(f"include: {curve.RECIPE}\ntrain: {{phases: [{{max_steps: 30}}, {{max_steps: 10}}]}}\n")
    (cmd,) = curve.cell_commands(curve.Cell(2, 200), tmp_path, recipe=three_to_one)
    assert [p.max_steps for p in load_config(three_to_one, _sets(cmd)).train.phases] == [150, 50]
    one = tmp_path / "one.yaml"
    one.write_text(f"include: {curve.RECIPE}\ntrain: {{phases: [{{max_steps: 30}}]}}\n")
    with pytest.raises(ValueError, match="two phases with max_steps"):
        curve.Cell(2, 200).phase_steps(one)


def _entry(ndcg, encode_s):
    return {"metrics": {"nDCG@10": ndcg, "R@100": 0.5}, "efficiency": {
        "avg_query_nnz": 10.0, "index_avg_nnz_per_doc": 20.0, "encode_seconds": encode_s}}


def test_collect_reads_metrics_phases_and_cache_hit(tmp_path):
    cell = curve.Cell(2, 200)
    d = tmp_path / cell.name
    (d / "eval" / "zero-shot").mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps([_entry(0.05, 300.0), _entry(0.43, 250.0)]))
    log = d / "train" / "run" / "lexray" / "metrics.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(json.dumps(r) for r in [
        {"phase": 0, "step": 10, "wall_time": 100.0, "step_time_s": 2.0},
        {"phase": 0, "step": 40, "wall_time": 160.0, "step_time_s": 2.0},
        {"phase": 1, "step": 10, "wall_time": 200.0, "step_time_s": 3.0},
        {"phase": 1, "step": 160, "wall_time": 650.0, "step_time_s": 3.0}]) + "\n")
    rec = curve.collect(cell, tmp_path, [900.0])
    assert rec["phase_s"] == [80.0, 480.0]
    assert rec["zero_shot"]["encode_s"] == 300.0 and rec["trained"]["metrics"]["nDCG@10"] == 0.43
    (d / "eval" / "zero-shot" / "cache.json").write_text(json.dumps({"hit": True}))
    assert curve.collect(cell, tmp_path, [600.0])["zero_shot"]["encode_s"] == 0.0
    table = curve.markdown([rec])
    assert "| 2 | 200 | recipe | 0.0500 | 0.4300 |" in table and "| 1.3 | 8.0 | 4.2 |" in table
