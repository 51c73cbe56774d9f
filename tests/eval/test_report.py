"""metrics.md tables: the columns are the metrics the records carry (eval.metrics), not a fixed default."""

from __future__ import annotations

from lexray.eval.report import markdown_table, write_markdown


def test_table_columns_follow_the_configured_metrics(tmp_path):
    """Issue 24: with ``eval.metrics=[nDCG@5,P@3]`` metrics.md showed nDCG@10/MRR@10/R@100/R@1000, all "–"."""
    rec = {"retriever": "lexray", "dataset": "scifact", "split": "test", "n_queries": 3,
           "metrics": {"nDCG@5": 0.5, "P@3": 0.25}, "efficiency": {}}
    text = write_markdown(tmp_path / "metrics.md", [rec]).read_text()
    head, _, row = text.splitlines()[:3]
    assert head == "| Retriever | Dataset | Split | Queries | nDCG@5 | P@3 |"
    assert row.endswith("| 0.5000 | 0.2500 |") and "–" not in row
    # an explicit list still wins (several records, one shared column set)
    assert "| R@100 |" in markdown_table([rec], metrics=["nDCG@5", "R@100"])
