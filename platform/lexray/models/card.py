"""README.md model cards for saved encoders: base model, training data, recipe, metrics, sparsity, how to load.

The card is rendered from ``lexray_card.json`` (kept beside it), so later steps can add to it — e.g. evaluation
adds metrics rows with :func:`update_model_card` — without parsing Markdown.

Fit for the Hugging Face Hub: the YAML front matter is ``huggingface_hub.ModelCardData`` (``library_name``,
``tags``, ``pipeline_tag``, ``license``, ``base_model`` as the upstream Hub id and ``datasets`` as Hub dataset ids,
resolved from the model's own provenance by :mod:`lexray.models.hub`, never a local or package path) with the
evaluation in the ``model-index`` format (``EvalResult``); the body starts with the architecture facts (layers
kept, output vocabulary, APC, attention, pooling), then intended use, limitations and licence.
:func:`regenerate_card` rewrites the card of an existing model folder (``lexray model-card``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import EvalResult, ModelCardData

from lexray.models.hub import base_model_info, dataset_label, hub_dataset_id, is_hub_id

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
    """Markdown for ``data`` (the content of ``lexray_card.json``): Hub metadata (``model-index`` included),
    the architecture facts, intended use, limitations, licence, training data, evaluation, usage."""
    s = data["settings"]
    up = data.get("upstream") or {}
    base_id = up.get("id") or (data.get("base_model") if is_hub_id(data.get("base_model")) else None)
    licence = data.get("license") or up.get("license")
    name = data.get("name") or "lexray sparse encoder"
    tags = ["sparse-encoder", "splade", "learned-sparse-retrieval", "lexray"]
    if s["kind"] == "decoder":
        tags.append("laconic")
    if s["kind"] == "mlm":
        tags.append("sentence-transformers")
    meta = ModelCardData(library_name="lexray", pipeline_tag="feature-extraction", tags=tags, base_model=base_id,
                         datasets=_hub_datasets(data) or None, license=licence, model_name=name,
                         eval_results=eval_results(data.get("metrics") or []) or None)
    kind = "decoder LLM made bidirectional (LACONIC)" if s["kind"] == "decoder" else "masked-LM encoder (SPLADE)"
    lines = ["---", meta.to_yaml().strip(), "---", "", f"# {name}", "",
             f"A learned sparse retriever trained with [lexray](https://github.com/lexray): {kind}, "
             f"SPLADE max pooling `w_j = max_i log(1 + ReLU(logit_ij))` over a {data['vocab_size']:,}-term "
             "vocabulary.", "", "## Model", ""]
    lines += [f"| {k} | {v} |" for k, v in [("Fact", "Value"), ("---", "---")] + architecture_facts(data)]
    lines += ["", "## Intended use", "",
              "First-stage retrieval: encode documents once into sparse term weights, index them in an inverted "
              "index (lexray's exact or Seismic search, Lucene/Anserini impact search) and score queries by the dot "
              "product of their weights. The weights are non-negative and aligned with the tokenizer's vocabulary, "
              "so each match can be explained by shared terms.", "",
              "## Limitations", "",
              "- Evaluated only on the collections listed below; effectiveness on other domains and languages is "
              "not measured (zero-shot transfer of sparse retrievers varies widely across BEIR collections).",
              "- Inputs longer than the maximum lengths are truncated.",
              "- Scores are unnormalised dot products: compare them within one query, not across queries.",
              "- Trained on a small budget where the recipe says so (CPU runs keep few layers): not a "
              "production-quality model unless its evaluation says otherwise.", "",
              "## License", "",
              f"{licence} (from the base model's recorded licence unless set explicitly)." if licence else
              "Not recorded: the base model's licence applies (set one with `lexray model-card --license`).", ""]
    lines += ["## Training data", ""]
    td = _training_data(data)
    lines += [f"- {x}" for x in td] if td else ["Not recorded (not trained by lexray, or saved before training)."]
    lines.append("")
    if data.get("recipe"):
        lines += ["## Recipe", "", "<details><summary>config.resolved.yaml (local paths shortened)</summary>", "",
                  "```yaml", yaml.safe_dump(_no_local_paths(data["recipe"]), sort_keys=False).strip(), "```", "",
                  "</details>", ""]
    rows = _metric_rows(data.get("metrics") or [])
    lines += ["## Evaluation and sparsity", ""]
    lines += rows if rows else ["No evaluation recorded yet."]
    lines.append("")
    if data.get("sparsity"):
        lines += [f"- {k}: {v}" for k, v in data["sparsity"].items()] + [""]
    return "\n".join(lines + _usage(s))


def _usage(s: Mapping[str, Any]) -> list[str]:
    lines = ["## Usage", "", "```python", "from lexray.models import SparseEncoder", "",
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
    lines += ["ONNX: `lexray export-onnx --model PATH --out DIR` writes a graph with the pooling inside it, for "
              "onnxruntime (docs/models.md in lexray).", "",
              "Pyserini / Anserini: index with `--set index.lucene_tokens=vocab` to get an impact index keyed by "
              "this tokenizer's token strings (see docs/lucene.md in lexray).", ""]
    return lines


def architecture_facts(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(fact, value) rows for the card's head: base model, layers kept, output vocabulary, APC, attention, pooling."""
    s, arch, up = data["settings"], data.get("architecture") or {}, data.get("upstream") or {}
    recipe_model = (data.get("recipe") or {}).get("model") or {}
    base = up.get("id") or (data.get("base_model") if is_hub_id(data.get("base_model")) else None)
    layers = arch.get("num_hidden_layers")
    total = up.get("layers")
    kept = (f"{layers} (the first {layers} of the base model's {total})" if layers and total and layers < total
            else str(layers or "not recorded"))
    n_out = len(s["output_ids"]) if s.get("output_ids") else data["vocab_size"]
    out_vocab = (f"{n_out:,} of {data['vocab_size']:,} terms (restricted to "
                 f"{dataset_label(recipe_model.get('output_vocab')) or 'a collection'}'s tokens; others weigh 0)"
                 if s.get("output_ids") else f"{n_out:,} terms (full vocabulary)")
    return [("Base model", f"[{base}](https://huggingface.co/{base})" if base else "not recorded (local model)"),
            ("Architecture", f"{arch.get('model_type', '?')} ({s['kind']})"),
            ("Transformer layers", kept),
            ("Hidden size", str(arch.get("hidden_size", "not recorded"))),
            ("Attention", "bidirectional (causal mask removed, LACONIC arXiv:2601.01684 §2.1)"
             if s["kind"] == "decoder" else "bidirectional (MLM encoder)"),
            ("Output vocabulary", out_vocab),
            ("APC (Activation Potential Calibration, arXiv:2607.00004)", _apc(recipe_model, arch)),
            ("Pooling", "SPLADE-max: max over positions of log(1 + ReLU(logit)); special-token positions "
             f"{'excluded' if s['special_tokens'] == 'exclude' else 'included'}"),
            ("Max length", f"queries {s['query_max_length']}, documents {s['doc_max_length']} tokens"),
            ("Prefixes", f"query {s['query_prefix']!r}, document {s['doc_prefix']!r}"),
            ("Inference-free queries", "yes (bag of tokens, IDF weights)" if s["inference_free_queries"] else "no")]


def _apc(recipe_model: Mapping[str, Any], arch: Mapping[str, Any]) -> str:
    apc = recipe_model.get("apc")
    if not apc:
        return "output bias present (lexray-added)" if arch.get("lexray_output_bias") else "not recorded"
    if apc.get("shift") is None and apc.get("target_rate") is None:
        return "no"
    how = f"shift c = {apc['shift']}" if apc.get("shift") is not None else f"target rate {apc['target_rate']}"
    return f"yes: {how}{', per-term centring' if apc.get('per_term') else ''} (b <- b - c in the output bias)"


def eval_results(metrics: Sequence[Mapping]) -> list[EvalResult]:
    """``metrics.json`` records → the Hub's ``model-index`` entries (one per dataset, split and metric)."""
    out = []
    for r in metrics:
        ds = str(r.get("dataset", ""))
        for m, v in (r.get("metrics") or {}).items():
            if not isinstance(v, int | float):
                continue
            out.append(EvalResult(task_type="text-retrieval", task_name="Retrieval",
                                  dataset_type=hub_dataset_id(ds) or ds, dataset_name=dataset_label(ds),
                                  dataset_split=r.get("split"), metric_type=_metric_id(m), metric_name=m,
                                  metric_value=round(float(v), 4)))
    return out


def _metric_id(name: str) -> str:
    """``nDCG@10`` → ``ndcg_at_10``, ``R@100`` → ``recall_at_100`` (MTEB / sentence-transformers spelling)."""
    base, _, k = name.partition("@")
    base = {"r": "recall", "p": "precision"}.get(base.lower(), base.lower())
    return f"{base}_at_{k}" if k else base


def _hub_datasets(data: Mapping[str, Any]) -> list[str]:
    """Hub ids of the training collection and of the evaluated ones (local collections are left out)."""
    locs = [((data.get("recipe") or {}).get("data") or {}).get("dataset")]
    locs += [x.split(" (")[0] for x in data.get("training_data") or []]
    locs += [r.get("dataset") for r in data.get("metrics") or []]
    out: list[str] = []
    for loc in locs:
        hub = hub_dataset_id(loc)
        if hub and hub not in out:
            out.append(hub)
    return out


def _training_data(data: Mapping[str, Any]) -> list[str]:
    """The training data in words: the collection's name (not its local path) and each phase's data."""
    recipe = data.get("recipe") or {}
    d = recipe.get("data") or {}
    if d.get("dataset"):
        name = dataset_label(d["dataset"])
        lines = [f"{name}, {d.get('train_split', 'train')} split (queries, qrels and corpus)"]
        for p in (recipe.get("train") or {}).get("phases") or []:
            what = {"title_abstract_pairs": f"(title, abstract) pairs of {name}'s corpus",
                    "hard_negatives": f"{name} training queries with hard negatives mined from its corpus"}.get(
                p.get("data"), str(p.get("data")))
            lines.append(f"phase {p.get('name', '?')}: {what}")
        return lines
    return [str(_no_local_paths(x)) for x in data.get("training_data") or []]


def _no_local_paths(value: Any) -> Any:
    """Absolute paths in a recipe dump shortened to ``<local>/<name>`` (they name this machine's folders)."""
    if isinstance(value, Mapping):
        return {k: _no_local_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_local_paths(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"(?<![\w:])/(?:[^\s/()]+/)+([^\s/()]+)", r"<local>/\1", value)
    return value


def _merge_metrics(rows: Sequence[Mapping], new: Sequence[Mapping]) -> list[dict]:
    """``rows`` with each record of ``new`` added, replacing one of the same dataset and split."""
    out = [dict(r) for r in rows]
    for rec in new:
        out = [r for r in out if (r.get("dataset"), r.get("split")) != (rec.get("dataset"), rec.get("split"))]
        out.append(dict(rec))
    return out


def _refresh(directory: Path, data: dict) -> None:
    """Add what the folder itself records: architecture facts (config.json) and the upstream model."""
    cfg = directory / "config.json"
    if cfg.is_file():
        c = json.loads(cfg.read_text())
        data["architecture"] = {k: c.get(k) for k in ("model_type", "num_hidden_layers", "hidden_size",
                                                      "is_causal", "lexray_output_bias") if k in c}
    if data.get("base_model"):
        data["upstream"] = base_model_info(str(data["base_model"]))


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
    _refresh(d, data)
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
    data["metrics"] = _merge_metrics(data.get("metrics") or [], metrics or [])
    data.update({k: v for k, v in info.items() if v is not None})
    _refresh(d, data)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    (d / CARD_FILE).write_text(render_card(data))
    return d / CARD_FILE


def regenerate_card(model_dir: str | Path, out_dir: str | Path | None = None,
                    metrics: Sequence[Mapping] | None = None, **info) -> Path:
    """Re-render the card of a saved model from what it records (``lexray_card.json``, else its
    ``lexray_encoder.json`` and ``config.json``), into ``out_dir`` (default: the model folder itself).

    ``metrics``: records to add (as :func:`update_model_card`); ``info``: name, license, base_model, ...
    Returns the README.md path.

    Raises:
        FileNotFoundError: ``model_dir`` has neither ``lexray_card.json`` nor ``lexray_encoder.json``.
    """
    from lexray.models.settings import EncoderSettings

    src = Path(model_dir)
    data = json.loads((src / CARD_DATA_FILE).read_text()) if (src / CARD_DATA_FILE).is_file() else {}
    if not data:
        settings = EncoderSettings.load(src)
        cfg = src / "config.json"
        if settings is None or not cfg.is_file():
            raise FileNotFoundError(f"{src}: not a lexray model folder (no {CARD_DATA_FILE} or lexray_encoder.json)")
        data = {"settings": settings.model_dump(mode="json", exclude={"query_idf"}),
                "vocab_size": int(json.loads(cfg.read_text())["vocab_size"])}
    data["metrics"] = _merge_metrics(data.get("metrics") or [], metrics or [])
    data.update({k: v for k, v in info.items() if v is not None})
    _refresh(src, data)
    out = Path(out_dir) if out_dir is not None else src
    out.mkdir(parents=True, exist_ok=True)
    (out / CARD_DATA_FILE).write_text(json.dumps(data, indent=2, default=str) + "\n")
    (out / CARD_FILE).write_text(render_card(data))
    return out / CARD_FILE
