"""sentence-transformers (6.x) compatibility: write ST's own files beside lexray's, and read ST SPLADE folders.

Why: a lexray model folder is a Hugging Face checkpoint plus ``lexray_encoder.json`` (lengths, prefixes, pooling
policy, inference-free queries). sentence-transformers does not read that file; without its own configuration it
falls back to ``max_seq_length=512``, no prompts and, for decoders, a randomly initialised SparseAutoEncoder: a
different model that loads without an error. :func:`write_st_files` writes what ST needs so that
``sentence_transformers.SparseEncoder(folder)`` reproduces lexray's vectors, or makes ST refuse the folder when it
cannot represent the model:

================================  ==============================================================================
lexray settings                   what ST gets
================================  ==============================================================================
MLM, special tokens included      ``Transformer(fill-mask)`` (query_length / document_length = lexray's lengths)
                                  + ``SpladePooling(max, relu)``; prompts = lexray's prefixes
MLM, inference-free queries       ``Router``: query → ``SparseStaticEmbedding`` (IDF or 1.0 per token, 0 for
                                  special tokens; its tokenizer truncates at query_max_length minus the special
                                  tokens lexray adds and then ignores); document → the same Transformer (the
                                  folder root, no weight copy) + SpladePooling
decoder (LACONIC) or special      a module class outside ST (:class:`NotSupportedBySentenceTransformers`): ST
tokens excluded from pooling      refuses to load it; with ``trust_remote_code=True`` the class raises a message
                                  that says why and how to load the model with lexray
================================  ==============================================================================

ST's ``SpladePooling(activation_function="relu")`` computes ``max_i log(1 + relu(logit_ij))`` over attention-mask
positions: the same as :func:`lexray.models.pooling.splade_max_pool` with special tokens included (SPLADE v2,
Formal et al. 2021, arXiv:2109.10086, eq. 2 with max pooling; LACONIC arXiv:2601.01684 eq. (1)). ST's
``"log1p_relu"`` is a *second* log1p (OpenSearch models) and is not lexray's ``log1p_relu``.

The other direction, :func:`read_st_folder`, turns an ST SPLADE folder (plain or inference-free Router) into the
backbone location and :class:`~lexray.models.settings.EncoderSettings` fields. This module never imports
sentence_transformers: the files are plain JSON and safetensors.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "config_sentence_transformers.json"
TRANSFORMER_CONFIG_FILE = "sentence_bert_config.json"
ROUTER_CONFIG_FILE = "router_config.json"
POOLING_DIR = "1_SpladePooling"
QUERY_DIR = "query_0_SparseStaticEmbedding"
DOC_POOLING_DIR = "document_1_SpladePooling"
ST_FILES = (MODULES_FILE, ST_CONFIG_FILE, TRANSFORMER_CONFIG_FILE, ROUTER_CONFIG_FILE)
ST_DIRS = (POOLING_DIR, QUERY_DIR, DOC_POOLING_DIR)

_T = "sentence_transformers.base.modules.transformer.Transformer"
_POOL = "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling"
_STATIC = "sentence_transformers.sparse_encoder.modules.sparse_static_embedding.SparseStaticEmbedding"
_ROUTER = "sentence_transformers.base.modules.router.Router"
_LEGACY_MLM = "sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer"
REFUSE_CLASS = "lexray.models.st_compat.NotSupportedBySentenceTransformers"


class STFormatError(ValueError):
    """A sentence-transformers folder that lexray cannot represent exactly (the message names the file)."""


class NotSupportedBySentenceTransformers(torch.nn.Module):
    """Placeholder written into ``modules.json`` of models ST cannot reproduce; loading it raises."""

    @classmethod
    def load(cls, model_name_or_path: str, *args, **kwargs):
        reason = "this checkpoint cannot be represented with sentence-transformers modules"
        p = Path(str(model_name_or_path)) / "lexray_encoder.json"
        if p.is_file():
            s = json.loads(p.read_text())
            if s.get("kind") == "decoder":
                reason = ("it is a lexray decoder (LACONIC) checkpoint: a causal LM made bidirectional whose "
                          "SPLADE pooling skips special-token positions; sentence-transformers would load a "
                          "causal model with a randomly initialised sparse head")
            elif s.get("special_tokens") == "exclude":
                reason = ("its SPLADE pooling skips special-token positions, which ST's SpladePooling "
                          "(attention-mask positions) cannot do")
        raise ValueError(f"{model_name_or_path}: sentence-transformers cannot load this lexray model: {reason}. "
                         "Load it with lexray: lexray.models.SparseEncoder.from_pretrained(path).")


def _dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def _versions() -> dict[str, str]:
    import transformers

    return {"pytorch": torch.__version__, "transformers": transformers.__version__}


def st_support(settings) -> str | None:
    """Why ST cannot reproduce a model with these :class:`EncoderSettings` (None when it can)."""
    if settings.kind != "mlm":
        return "decoder (LACONIC) checkpoint"
    if settings.special_tokens != "include":
        return "special-token positions excluded from pooling"
    if settings.pooling != "max" or settings.activation != "log1p_relu":
        return f"pooling {settings.pooling}/{settings.activation}"
    return None


def clear_st_files(directory: str | Path) -> None:
    """Remove ST files written by an earlier save (a re-save must not leave stale routes behind)."""
    d = Path(directory)
    for name in ST_FILES:
        (d / name).unlink(missing_ok=True)
    for name in ST_DIRS:
        if (d / name).is_dir():
            shutil.rmtree(d / name)


def write_st_files(directory: str | Path, settings, tokenizer, vocab_size: int) -> list[Path]:
    """Write sentence-transformers' configuration beside a saved lexray model (see the module docstring).

    Args:
        directory: the folder :meth:`SparseEncoder.save_pretrained` wrote (backbone, tokenizer, settings).
        settings: the model's :class:`~lexray.models.settings.EncoderSettings`.
        tokenizer: its Hugging Face tokenizer (saved again, with a query-length limit, for the inference-free
            query route).
        vocab_size: |V| of the output representation.

    Returns:
        the files and folders written.
    """
    d = Path(directory)
    clear_st_files(d)
    written: list[Path] = []
    reason = st_support(settings)
    st_config = {"__version__": _versions(), "model_type": "SparseEncoder",
                 "prompts": {"query": settings.query_prefix, "document": settings.doc_prefix},
                 "default_prompt_name": "document", "similarity_fn_name": "dot"}
    if reason is not None:
        _dump(d / MODULES_FILE, [{"idx": 0, "name": "0", "path": "", "type": REFUSE_CLASS}])
        _dump(d / ST_CONFIG_FILE, {**st_config, "lexray_note": f"not loadable by sentence-transformers: {reason}"})
        return [d / MODULES_FILE, d / ST_CONFIG_FILE]

    transformer_cfg = {
        "transformer_task": "fill-mask",
        "modality_config": {"text": {"method": "forward", "method_output_name": "logits"}},
        "module_output_name": "token_embeddings",
        "query_length": settings.query_max_length,
        "document_length": settings.doc_max_length,
    }
    # Plain encode() (no task) truncates at the tokenizer's model_max_length: use encode_query / encode_document.
    _dump(d / TRANSFORMER_CONFIG_FILE, transformer_cfg)
    pooling = {"pooling_strategy": "max", "activation_function": "relu", "embedding_dimension": int(vocab_size)}
    written.append(d / TRANSFORMER_CONFIG_FILE)

    if not settings.inference_free_queries:
        (d / POOLING_DIR).mkdir()
        _dump(d / POOLING_DIR / "config.json", pooling)
        _dump(d / MODULES_FILE, [{"idx": 0, "name": "0", "path": "", "type": _T},
                                 {"idx": 1, "name": "1", "path": POOLING_DIR, "type": _POOL}])
        _dump(d / ST_CONFIG_FILE, st_config)
        return [*written, d / POOLING_DIR, d / MODULES_FILE, d / ST_CONFIG_FILE]

    # Inference-free queries: Router(query -> SparseStaticEmbedding, document -> Transformer + SpladePooling).
    from safetensors.torch import save_file

    q = d / QUERY_DIR
    q.mkdir()
    n_special = tokenizer.num_special_tokens_to_add(pair=False)
    tokenizer.save_pretrained(q)
    tok_cfg_path = q / "tokenizer_config.json"
    tok_cfg = json.loads(tok_cfg_path.read_text())
    # lexray truncates [special] + prefix + text at query_max_length and ignores the special tokens; ST's static
    # route tokenizes without special tokens and truncates at model_max_length.
    tok_cfg["model_max_length"] = max(1, settings.query_max_length - n_special)
    _dump(tok_cfg_path, tok_cfg)
    weight = torch.ones(int(vocab_size), dtype=torch.float32)
    if settings.query_idf:
        ids = torch.tensor(list(settings.query_idf.keys()), dtype=torch.long)
        weight[ids] = torch.tensor(list(settings.query_idf.values()), dtype=torch.float32)
    special = [i for i in tokenizer.all_special_ids if 0 <= i < vocab_size]
    weight[special] = 0.0
    save_file({"weight": weight}, str(q / "model.safetensors"))
    _dump(q / "config.json", {"frozen": True})
    (d / DOC_POOLING_DIR).mkdir()
    _dump(d / DOC_POOLING_DIR / "config.json", pooling)
    _dump(d / ROUTER_CONFIG_FILE, {
        "types": {QUERY_DIR: _STATIC, ".": _T, DOC_POOLING_DIR: _POOL},
        "structure": {"query": [QUERY_DIR], "document": [".", DOC_POOLING_DIR]},
        "parameters": {"default_route": "document", "allow_empty_key": True, "route_mappings": {}},
    })
    _dump(d / MODULES_FILE, [{"idx": 0, "name": "0", "path": "", "type": _ROUTER}])
    _dump(d / ST_CONFIG_FILE, st_config)
    return [*written, q, d / DOC_POOLING_DIR, d / ROUTER_CONFIG_FILE, d / MODULES_FILE, d / ST_CONFIG_FILE]


# ---------------------------------------------------------------------------------------------------------------
# Reading sentence-transformers SPLADE folders


def is_st_folder(directory: str | Path) -> bool:
    return (Path(directory) / MODULES_FILE).is_file()


def _read_json(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise STFormatError(f"{path}: not found (referenced by the sentence-transformers configuration)") from None
    except json.JSONDecodeError as e:
        raise STFormatError(f"{path}: invalid JSON: {e}") from None


def _pooling_settings(path: Path) -> None:
    cfg = _read_json(path / "config.json")
    strategy = cfg.get("pooling_strategy", "max")
    act = cfg.get("activation_function", "relu")
    if strategy != "max" or act != "relu":
        raise STFormatError(f"{path / 'config.json'}: SpladePooling pooling_strategy={strategy!r}, "
                            f"activation_function={act!r}; lexray implements max pooling of log(1 + relu(x)) "
                            "only (pooling_strategy 'max', activation_function 'relu')")


def _transformer_settings(root: Path, sub: str) -> tuple[Path, dict[str, Any]]:
    folder = (root / sub) if sub not in ("", ".") else root
    cfg_path = folder / TRANSFORMER_CONFIG_FILE
    cfg = _read_json(cfg_path) if cfg_path.is_file() else {}
    task = cfg.get("transformer_task", "fill-mask")
    if task != "fill-mask":
        raise STFormatError(f"{cfg_path}: transformer_task={task!r}; a SPLADE model needs 'fill-mask'")
    out: dict[str, Any] = {}
    max_len = cfg.get("max_seq_length")
    q_len = cfg.get("query_length") or max_len
    d_len = cfg.get("document_length") or max_len
    if q_len:
        out["query_max_length"] = int(q_len)
    if d_len:
        out["doc_max_length"] = int(d_len)
    return folder, out


def read_st_folder(directory: str | Path) -> tuple[Path, dict[str, Any]]:
    """Map an ST SPLADE folder to ``(backbone folder, EncoderSettings fields)``.

    Supported: ``[Transformer|MLMTransformer (fill-mask), SpladePooling(max, relu)]`` and a ``Router`` whose
    query route is one ``SparseStaticEmbedding`` and whose document route is ``[Transformer, SpladePooling]``
    (inference-free queries: the static weights become ``query_idf``). Prompts become prefixes.

    Raises:
        STFormatError: another module layout, sum pooling, ST's double-log activation, or missing files (the
            message names the file).
    """
    root = Path(directory)
    modules = _read_json(root / MODULES_FILE)
    types = [m.get("type", "") for m in modules]
    fields: dict[str, Any] = {"kind": "mlm", "special_tokens": "include"}
    st_cfg = _read_json(root / ST_CONFIG_FILE) if (root / ST_CONFIG_FILE).is_file() else {}
    prompts = st_cfg.get("prompts") or {}
    if prompts.get("query"):
        fields["query_prefix"] = prompts["query"]
    if prompts.get("document"):
        fields["doc_prefix"] = prompts["document"]
    if REFUSE_CLASS in types:
        raise STFormatError(f"{root / MODULES_FILE}: a lexray model ST cannot load; it has lexray_encoder.json")

    if len(modules) == 2 and types[0] in (_T, _LEGACY_MLM) and types[1] == _POOL:
        backbone, lengths = _transformer_settings(root, modules[0].get("path", ""))
        _pooling_settings(root / modules[1]["path"])
        return backbone, {**fields, **lengths}
    if len(modules) == 1 and types[0] == _ROUTER:
        sub = modules[0].get("path", "")
        rroot = root / sub if sub else root
        rcfg = _read_json(rroot / ROUTER_CONFIG_FILE)
        rtypes, struct = rcfg.get("types", {}), rcfg.get("structure", {})
        q_route, d_route = struct.get("query", []), struct.get("document", [])
        if (len(q_route) != 1 or rtypes.get(q_route[0]) != _STATIC or len(d_route) != 2
                or rtypes.get(d_route[0]) not in (_T, _LEGACY_MLM) or rtypes.get(d_route[1]) != _POOL):
            raise STFormatError(f"{rroot / ROUTER_CONFIG_FILE}: routes {struct} with types {rtypes}; lexray reads "
                                "query=[SparseStaticEmbedding], document=[Transformer, SpladePooling]")
        backbone, lengths = _transformer_settings(rroot, d_route[0])
        _pooling_settings(rroot / d_route[1])
        qdir = rroot / q_route[0]
        weight = _static_weight(qdir)
        idf = {i: float(w) for i, w in enumerate(weight.tolist()) if w != 1.0}
        tok_cfg = _read_json(qdir / "tokenizer_config.json") if (qdir / "tokenizer_config.json").is_file() else {}
        q_max = tok_cfg.get("model_max_length")
        fields.update(lengths)
        if isinstance(q_max, int) and q_max < 100_000:
            from transformers import AutoTokenizer

            n_special = AutoTokenizer.from_pretrained(str(backbone)).num_special_tokens_to_add(pair=False)
            fields["query_max_length"] = q_max + n_special
        fields.update(inference_free_queries=True, query_idf=idf)
        return backbone, fields
    raise STFormatError(f"{root / MODULES_FILE}: module layout {types} is not a SPLADE model lexray reads "
                        "([Transformer(fill-mask), SpladePooling] or an inference-free Router)")


def _static_weight(qdir: Path) -> torch.Tensor:
    st = qdir / "model.safetensors"
    if st.is_file():
        from safetensors.torch import load_file

        tensors = load_file(str(st))
    elif (qdir / "pytorch_model.bin").is_file():
        tensors = torch.load(qdir / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise STFormatError(f"{qdir}: no model.safetensors (SparseStaticEmbedding weights)")
    if "weight" not in tensors:
        raise STFormatError(f"{qdir}: SparseStaticEmbedding weights have no 'weight' tensor ({list(tensors)})")
    return tensors["weight"].float()
