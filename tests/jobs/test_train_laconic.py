"""The main job end to end, shrunk: ``jobs/train_laconic.py`` with its embedded default recipe and overrides that
cut every stage (2 steps per phase, 300 evaluated documents, top-64 terms per document). Guards the whole chain
— BM25 mining, two Ray Train phases with the LoRA merge, Ray Data encoding, DuckDB index, search, pytrec_eval,
metrics.json — which unit tests of the parts did not (the default job once failed writing its TREC run)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from lexray.paths import REPO_ROOT


def _job(name: str):
    spec = importlib.util.spec_from_file_location(f"job_{name}", REPO_ROOT / "jobs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.ray
@pytest.mark.timeout(420)
def test_train_laconic_default_recipe_end_to_end(ray_session, tmp_path, capsys):
    out = tmp_path / "run"
    result = _job("train_laconic").main([
        "--set", f"out_dir={out}",
        "--set", "train.phases.0.max_steps=2", "--set", "train.phases.1.max_steps=2",
        "--set", "train.phases.0.global_batch_size=8", "--set", "train.phases.1.global_batch_size=4",
        "--set", "data.max_docs=300", "--set", "encode.doc_top_k=64",
    ])
    record = json.loads((out / "metrics.json").read_text())
    assert record["dataset"] == "scifact" and record["split"] == "test" and record["n_queries"] == 300
    assert set(record["metrics"]) >= {"nDCG@10", "MRR@10", "R@100", "R@1000"}
    assert all(0.0 <= v <= 1.0 for v in record["metrics"].values())
    assert 0 < record["efficiency"]["index_avg_nnz_per_doc"] <= 64
    # both phases ran and were merged; the final encoder is what was evaluated
    assert [p.name for p in result["train"].phase_dirs] == ["phase-0-pre-finetune", "phase-1-finetune"]
    assert {int(m["phase"]) for m in result["train"].history} == {0, 1}
    assert (out / "config.resolved.yaml").is_file() and (out / "metrics.md").is_file()
    run_lines = next((out / "eval" / "trained").glob("run.test*.trec")).read_text().splitlines()
    assert run_lines and all(len(line.split()) == 6 for line in run_lines)
    assert "nDCG@10" in capsys.readouterr().out  # the table is printed
