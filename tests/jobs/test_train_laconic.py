"""The main job end to end, shrunk: ``jobs/train_laconic.py`` with its fast recipe (laconic-tiny) and overrides that
cut every stage (2 steps per phase, negatives mined for 8 queries, 300 evaluated documents, top-64 terms per
document, one training worker and one encoder actor), run as a user runs it: a separate Python process with its own
Ray instance. Guards the whole chain — BM25 mining, two Ray Train phases with the LoRA merge, Ray Data encoding,
DuckDB index, search, pytrec_eval, metrics.json — which unit tests of the parts did not (the default job once failed
writing its TREC run).

Why a subprocess rather than the shared Ray session: run inside the test process, the job left that session in
a state where the next Ray Train fit (tests/train) never got its placement group (docs/bugs-and-fixes.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lexray import cli
from lexray.data.beir import iter_corpus
from lexray.paths import REPO_ROOT, shared_dir


@pytest.mark.timeout(480)
def test_train_laconic_default_recipe_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    # eval.cache_dir: the zero-shot evaluation's cache (default <repo>/outputs/cache/eval) in tmp_path, so every
    # run evaluates the untrained backbone as a fresh checkout does, and the repository is left alone
    overrides = [f"out_dir={out}", f"eval.cache_dir={tmp_path / 'eval-cache'}",
                 "train.phases.0.max_steps=2", "train.phases.1.max_steps=2",
                 "train.phases.0.global_batch_size=8", "train.phases.1.global_batch_size=4",
                 "train.phases.1.max_train_examples=8",  # BM25 negatives mined for the 8 queries it trains on
                 "data.max_docs=300", "encode.doc_top_k=64",
                 # one training worker and one encoder actor: each process costs ~12 core-seconds of imports and
                 # start-up, more than its share of the work here; 2-worker DDP and 2-actor encodes are
                 # tests/train/test_loop.py's and tests/encode/test_pipeline.py's (docs/operations.md, CI time)
                 "train.num_workers=1", "encode.num_actors=1"]
    cmd = [sys.executable, str(REPO_ROOT / "jobs" / "train_laconic.py"), "--config",
           str(REPO_ROOT / "jobs" / "configs" / "laconic-tiny.yaml"), "--zero-shot"]
    for o in overrides:
        cmd += ["--set", o]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # its own local Ray, as a user runs it
    env["LEXRAY_SHARED"] = str(shared_dir())
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=450)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| nDCG@10 |" in proc.stdout  # the table is printed
    zero_shot, record = json.loads((out / "metrics.json").read_text())  # --zero-shot: the untrained backbone first
    assert "(zero-shot)" in zero_shot["retriever"] and "(trained)" in record["retriever"]
    assert zero_shot["n_queries"] == record["n_queries"]
    assert record["dataset"] == "scifact" and record["split"] == "test" and record["n_queries"] == 300
    assert set(record["metrics"]) >= {"nDCG@10", "MRR@10", "R@100", "R@1000"}
    assert all(0.0 <= v <= 1.0 for v in record["metrics"].values())
    assert 0 < record["efficiency"]["index_avg_nnz_per_doc"] <= 64
    # both phases ran, were merged and saved; the final encoder is what was evaluated
    run_dir = out / "train" / "laconic-tiny" / "lexray"
    assert sorted(p.name for p in (run_dir / "models").iterdir()) == ["phase-0-pre-finetune", "phase-1-finetune"]
    history = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert {int(m["phase"]) for m in history} == {0, 1}
    assert (out / "config.resolved.yaml").is_file() and (out / "metrics.md").is_file()
    run_lines = next((out / "eval" / "trained").glob("run.test*.trec")).read_text().splitlines()
    assert run_lines and all(len(line.split()) == 6 for line in run_lines)
    # the query side on the job's output folder, as the README shows it: ranked doc ids with their titles
    capsys.readouterr()
    assert cli.main(["search", "--index", str(out), "--query", "vitamin D deficiency and bone fractures",
                     "--k", "5", "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out.strip())
    titles = {d.doc_id: d.title for d in iter_corpus(shared_dir() / "datasets" / "scifact", max_docs=300)}
    hits = rec["hits"]
    assert len(hits) == 5 and [h["rank"] for h in hits] == [1, 2, 3, 4, 5]
    assert all(h["doc_id"] in titles and h["title"] == titles[h["doc_id"]] and h["title"] for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
