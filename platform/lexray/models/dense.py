"""The dense bi-encoder of lexray's LexSemBridge track: texts → (B, d) vectors, with an optional LexSemBridge.

Source: LexSemBridge (arXiv:2508.17858), ../shared/papers/lexsembridge.txt §3.1 (Eq. 1-2: a dual encoder, pooled
hidden states, cosine similarity) and §3.4-3.5 (the bridge, :mod:`lexray.models.bridge`). Pooling is the mean over
attention-mask positions or the first ([CLS]) position; similarity is cosine (vectors L2-normalised by
:meth:`DenseEncoder.encode`) or the dot product.

What it loads: any Hugging Face encoder folder or hub id (``*ForMaskedLM`` checkpoints keep their MLM head, which
CLR needs), a sentence-transformers folder (``[Transformer, Pooling(mean|cls), Normalize?]``; pooling and
normalisation read from its files; a ``Dense`` projection module is refused), a random-init BERT
(``model.random_init``) or a lexray dense folder (``lexray_dense.json`` + ``lexray_bridge.safetensors``: the
bridge is saved with the model and every reload uses it, unlike the authors' code whose ``save()`` kept only the
backbone).

Why its own settings file: like ``lexray_encoder.json`` for SPLADE, a dense checkpoint is only meaningful with its
pooling, similarity, lengths and bridge; Hugging Face's config records none of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from lexray.models.batching import encode_batched
from lexray.models.bridge import BridgeConfigError, LexSemBridge

DENSE_SETTINGS_FILE = "lexray_dense.json"
BRIDGE_FILE = "lexray_bridge.safetensors"
Kind = Literal["query", "document"]


class DenseSettings(BaseModel):
    """Everything besides the weights that decides a dense model's vectors (``lexray_dense.json``)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    pooling: Literal["mean", "cls"] = "mean"
    similarity: Literal["cosine", "dot"] = "cosine"
    bridge: Literal["none", "slr", "llr", "clr"] = "none"
    bridge_side: Literal["query", "passage", "both"] = "query"
    lexical_only: bool = False
    llr_form: Literal["paper", "token_weight"] = "paper"
    clr_form: Literal["paper", "logits"] = "paper"
    bridge_init: Literal["default", "zero", "embedding"] = "default"
    bridge_init_scale: float = 1.0
    bridge_w_norm: Literal["none", "l1"] = "none"
    bridge_align: Literal["full", "tied"] = "full"
    query_max_length: int = Field(64, ge=1)
    doc_max_length: int = Field(256, ge=1)
    query_prefix: str = ""
    doc_prefix: str = ""

    def max_length(self, kind: str) -> int:
        return self.query_max_length if kind == "query" else self.doc_max_length

    def prefix(self, kind: str) -> str:
        return self.query_prefix if kind == "query" else self.doc_prefix

    def bridged(self, kind: str) -> bool:
        """Whether the bridge modulates this side (``bridge_side``, paper Table 5)."""
        if self.bridge == "none":
            return False
        return self.bridge_side == "both" or (self.bridge_side == "query") == (kind == "query")


class DenseEncoder(nn.Module):
    """Dense bi-encoder: ``forward`` → (B, d) float32 un-normalised vectors; ``encode`` → normalised for cosine.

    Attributes:
        backbone: the Hugging Face model (``*ForMaskedLM`` with its head, or a bare encoder).
        tokenizer, settings (:class:`DenseSettings`), bridge (:class:`LexSemBridge` or None).
        body: the transformer body; mlm_head: hidden → logits, or None (no MLM head).

    Raises:
        BridgeConfigError: CLR without an MLM head, or an MLM head whose |V| differs from the tokenizer's (each
            names its ``model.dense.*`` key).
    """

    def __init__(self, backbone: nn.Module, tokenizer, settings: DenseSettings):
        super().__init__()
        from lexray.models.backbones import body_and_head

        self.backbone, self.tokenizer, self.settings = backbone, tokenizer, settings
        split = body_and_head(backbone, "mlm") if _has_mlm_head(backbone) else None
        # a plain tuple, not submodules: the body's parameters are the backbone's (one name each in state_dict)
        self._split = (split[0], split[1]) if split is not None else (backbone, None)
        self.bridge: LexSemBridge | None = None
        if settings.bridge != "none":
            if settings.bridge == "clr" and self.mlm_head is None:
                raise BridgeConfigError(
                    f"model.dense.bridge=clr needs an MLM head (Eq. 7), and {type(backbone).__name__} "
                    f"({getattr(backbone.config, 'name_or_path', '') or backbone.config.model_type}) has none: "
                    "choose slr or llr, or a *ForMaskedLM checkpoint")
            vocab = len(tokenizer)
            head_vocab = backbone.get_output_embeddings().weight.shape[0] if self.mlm_head is not None else vocab
            if settings.bridge == "clr" and head_vocab != vocab:
                raise BridgeConfigError(f"model.dense.bridge=clr: the MLM head scores {head_vocab} terms but the "
                                        f"tokenizer has {vocab} (dimension mismatch)")
            self.bridge = LexSemBridge(settings.bridge, head_vocab, self.hidden_size, self.dim,
                                       settings.llr_form, settings.clr_form, settings.bridge_init,
                                       settings.bridge_w_norm, settings.bridge_align)
            if settings.bridge_init == "embedding":
                self.bridge.init_from_embeddings(backbone.get_input_embeddings().weight, settings.bridge_init_scale)
        self.train(backbone.training)

    # ------------------------------------------------------------------ properties
    @property
    def body(self) -> nn.Module:
        """The transformer body (hidden states)."""
        return self._split[0]

    @property
    def mlm_head(self):
        """hidden (…, d_h) → logits (…, |V|), or None without an MLM head."""
        return self._split[1]

    @property
    def hidden_size(self) -> int:
        return int(self.backbone.config.hidden_size)

    @property
    def dim(self) -> int:
        """d: the width of the output vectors (the hidden size; no projection layer)."""
        return self.hidden_size

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def transformer_layers(self) -> list[nn.Module]:
        from lexray.models.backbones import transformer_layers

        return transformer_layers(self.backbone)

    # ------------------------------------------------------------------ tokenization and forward
    def tokenize(self, texts: Sequence[str], kind: Kind = "document", max_length: int | None = None
                 ) -> dict[str, torch.Tensor]:
        """``input_ids``, ``attention_mask`` (B, L) long and ``pool_mask`` (B, L) bool (= the attention mask)."""
        if isinstance(texts, str):
            raise TypeError("tokenize() takes a list of texts, not a single string")
        prefix = self.settings.prefix(kind)
        b = self.tokenizer([prefix + t for t in texts], padding=True, truncation=True,
                           max_length=max_length or self.settings.max_length(kind), return_tensors="pt")
        return {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"],
                "pool_mask": b["attention_mask"].bool()}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, pool_mask: torch.Tensor | None = None,
                kind: Kind = "document") -> torch.Tensor:
        """(B, d) float32: pooled hidden states (Eq. 1), times ``q_lex`` (Eq. 9) on a bridged side, or ``q_lex``
        alone with ``lexical_only``. Not normalised (the loss and :meth:`encode` normalise for cosine)."""
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if self.settings.pooling == "cls":
            e = hidden[:, 0]
        else:
            m = attention_mask.unsqueeze(-1).to(hidden.dtype)
            e = (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
        e = e.float()
        if self.bridge is not None and self.settings.bridged(kind):
            q_lex = self.bridge(input_ids, attention_mask, hidden, self.mlm_head,
                                self.backbone.get_input_embeddings().weight)
            e = q_lex if self.settings.lexical_only else e * q_lex
        return e

    def encode(self, texts: Sequence[str], kind: Kind = "document", batch_size: int = 32,
               device: str | torch.device | None = None, show_progress: bool = False) -> torch.Tensor:
        """(N, d) float32 on CPU in input order, L2-normalised when ``similarity == "cosine"``; length-sorted
        batches, no gradients; a tokenless text gets the zero vector (:func:`lexray.models.batching.encode_batched`).
        """
        return encode_batched(self, texts, kind, self.dim, batch_size, device, show_progress, finish=self.finish)

    def finish(self, reps: torch.Tensor) -> torch.Tensor:
        """Vectors as they are searched: L2-normalised for cosine similarity (Eq. 2), else unchanged."""
        if self.settings.similarity == "cosine":
            return torch.nn.functional.normalize(reps.float(), dim=-1)
        return reps.float()

    # ------------------------------------------------------------------ persistence
    def save_pretrained(self, directory: str | Path) -> Path:
        """Backbone (safetensors, MLM head included), tokenizer, ``lexray_dense.json`` and, with a bridge,
        ``lexray_bridge.safetensors`` (the alignment layer W and LLR's U, b)."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(directory, safe_serialization=True)
        self.tokenizer.save_pretrained(directory)
        (directory / DENSE_SETTINGS_FILE).write_text(json.dumps(self.settings.model_dump(mode="json"), indent=2,
                                                                sort_keys=True))
        if self.bridge is not None:
            save_file({k: v.detach().contiguous().cpu() for k, v in self.bridge.state_dict().items()},
                      str(directory / BRIDGE_FILE))
        write_st_dense_files(directory, self.settings, self.dim)
        return directory


def write_st_dense_files(directory: Path, settings: DenseSettings, dim: int) -> None:
    """sentence-transformers' files beside a saved dense model, so ``SentenceTransformer(folder)`` gives lexray's
    document and query vectors (``encode_document`` / ``encode_query``: Transformer with lexray's two lengths,
    Pooling mean|cls, Normalize for cosine; prompts = the prefixes). A model with a bridge (or lexical-only)
    gets a module ST refuses to load with the reason: ST has no module for the bridge's modulation."""
    from lexray.models import st_compat

    st_compat.clear_st_files(directory)
    for sub in ("1_Pooling", "2_Normalize"):
        if (directory / sub).is_dir():
            import shutil

            shutil.rmtree(directory / sub)
    config = {"__version__": st_compat._versions(), "model_type": "SentenceTransformer",
              "prompts": {"query": settings.query_prefix, "document": settings.doc_prefix},
              "default_prompt_name": "document",
              "similarity_fn_name": "cosine" if settings.similarity == "cosine" else "dot"}
    if settings.bridge != "none":
        st_compat._dump(directory / st_compat.MODULES_FILE,
                        [{"idx": 0, "name": "0", "path": "", "type": st_compat.REFUSE_CLASS}])
        st_compat._dump(directory / st_compat.ST_CONFIG_FILE,
                        {**config, "lexray_note": f"not loadable by sentence-transformers: the LexSemBridge "
                                                  f"({settings.bridge}) modulates the vector"})
        return
    st_compat._dump(directory / st_compat.TRANSFORMER_CONFIG_FILE, {
        "transformer_task": "feature-extraction",
        "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
        "module_output_name": "token_embeddings",
        "query_length": settings.query_max_length, "document_length": settings.doc_max_length})
    (directory / "1_Pooling").mkdir()
    st_compat._dump(directory / "1_Pooling" / "config.json", {
        "word_embedding_dimension": dim, "pooling_mode_cls_token": settings.pooling == "cls",
        "pooling_mode_mean_tokens": settings.pooling == "mean"})
    modules = [{"idx": 0, "name": "0", "path": "", "type": st_compat._T},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if settings.similarity == "cosine":
        (directory / "2_Normalize").mkdir()
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    st_compat._dump(directory / st_compat.MODULES_FILE, modules)
    st_compat._dump(directory / st_compat.ST_CONFIG_FILE, config)


def _has_mlm_head(backbone: nn.Module) -> bool:
    """A ``*ForMaskedLM`` model with its output embeddings (CLR's MLM head)."""
    if not type(backbone).__name__.endswith("ForMaskedLM"):
        return False
    return hasattr(backbone, "get_output_embeddings") and backbone.get_output_embeddings() is not None


def _st_dense_fields(root: Path) -> tuple[Path, dict]:
    """A sentence-transformers dense folder → (transformer folder, DenseSettings fields).

    Raises:
        BridgeConfigError: a module lexray does not reproduce (``Dense`` projection: the vector would have another
            dimension; max / weighted pooling), naming the file.
    """
    modules = json.loads((root / "modules.json").read_text())
    fields: dict = {"similarity": "dot"}
    folder = root
    for m in modules:
        typ, sub = m.get("type", ""), root / m.get("path", "")
        name = typ.rsplit(".", 1)[-1]
        if name == "Transformer":
            folder = sub
            cfg_file = sub / "sentence_bert_config.json"
            if cfg_file.is_file() and (n := json.loads(cfg_file.read_text()).get("max_seq_length")):
                fields["query_max_length"] = fields["doc_max_length"] = int(n)
        elif name == "Pooling":
            p = json.loads((sub / "config.json").read_text())
            if p.get("pooling_mode_cls_token"):
                fields["pooling"] = "cls"
            elif p.get("pooling_mode_mean_tokens", p.get("pooling_mode") == "mean"):
                fields["pooling"] = "mean"
            else:
                raise BridgeConfigError(f"{sub / 'config.json'}: pooling other than mean or cls is not supported")
        elif name == "Normalize":
            fields["similarity"] = "cosine"
        else:
            raise BridgeConfigError(f"{root / 'modules.json'}: module {typ!r} is not supported by lexray's dense "
                                    "encoder (a Dense layer changes the vector dimension: dimension mismatch)")
    return folder, fields


def load_dense_encoder(model_cfg) -> DenseEncoder:
    """A :class:`DenseEncoder` from a :class:`lexray.config.ModelConfig` whose ``dense`` section is set.

    Settings: the folder's ``lexray_dense.json`` (or sentence-transformers files), then ``model.dense`` and
    ``model.*_max_length`` / ``*_prefix`` overrides (None keeps the folder's value).

    Raises:
        lexray.config.ConfigError: no model source. BridgeConfigError: CLR without an MLM head; a bridge file
            whose shapes do not fit this model, or a saved bridge another than ``model.dense.bridge`` asks for.
        FileNotFoundError: a local folder that does not exist.
    """
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoTokenizer

    from lexray.paths import resolve_local

    model_cfg.require_source()
    dcfg = model_cfg.dense
    fields: dict = {}
    local = None
    if model_cfg.random_init is not None:
        from lexray.models.backbones import build_random_backbone

        backbone, tokenizer, _ = build_random_backbone(model_cfg.random_init)
    else:
        local = resolve_local(str(model_cfg.name_or_path))
        if local is not None and not local.exists():
            raise FileNotFoundError(f"model.name_or_path: {local} does not exist")
        src = str(local) if local is not None else str(model_cfg.name_or_path)
        weights = src
        if local is not None and (local / DENSE_SETTINGS_FILE).is_file():
            fields = json.loads((local / DENSE_SETTINGS_FILE).read_text())
        elif local is not None and (local / "modules.json").is_file():
            folder, fields = _st_dense_fields(local)
            weights = str(folder)
        config = AutoConfig.from_pretrained(weights, trust_remote_code=model_cfg.trust_remote_code)
        mlm = any(a.endswith("ForMaskedLM") for a in (config.architectures or []))
        cls = AutoModelForMaskedLM if mlm else AutoModel
        backbone = cls.from_pretrained(weights, dtype=getattr(torch, model_cfg.dtype),
                                       trust_remote_code=model_cfg.trust_remote_code)
        tokenizer = AutoTokenizer.from_pretrained(src if (Path(src) / "tokenizer_config.json").exists()
                                                  or local is None else weights)
        backbone.eval()
    saved_bridge = fields.get("bridge", "none")
    over = {k: v for k, v in (dcfg.model_dump() if dcfg is not None else {}).items()
            if v is not None and k != "shard_dtype"}
    for key in ("query_max_length", "doc_max_length", "query_prefix", "doc_prefix"):
        if getattr(model_cfg, key) is not None:
            over[key] = getattr(model_cfg, key)
    has_file = local is not None and (local / BRIDGE_FILE).is_file()
    if has_file and over.get("bridge", saved_bridge) != saved_bridge:
        raise BridgeConfigError(f"model.dense.bridge={over['bridge']!r}, but {local} was trained with bridge "
                                f"{saved_bridge!r} ({BRIDGE_FILE})")
    enc = DenseEncoder(backbone, tokenizer, DenseSettings(**{**fields, **over}))
    if has_file and enc.bridge is not None:
        _load_bridge(enc.bridge, local / BRIDGE_FILE)
    return enc


def _load_bridge(bridge: LexSemBridge, path: Path) -> None:
    """Load the saved bridge weights; every tensor's shape is checked first (dimension mismatch → the key)."""
    from safetensors.torch import load_file

    sd = load_file(str(path))
    own = bridge.state_dict()
    if set(sd) != set(own):
        raise BridgeConfigError(f"{path}: tensors {sorted(sd)} do not match the {bridge.kind} bridge "
                                f"({sorted(own)}): model.dense.llr_form or model.dense.bridge differs")
    for k, v in sd.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise BridgeConfigError(f"{path}: '{k}' has shape {tuple(v.shape)}, this model needs "
                                    f"{tuple(own[k].shape)} (dimension mismatch: |V| or d differ)")
    bridge.load_state_dict(sd)


def is_dense_folder(path: str | Path) -> bool:
    """A lexray dense folder (``lexray_dense.json``) or a sentence-transformers dense folder (a ``Pooling`` module,
    no SPLADE pooling, no ``lexray_encoder.json``): what ``lexray evaluate`` / ``encode`` evaluate as dense."""
    root = Path(path)
    if (root / DENSE_SETTINGS_FILE).is_file():
        return True
    if (root / "lexray_encoder.json").is_file() or not (root / "modules.json").is_file():
        return False
    try:
        types = [m.get("type", "").rsplit(".", 1)[-1] for m in json.loads((root / "modules.json").read_text())]
    except (OSError, ValueError, AttributeError):
        return False
    return "Pooling" in types and not any("Splade" in t or "Sparse" in t or t == "Router" for t in types)


def as_dense_config(cfg, force: bool = False):
    """``cfg`` with a ``model.dense`` section when its model is dense (already set, a dense folder, or ``force``),
    else None. The section is empty (None = what the folder says), so the folder's own settings apply."""
    from lexray.config import DenseConfig
    from lexray.paths import resolve_local

    if cfg.model.dense is not None:
        return cfg
    local = resolve_local(str(cfg.model.name_or_path)) if cfg.model.name_or_path else None
    if not force and not (local is not None and is_dense_folder(local)):
        return None
    return cfg.model_copy(update={"model": cfg.model.model_copy(update={"dense": DenseConfig()})})
