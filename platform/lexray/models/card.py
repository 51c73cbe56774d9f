"""README.md model cards for saved encoders: base model, training data, recipe, metrics, sparsity, how to load.

The card is rendered from ``lexray_card.json`` (kept beside it), so later steps can add to it — e.g. evaluation
adds metrics rows with :func:`update_model_card` — without parsing Markdown. The YAML front matter follows the
Hugging Face Hub's model-card metadata (``library_name``, ``tags``, ``base_model``, ``datasets``,
``pipeline_tag``), as sentence-transformers' own cards do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

CARD_FILE = "README.md"
CARD_DATA_FILE = "lexray_card.json"


def _metric_rows(metrics: Sequence[Mapping]) -> list[str]:
    names: list[str] = []
    for r in metrics:
        for k in r.get("metrics", {}):
            if k not in names:
                names.append(k)
    if not names:
        return []
    lines = ["| Dataset | Split | Queries | " + " | ".join(names) + " | avg query nnz | avg doc nnz |",
             "|---|---|---:|" + "---:|" * (len(names) + 2)]
    for r in metrics:
        eff = r.get("efficiency", {})
        cells = [str(r.get("dataset", "")), str(r.get("split", "")), str(r.get("n_queries", ""))]
        cells += [f"{r['metrics'][n]:.4f}" if n in r.get("metrics", {}) else "–" for n in names]
        for key in ("avg_query_nnz", "index_avg_nnz_per_doc"):
            v = eff.get(key)
            cells.append(f"{v:.1f}" if isinstance(v, int | float) else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_card(data: Mapping[str, Any]) -> str:
    """Markdown for ``data`` (the content of ``lexray_card.json``)."""
    s = data["settings"]
    front: dict[str, Any] = {"library_name": "lexray", "pipeline_tag": "feature-extraction",
                             "tags": ["sparse-encoder", "splade", "learned-sparse-retrieval", "lexray"]}
    if data.get("base_model"):
        front["base_model"] = data["base_model"]
    if data.get("training_data"):
        front["datasets"] = [str(x) for x in data["training_data"]]
    if s["kind"] == "mlm":
        front["tags"].append("sentence-transformers")
    kind = "decoder LLM made bidirectional (LACONIC)" if s["kind"] == "decoder" else "masked-LM encoder (SPLADE)"
    lines = ["---", yaml.safe_dump(front, sort_keys=False).strip(), "---", "",
             f"# {data.get('name') or 'lexray sparse encoder'}", "",
             f"A learned sparse retriever trained with [lexray](https://github.com/lexray): {kind}, "
             f"SPLADE max pooling `w_j = max_i log(1 + ReLU(logit_ij))` over a {data['vocab_size']:,}-term "
             "vocabulary.", "", "## Model", "",
             f"- Base model: {data.get('base_model') or 'not recorded'}",
             f"- Backbone kind: {s['kind']}",
             f"- Max length: queries {s['query_max_length']}, documents {s['doc_max_length']} tokens",
             f"- Prefixes: query {s['query_prefix']!r}, document {s['doc_prefix']!r}",
             f"- Special-token positions in pooling: {s['special_tokens']}",
             f"- Inference-free queries: {'yes (bag of tokens, IDF weights)' if s['inference_free_queries'] else 'no'}",
             ""]
    lines += ["## Training data", ""]
    td = data.get("training_data") or []
    lines += [f"- {x}" for x in td] if td else ["Not recorded (not trained by lexray, or saved before training)."]
    lines.append("")
    if data.get("recipe"):
        lines += ["## Recipe", "", "```yaml", yaml.safe_dump(data["recipe"], sort_keys=False).strip(), "```", ""]
    rows = _metric_rows(data.get("metrics") or [])
    lines += ["## Evaluation and sparsity", ""]
    lines += rows if rows else ["No evaluation recorded yet."]
    lines.append("")
    if data.get("sparsity"):
        lines += [f"- {k}: {v}" for k, v in data["sparsity"].items()] + [""]
    lines += ["## Usage", "", "```python", "from lexray.models import SparseEncoder", "",
              "enc = SparseEncoder.from_pretrained(\"PATH\")",
              "docs = enc.encode([\"a document\"], kind=\"document\")   # (N, |V|) float32",
              "queries = enc.encode([\"a query\"], kind=\"query\")", "```", ""]
    if s["kind"] == "mlm" and s["special_tokens"] == "include":
        lines += ["sentence-transformers (6.x) reads the same folder and gives the same vectors:", "",
                  "```python", "from sentence_transformers import SparseEncoder", "",
                  "model = SparseEncoder(\"PATH\")",
                  "q = model.encode_query([\"a query\"]); d = model.encode_document([\"a document\"])", "```", ""]
    else:
        lines += ["sentence-transformers cannot reproduce this model's pooling; its `modules.json` makes ST "
                  "refuse the folder instead of loading a different model. Load it with lexray.", ""]
    lines += ["Pyserini / Anserini: index with `--set index.lucene_tokens=vocab` to get an impact index keyed by "
              "this tokenizer's token strings (see docs/lucene.md in lexray).", ""]
    return "\n".join(lines)


def write_model_card(directory: str | Path, settings, vocab_size: int, **info) -> Path:
    """Write ``lexray_card.json`` and ``README.md``; ``info`` keys: name, base_model, training_data (list),
    recipe (dict), metrics (list of metrics.json records), sparsity (dict). Keys already in an existing
    ``lexray_card.json`` are kept unless given again."""
    d = Path(directory)
    path = d / CARD_DATA_FILE
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update({k: v for k, v in info.items() if v is not None})
    data["settings"] = settings.model_dump(mode="json", exclude={"query_idf"})
    data["vocab_size"] = int(vocab_size)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    (d / CARD_FILE).write_text(render_card(data))
    return d / CARD_FILE


def update_model_card(directory: str | Path, metrics: Sequence[Mapping] | None = None, **info) -> Path | None:
    """Add metrics records (replacing one with the same dataset and split) and other fields to a saved card.

    Returns None if the folder has no ``lexray_card.json`` (not a lexray-saved model).
    """
    d = Path(directory)
    path = d / CARD_DATA_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    rows = list(data.get("metrics") or [])
    for rec in metrics or []:
        rows = [r for r in rows if (r.get("dataset"), r.get("split")) != (rec.get("dataset"), rec.get("split"))]
        rows.append(dict(rec))
    data["metrics"] = rows
    data.update({k: v for k, v in info.items() if v is not None})
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    (d / CARD_FILE).write_text(render_card(data))
    return d / CARD_FILE
