"""Evaluation tables with several search backends: every row shows its own backend's search speed (issue 27:
the Lucene row showed the exact search's QPS)."""

from __future__ import annotations

from lexray.commands.evaluate import EFFICIENCY, rows_of
from lexray.eval.report import backend_rows, markdown_table

METRICS = {"nDCG@10": 0.64, "MRR@10": 0.61, "R@100": 0.89, "R@1000": 0.97}


def _record(backends: dict, **eff) -> dict:
    return {"dataset": "scifact", "retriever": "splade-tiny", "split": "test", "n_queries": 300,
            "metrics": METRICS, "efficiency": {"avg_query_nnz": 52.6, **eff, "backends": backends}}


def _col(table: str, row: int, name: str) -> str:
    lines = table.splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [c.strip() for c in lines[2 + row].strip("|").split("|")][head.index(name)]


def test_lucene_row_shows_the_lucene_search_speed():
    rec = _record({"exact": METRICS, "lucene": {**METRICS, "nDCG@10": 0.63}}, search_qps=37.0,
                  lucene_search_qps=10.4, lucene_index_bytes=3_409_345)
    rows = rows_of(rec)
    assert [r["retriever"] for r in rows] == ["splade-tiny (exact)", "splade-tiny (lucene)"]
    assert rows[0]["efficiency"]["search_qps"] == 37.0 and rows[1]["efficiency"]["search_qps"] == 10.4
    assert "lucene_index_bytes" not in rows[0]["efficiency"]  # no other backend's keys on a row
    table = markdown_table(rows, efficiency=EFFICIENCY)
    assert _col(table, 0, "search_qps") == "37.0" and _col(table, 1, "search_qps") == "10.4"
    assert _col(table, 1, "nDCG@10") == "0.6300"


def test_seismic_columns_only_on_the_seismic_row():
    rec = _record({"seismic": METRICS, "exact": METRICS}, search_qps=40.0, seismic_search_qps=900.0,
                  **{"seismic_recall@10": 0.99})
    seismic, exact = backend_rows(rec)
    assert seismic["efficiency"]["search_qps"] == 900.0 and seismic["efficiency"]["seismic_recall@10"] == 0.99
    assert exact["efficiency"]["search_qps"] == 40.0 and "seismic_search_qps" not in exact["efficiency"]


def test_one_backend_is_the_record_itself():
    rec = {"dataset": "d", "retriever": "r", "split": "test", "n_queries": 1, "metrics": METRICS,
           "efficiency": {"search_qps": 5.0}}
    assert backend_rows(rec) == [rec]
