"""The CAI ablation's rows, steps and commands (lexray.vocab.cai_ablation, jobs/cai_ablation.py): rows that differ
only in the query side search the index one step built (nothing re-encoded), every model trains on the same mined
file with the same recipe, SPLADE-Doc rows use bag-of-words queries, and the table carries the issue's columns."""

from __future__ import annotations

from pathlib import Path

from lexray.vocab import cai_ablation as ab


def _opt(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


def _sets(cmd: list[str]) -> dict[str, str]:
    return dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--set")


def test_rows_and_commands(tmp_path):
    rows = ab.all_rows()
    names = [r.name for r in rows]
    assert len(names) == len(set(names))
    labels = {r.label for r in rows if r.table == "t1"}
    assert {"SPLADE", "SPLADE + IDF", "SPLADE + √IDF", "SPLADE-Doc", "SPLADE-Doc + IDF", "Hybrid-SPLADE",
            "Hybrid-SPLADE-Doc", "Hybrid-SPLADE with CAI", "SPLADE-Doc + IDF with CAI"} <= labels
    assert {r.label for r in rows if r.table == "t3"} == {"continual pre-training only", "vocabulary expansion only"}
    assert [r.name for r in rows if r.model is None] == ["bm25", "cranfield-bm25"]
    plan = ab.Plan(tmp_path, resolve=False)
    trains = set()
    for r in rows:
        cmd = plan.row_command(r)
        if r.model is None:
            assert "--retriever" in cmd and not plan.steps_of(r)
            continue
        steps = plan.steps_of(r)
        index = Path(_opt(cmd, "--index"))
        assert index.parent in (plan.step_dir(steps[-1]), plan.step_dir(steps[-1]) / "eval" / "trained")
        s = _sets(cmd)
        assert s["index.doc_weighting"] == r.weighting and ("--hybrid" in cmd) == r.hybrid
        assert (s.get("model.inference_free_queries") == "true") == r.model.endswith("-doc")
        assert (_opt(cmd, "--dataset") == ab.CRANFIELD) == r.table.startswith("cranfield")
        trains |= {st for st in steps if st.startswith("train-")}
    # zero-shot SPLADE-Doc searches the zero-shot SPLADE index: one encoding per collection
    by = {r.name: r for r in rows}
    assert plan.steps_of(by["zs-doc-idf"]) == plan.steps_of(by["zs"]) == ["encode-zs"]
    assert plan.steps_of(by["vocab"]) == ["adapt-adalm", "train-vocab"]
    assert plan.steps_of(by["cranfield-cai-hybrid"]) == ["adapt-adalm", "train-cai", "cranfield-cai"]
    assert trains == {"train-splade", "train-splade-doc", "train-cai", "train-cai-doc", "train-cpt", "train-vocab"}
    fts = [plan.step_command(t) for t in sorted(trains)]
    assert {_sets(c)["train.phases.0.data_path"] for c in fts} == {str(tmp_path / ab.HARDNEG)}
    assert {_opt(c, "--config") for c in fts} == {str(ab.FINETUNE_RECIPE)}
    assert _sets(plan.step_command("train-vocab"))["model.name_or_path"].endswith("adapt-adalm/expanded")
    assert _sets(plan.step_command("adapt-cpt"))["cai.expand.enabled"] == "false"


def test_markdown_has_the_issue_columns():
    res = [{"table": "t1", "label": "Hybrid-SPLADE", "metrics": {"nDCG@10": 0.69231, "R@100": 0.9},
            "avg_query_terms": 52.6, "avg_doc_terms": 248.5, "flops": 1.234},
           {"table": "t1", "label": "BM25", "metrics": {"nDCG@10": 0.6789, "R@100": 0.9},
            "avg_query_terms": None, "avg_doc_terms": None, "flops": None}]
    md = ab.markdown(res)
    assert "| row | nDCG@10 | R@100 | avg query terms | avg doc terms | FLOPS |" in md
    assert "| Hybrid-SPLADE | 0.6923 | 0.9000 | 52.6 | 248.5 | 1.23 |" in md and "| BM25 | 0.6789 | 0.9000 | – |" in md
