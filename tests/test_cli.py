"""The ``lexray`` command: table-driven dispatch, early validation with one-line errors, several collections in one
evaluation with an average row, per-query metrics and a baseline comparison."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lexray import cli
from lexray.paths import REPO_ROOT


def _run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_every_command_has_a_job_file_or_is_a_placeholder():
    names = [c.name for c in cli.COMMANDS]
    assert len(names) == len(set(names))
    for c in cli.COMMANDS:
        assert ":" in c.target
    for job in ("train_laconic.py", "train_splade.py", "evaluate.py", "encode_corpus.py", "build_index.py"):
        assert (REPO_ROOT / "jobs" / job).is_file()
        assert any(c.job_file == job for c in cli.COMMANDS)


@pytest.mark.parametrize("argv, message", [
    (["--set", "eval.metrics=[nDCG@10,foo@3]"], "unknown metric 'foo@3'"),
    (["--set", "eval.top_k=0"], "eval.top_k must be >= 1"),
    (["--dataset", "/no/such/beir"], "dataset folder not found"),
    (["--model", "/no/such/model"], "model /no/such/model: no such folder"),
    (["--split", "nosplit"], "no qrels/nosplit.tsv"),
])
def test_bad_input_fails_before_encoding_with_one_line(capsys, tmp_path, scifact_dir, splade_tiny_dir, argv,
                                                       message):
    base = ["evaluate", "--model", str(splade_tiny_dir), "--dataset", str(scifact_dir), "--out", str(tmp_path / "o")]
    rc, _, err = _run(capsys, *base, *argv)
    assert rc == 1
    assert err.count("\n") == 1 and err.startswith("lexray evaluate: error:") and message in err
    assert not (tmp_path / "o" / "shards").exists()  # nothing was encoded


def test_debug_shows_the_traceback(tmp_path, scifact_dir):
    with pytest.raises(ValueError, match="unknown metric"):
        cli.main(["--debug", "evaluate", "--dataset", str(scifact_dir), "--out", str(tmp_path),
                  "--set", "eval.metrics=[bogus]"])


def test_unknown_and_placeholder_commands(capsys):
    rc, _, err = _run(capsys, "no-such-command")
    assert rc == 2 and "unknown command" in err
    missing = cli.Command("later", "lexray.commands.not_built_yet:main", "not_a_job.py", "")
    with pytest.raises(cli.CommandUnavailable, match="not available"):
        cli.resolve(missing)


def test_job_scripts_still_run_as_files(tmp_path):
    """``python jobs/evaluate.py`` goes through the same command (here: its early validation)."""
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "jobs" / "evaluate.py"), "--dataset", "/no/such",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT / "platform")})
    assert proc.returncode == 1 and "lexray evaluate: error:" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_evaluate_two_collections_average_per_query_and_baseline(capsys, tmp_path, scifact_dir, cranfield_dir,
                                                                 splade_tiny_dir):
    common = ["--model", str(splade_tiny_dir), "--dataset", str(scifact_dir), "--dataset", str(cranfield_dir),
              "--set", "data.on_error=skip", "--set", "data.max_docs=40", "--set", "encode.backend=local",
              "--set", "eval.top_k=100"]
    rc, out, err = _run(capsys, "evaluate", *common, "--out", str(tmp_path / "a"))
    assert rc == 0, err
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert any("| scifact |" in line for line in table) and any("| cranfield |" in line for line in table)
    assert any("average (2)" in line for line in table)
    assert "metrics:" in out and "output folder:" in out
    summary = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert [r["dataset"] for r in summary["datasets"]] == ["scifact", "cranfield"]
    avg = next(iter(summary["average"].values()))["nDCG@10"]
    assert avg == pytest.approx(sum(r["metrics"]["nDCG@10"] for r in summary["datasets"]) / 2)
    lines = (tmp_path / "a" / "scifact" / "per_query.test.jsonl").read_text().splitlines()
    assert len(lines) == summary["datasets"][0]["n_queries"] and "nDCG@10" in json.loads(lines[0])

    # the same model against itself as the baseline: every query ties, p = 1
    rc, out, err = _run(capsys, "evaluate", *common, "--out", str(tmp_path / "b"), "--baseline", str(tmp_path / "a"))
    assert rc == 0, err
    comp = json.loads((tmp_path / "b" / "comparison.json").read_text())["datasets"]["scifact"]["nDCG@10"]
    assert comp["wins"] == comp["losses"] == 0 and comp["ties"] == comp["n"] and comp["p_value"] == 1.0
