"""Evaluation reports: ``metrics.json`` per (dataset, retriever, split) and Markdown tables comparing them.

Why one shape: every job (zero-shot, fine-tuned, Lucene backend) writes the same JSON, so a results table is a
simple read-and-join of ``metrics.json`` files::

    {"dataset": "scifact", "retriever": "splade-tiny", "split": "test", "n_queries": 300,
     "metrics": {"nDCG@10": ..., "MRR@10": ..., "R@100": ..., "R@1000": ...},
     "efficiency": {"qps": ..., "index_bytes": ..., ...}, ...extra keys}
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from lexray.eval.metrics import DEFAULT_METRICS

__all__ = ["backend_rows", "metrics_record", "write_metrics_json", "read_metrics_json", "markdown_table",
           "write_markdown"]


def metrics_record(dataset: str, retriever: str, split: str, n_queries: int, metrics: Mapping[str, float],
                   efficiency: Mapping[str, float | int | str] | None = None, **extra) -> dict:
    """Build the ``metrics.json`` dict (see module docstring); ``extra`` keys are added at the top level."""
    rec = {"dataset": str(dataset), "retriever": str(retriever), "split": str(split), "n_queries": int(n_queries),
           "metrics": {k: float(v) for k, v in metrics.items()}, "efficiency": dict(efficiency or {})}
    rec.update(extra)
    return rec


def write_metrics_json(path: str | os.PathLike, dataset: str, retriever: str, split: str, n_queries: int,
                       metrics: Mapping[str, float], efficiency: Mapping | None = None, **extra) -> dict:
    """Write ``metrics.json`` (to ``path`` if it ends in ``.json``, else into the folder ``path``).

    Returns:
        the record written (see :func:`metrics_record`).
    """
    path = Path(path)
    if path.suffix != ".json":
        path = path / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = metrics_record(dataset, retriever, split, n_queries, metrics, efficiency, **extra)
    path.write_text(json.dumps(rec, indent=2, sort_keys=False) + "\n")
    return rec


def read_metrics_json(path: str | os.PathLike) -> dict:
    """Read a ``metrics.json`` (file or folder holding one). Raises ValueError naming a missing field."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.json"
    rec = json.loads(path.read_text())
    for key in ("dataset", "retriever", "split", "metrics"):
        if key not in rec:
            raise ValueError(f"{path}: field '{key}' missing")
    return rec


def backend_rows(record: Mapping) -> list[dict]:
    """Table rows of one evaluation record: the record itself, or one row per search backend when several ran
    (``efficiency["backends"]``, :func:`lexray.eval.pipeline.evaluate_sparse`).

    Each backend row carries that backend's own speed: ``search_qps`` is the exact search's in the record
    (``lucene_search_qps`` / ``seismic_search_qps`` are the others'), so the Lucene row gets
    ``lucene_search_qps`` as its ``search_qps``, and no row shows another backend's ``<name>_*`` keys (a Lucene
    row once showed the exact search's QPS).
    """
    backends = record.get("efficiency", {}).get("backends")
    if not backends:
        return [dict(record)]
    eff = record.get("efficiency", {})
    names = eff.get("backend_retrievers") or {}  # e.g. a hybrid's fused / sparse / BM25 rows (eval.pipeline._hybrid)
    rows = []
    for name, metrics in backends.items():
        own = {k: v for k, v in eff.items() if not k.startswith(tuple(f"{b}_" for b in backends if b != name))}
        if name != "exact":
            own["search_qps"] = eff.get(f"{name}_search_qps")
        rows.append({**record, "retriever": names.get(name, f"{record['retriever']} ({name})"), "metrics": metrics,
                     "efficiency": own})
    return rows


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.4f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v)


def markdown_table(rows: Mapping | Sequence[Mapping], metrics: Sequence[str] | None = None,
                   efficiency: Sequence[str] = ()) -> str:
    """A Markdown table with one row per record (e.g. zero-shot vs fine-tuned).

    Columns: Retriever, Dataset, Split, Queries, the ``metrics`` (4 decimals; "–" if a record lacks one) and
    the requested ``efficiency`` keys. ``metrics`` None: the metrics the records carry (``eval.metrics`` of the
    run, in their order), or the defaults when none does.
    """
    if isinstance(rows, Mapping):
        rows = [rows]
    if metrics is None:
        metrics = list(dict.fromkeys(m for r in rows for m in r.get("metrics", {}))) or list(DEFAULT_METRICS)
    head = ["Retriever", "Dataset", "Split", "Queries", *metrics, *efficiency]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 4 + ["---:"] * (len(head) - 4)) + "|"]
    for r in rows:
        cells = [str(r.get("retriever", "")), str(r.get("dataset", "")), str(r.get("split", "")),
                 str(r.get("n_queries", ""))]
        cells += [_fmt(r.get("metrics", {}).get(m)) for m in metrics]
        cells += [_fmt(r.get("efficiency", {}).get(e)) for e in efficiency]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_markdown(path: str | os.PathLike, rows: Mapping | Sequence[Mapping], title: str | None = None,
                   **kw) -> Path:
    """Write :func:`markdown_table` (with an optional ``# title``) to ``path``; returns it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (f"# {title}\n\n" if title else "") + markdown_table(rows, **kw)
    path.write_text(text)
    return path


def write_per_query(path: str | os.PathLike, per_query: Mapping[str, Mapping[str, float]]) -> Path:
    """Write per-query metrics as JSONL, one ``{"qid": ..., "<metric>": value, ...}`` per line, queries in order."""
    from lexray.eval.runs import sorted_query_ids

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for qid in sorted_query_ids(per_query):
            fh.write(json.dumps({"qid": qid, **{k: float(v) for k, v in per_query[qid].items()}}) + "\n")
    return path


def read_per_query(path: str | os.PathLike) -> dict[str, dict[str, float]]:
    """Read :func:`write_per_query` output. Raises ValueError naming the file and line of a bad row."""
    path = Path(path)
    out: dict[str, dict[str, float]] = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                qid = str(rec.pop("qid"))
                out[qid] = {k: float(v) for k, v in rec.items()}
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise ValueError(f"{path}:{n}: not a per-query metrics row ({e})") from None
    return out
