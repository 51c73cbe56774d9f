"""The SPLADE sparse encoder over an MLM encoder or a bidirectional decoder LLM.

Representation (LACONIC arXiv:2601.01684 eq. (1), SPLADE-max of SPLADE v2 arXiv:2109.10086): ``w_j = max_i log(1 + ReLU(logit_ij))`` over the positions i that
the pool mask allows. Queries and documents share the backbone; they differ in max length, prefix and — for
inference-free queries — in skipping the backbone entirely.

Memory: the backbone body runs once per batch; the vocabulary head then runs on chunks of ``chunk_size``
sequences and each chunk is pooled immediately (:func:`~lexray.models.pooling.splade_max_pool`), so an encode
step holds at most one (chunk, L, |V|) logits tensor: peak ≈ chunk·L·|V|·bytes(dtype) on top of the body's
activations — e.g. 16 × 256 × 30,522 × 4 B ≈ 500 MB for a BERT vocabulary in float32, instead of B·L·|V|·4 B.
Under autograd each chunk is wrapped in activation checkpointing, so training keeps only the (B, |V|) pooled
outputs and recomputes one chunk's logits during backward. That chunked path is the fallback: BERT MLM heads and
decoder LM heads take the fused, vocabulary-blocked head of :mod:`lexray.models.fused_head` (no (B, L, |V|)
tensor at all, for inference and training).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from lexray.models.backbones import (
    body_and_head,
    build_random_backbone,
    load_backbone,
    resolve_model_dir,
    transformer_layers,
)
from lexray.models.batching import encode_batched
from lexray.models.fused_head import VocabProjection, fused_splade_max_pool, vocab_projection
from lexray.models.head import rescale_mlm_head
from lexray.models.pooling import splade_max_pool
from lexray.models.settings import EncoderSettings
from lexray.models.sparse import to_sparse

log = logging.getLogger(__name__)

Kind = Literal["query", "document"]


class SparseEncoder(nn.Module):
    """SPLADE encoder: texts → (B, |V|) non-negative float32 term weights.

    Construct with :meth:`from_pretrained` or :func:`lexray.models.load_encoder`.

    Attributes:
        backbone: the Hugging Face model (``*ForMaskedLM``, or ``*ForCausalLM`` made bidirectional).
        tokenizer: its tokenizer.
        settings: the :class:`EncoderSettings` tokenization contract.
    """

    def __init__(self, backbone: nn.Module, tokenizer, settings: EncoderSettings):
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.settings = settings
        self._split = body_and_head(backbone, settings.kind)
        self._special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
        self._idf_vec: torch.Tensor | None = None
        self.train(backbone.training)  # nn.Module starts in train mode; follow the backbone (eval after load)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, kind: Literal["auto", "mlm", "decoder"] = "auto",
                        dtype: str = "float32", trust_remote_code: bool = False, num_layers: int | None = None,
                        **overrides) -> SparseEncoder:
        """Load a backbone (hub id, local directory or GGUF file; safetensors only) and its ``lexray_encoder.json``.

        ``overrides`` set :class:`EncoderSettings` fields (e.g. ``doc_max_length=192``); settings saved with the
        checkpoint are the defaults. Without a settings file, special-token positions are included for MLM
        encoders (SPLADE's convention) and excluded for decoders (their BOS is an attention sink that otherwise
        dominates max pooling).

        ``num_layers`` keeps only the first N transformer layers (``backbones.keep_layers``). A
        sentence-transformers SPLADE folder (plain or inference-free Router) is read through ``st_compat``.

        Raises:
            UnsupportedModelError: unverified decoder architecture (see ``backbones.VERIFIED_DECODERS``), or a
                checkpoint without its LM/MLM head.
        """
        from lexray.models import st_compat

        local = resolve_model_dir(str(name_or_path))
        saved = EncoderSettings.load(local) if local is not None else None
        st_fields = None
        if saved is None and local is not None and st_compat.is_st_folder(local):
            # a sentence-transformers SPLADE folder (plain or inference-free Router)
            backbone_dir, st_fields = st_compat.read_st_folder(local)
            name_or_path = backbone_dir
        backbone, tokenizer, detected = load_backbone(str(name_or_path), kind, dtype, trust_remote_code,
                                                      num_layers=num_layers)
        base = saved.model_dump() if saved else st_fields or {
            "kind": detected, "special_tokens": "exclude" if detected == "decoder" else "include"}
        base["kind"] = detected
        base.update({k: v for k, v in overrides.items() if v is not None})
        return cls(backbone, tokenizer, EncoderSettings(**base))

    # ------------------------------------------------------------------ properties
    @property
    def vocab_size(self) -> int:
        """|V|: the width of the output representation."""
        return int(self.backbone.get_output_embeddings().weight.shape[0])

    @property
    def is_decoder(self) -> bool:
        return self.settings.kind == "decoder"

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def transformer_layers(self) -> list[nn.Module]:
        """The backbone's transformer blocks (FSDP2 wraps each with ``fully_shard``)."""
        return transformer_layers(self.backbone)

    # ------------------------------------------------------------------ tokenization
    def tokenize(self, texts: Sequence[str], kind: Kind = "document", max_length: int | None = None
                 ) -> dict[str, torch.Tensor]:
        """Tokenize with the contract's prefix and max length.

        Returns dict with ``input_ids`` (B, L) long, ``attention_mask`` (B, L) long and ``pool_mask`` (B, L)
        bool (attention mask, minus special-token positions when ``special_tokens == "exclude"``).
        """
        if isinstance(texts, str):
            raise TypeError("tokenize() takes a list of texts, not a single string")
        prefix = self.settings.prefix(kind)
        batch = self.tokenizer([prefix + t for t in texts], padding=True, truncation=True,
                               max_length=max_length or self.settings.max_length(kind), return_tensors="pt",
                               return_special_tokens_mask=self.settings.special_tokens == "exclude")
        pool = batch["attention_mask"].bool()
        if self.settings.special_tokens == "exclude":
            pool = pool & ~batch["special_tokens_mask"].bool()
        return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"], "pool_mask": pool}

    # ------------------------------------------------------------------ forward
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                pool_mask: torch.Tensor | None = None, kind: Kind = "document") -> torch.Tensor:
        """Encode a tokenized batch.

        Args:
            input_ids: (B, L) long. attention_mask: (B, L) {0,1}. pool_mask: (B, L) bool, defaults to the
                attention mask. kind: ``"query"`` uses the inference-free path if the settings ask for it.

        Returns:
            (B, |V|) float32 non-negative weights; differentiable when grad is enabled.
        """
        if pool_mask is None:
            pool_mask = attention_mask.bool()
        if kind == "query" and self.settings.inference_free_queries:
            return self._bag_of_tokens(input_ids, pool_mask)
        chunk = self.settings.chunk_size
        grad = torch.is_grad_enabled()
        ids = self._output_index(input_ids.device)  # None: score all of |V|
        # None: no split or an unverified head → chunked / full-logits paths
        proj = vocab_projection(self.backbone, self.settings.kind) if self._split is not None else None
        if ids is not None and proj is None:
            raise NotImplementedError(
                f"settings.output_ids (a restricted output vocabulary) needs a verified head layout (BERT MLM or a "
                f"decoder lm_head Linear); {type(self.backbone).__name__} has none")
        if self._split is not None:
            body, head = self._split
            hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            if proj is not None:  # a verified head: fused (CPU) or unfused (accelerators), see _pool_projection
                if ids is None:
                    return self._pool_projection(proj, hidden, pool_mask, chunk, grad)
                # only the collection's terms (settings.output_ids), scattered back into |V| columns
                sub = VocabProjection(proj.transform, proj.weight.index_select(0, ids),
                                      None if proj.bias is None else proj.bias.index_select(0, ids))
                w = self._pool_projection(sub, hidden, pool_mask, chunk, grad)
                return w.new_zeros(w.shape[0], self.vocab_size).index_copy(1, ids, w)
            outs = []
            for s in range(0, hidden.shape[0], chunk):
                h, m = hidden[s:s + chunk], pool_mask[s:s + chunk]
                if grad and hidden.requires_grad:
                    outs.append(checkpoint(_head_pool, head, h, m, use_reentrant=False))
                else:
                    outs.append(_head_pool(head, h, m))
            return torch.cat(outs, 0)
        outs = []
        for s in range(0, input_ids.shape[0], chunk):
            logits = self.backbone(input_ids=input_ids[s:s + chunk],
                                   attention_mask=attention_mask[s:s + chunk]).logits
            outs.append(splade_max_pool(logits, pool_mask[s:s + chunk], inplace=True))
            del logits
        return torch.cat(outs, 0)

    def _pool_projection(self, proj: VocabProjection, hidden: torch.Tensor, pool_mask: torch.Tensor, chunk: int,
                         grad: bool) -> torch.Tensor:
        """SPLADE-max weights (B, |V'|) float32 from hidden states through a verified head ``proj``.

        Why two executions: the fused, vocabulary-blocked head (:mod:`lexray.models.fused_head`) is what makes CPU
        encoding fast (it never writes (B, L, |V|) logits), but it runs a Python loop over sequences and vocabulary
        blocks; on an H100 that loop made splade-tiny encoding 1.9x slower and a training step of an 8-layer
        SmolLM2-width decoder 3.2x (float32) to 5x (bf16) slower than one matmul per chunk of sequences
        (docs/models.md, "Head execution"). ``settings.head_impl``: "auto" picks fused on CPU, unfused elsewhere.
        """
        impl = self.settings.head_impl
        if impl == "fused" or (impl == "auto" and hidden.device.type == "cpu"):
            return fused_splade_max_pool(proj, hidden, pool_mask)
        outs = []
        for s in range(0, hidden.shape[0], chunk):
            h, m = hidden[s:s + chunk], pool_mask[s:s + chunk]
            if grad and (h.requires_grad or proj.weight.requires_grad):
                outs.append(checkpoint(_projection_pool, proj, h, m, use_reentrant=False))
            else:
                outs.append(_projection_pool(proj, h, m))
        return torch.cat(outs, 0)

    def _output_index(self, device: torch.device) -> torch.Tensor | None:
        """(|V'|,) int64 of ``settings.output_ids`` on ``device`` (cached), or None for the full vocabulary."""
        ids = self.settings.output_ids
        if ids is None:
            return None
        cached = getattr(self, "_out_idx", None)
        if cached is None or cached.device != device or cached.numel() != len(ids):
            cached = torch.tensor(ids, dtype=torch.long, device=device)
            self._out_idx = cached
        return cached

    def _bag_of_tokens(self, input_ids: torch.Tensor, pool_mask: torch.Tensor) -> torch.Tensor:
        """Inference-free query: w_t = idf(t) (1.0 if no IDF table) for each distinct allowed token t.

        Special-token positions never contribute here, whatever the pooling policy.
        """
        special = torch.isin(input_ids, self._special_ids.to(input_ids.device))
        keep = pool_mask.bool() & ~special
        out = torch.zeros(input_ids.shape[0], self.vocab_size, device=input_ids.device)
        out.scatter_reduce_(1, input_ids, keep.float(), reduce="amax", include_self=True)
        if self.settings.query_idf:
            if self._idf_vec is None or self._idf_vec.shape[0] != self.vocab_size:
                vec = torch.ones(self.vocab_size)
                ids = torch.tensor(list(self.settings.query_idf.keys()), dtype=torch.long)
                vec[ids] = torch.tensor(list(self.settings.query_idf.values()), dtype=torch.float32)
                self._idf_vec = vec
            out = out * self._idf_vec.to(out.device)
        return out

    # ------------------------------------------------------------------ inference helpers
    def encode(self, texts: Sequence[str], kind: Kind = "document", batch_size: int = 32,
               device: str | torch.device | None = None, show_progress: bool = False) -> torch.Tensor:
        """Encode texts without gradients; returns (N, |V|) float32 on CPU, in input order.

        Texts are processed in length-sorted batches (less padding); the result does not depend on batch size
        beyond float round-off (tests assert ≤ 1e-5). A text with no token (an empty string, for a tokenizer that
        adds no special token: SmolLM2's) gets the zero vector, as it does when padded beside longer texts; a
        batch of such texts alone is not run through the model (a length-0 input fails in its attention).
        """
        return encode_batched(self, texts, kind, self.vocab_size, batch_size, device, show_progress)

    def encode_sparse(self, texts: Sequence[str], kind: Kind = "document", batch_size: int = 32,
                      top_k: int | None = None, threshold: float = 0.0, device=None
                      ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Encode and convert to sparse form: (term ids int32 list, weights float32 list), one pair per text.

        ``top_k`` defaults to the settings' ``query_top_k`` / ``doc_top_k``.
        """
        if top_k is None:
            top_k = self.settings.query_top_k if kind == "query" else self.settings.doc_top_k
        ids: list[np.ndarray] = []
        ws: list[np.ndarray] = []
        for s in range(0, len(texts), max(batch_size * 8, 1)):
            reps = self.encode(texts[s:s + batch_size * 8], kind, batch_size, device)
            i, w = to_sparse(reps, top_k=top_k, threshold=threshold)
            ids.extend(i)
            ws.extend(w)
        return ids, ws

    def decode(self, weights: torch.Tensor, top_k: int = 20) -> list[tuple[str, float]]:
        """Top terms of one (|V|,) representation as (token, weight) pairs — for inspection."""
        vals, idx = torch.topk(weights.float(), k=min(top_k, weights.shape[-1]))
        return [(self.tokenizer.convert_ids_to_tokens(int(i)), float(v)) for v, i in zip(vals, idx, strict=True) if v > 0]

    # ------------------------------------------------------------------ persistence
    def save_pretrained(self, directory: str | Path, card: dict | None = None) -> Path:
        """Write the backbone (safetensors), tokenizer, ``lexray_encoder.json``, sentence-transformers' files
        (:mod:`lexray.models.st_compat`) and a README.md model card (:mod:`lexray.models.card`; ``card`` adds
        base model, training data, recipe, metrics) to ``directory``."""
        from lexray.models import card as model_card
        from lexray.models import st_compat

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(directory, safe_serialization=True)
        self.tokenizer.save_pretrained(directory)
        self.settings.save(directory)
        st_compat.write_st_files(directory, self.settings, self.tokenizer, self.vocab_size)
        model_card.write_model_card(directory, self.settings, vocab_size=self.vocab_size, **(card or {}))
        return directory


def _head_pool(head, hidden: torch.Tensor, pool_mask: torch.Tensor) -> torch.Tensor:
    return splade_max_pool(head(hidden), pool_mask, inplace=True)


def _projection_pool(proj: VocabProjection, hidden: torch.Tensor, pool_mask: torch.Tensor) -> torch.Tensor:
    """Unfused SPLADE-max through a head split: (B, L, |V'|) logits in one matmul, then the one pooling; float32."""
    logits = torch.nn.functional.linear(proj.transform(hidden), proj.weight, proj.bias)
    return splade_max_pool(logits, pool_mask, inplace=True).float()


def load_encoder(cfg) -> SparseEncoder:
    """Build a :class:`SparseEncoder` from a :class:`lexray.config.ModelConfig` (pretrained or random init),
    applying its settings overrides, the MLM-head rescale ``W <- W / mlm_head_rescale`` and then APC
    (``cfg.apc``, :func:`lexray.vocab.apc.apply_apc`: ``b <- b - c``, c given or solved for a target activation
    rate on probe documents).

    Raises:
        lexray.config.ConfigError: ``cfg`` names no model (neither ``name_or_path`` nor ``random_init``); or it
            asks for APC / the rescale on a folder whose ``lexray_encoder.json`` says they are already applied."""
    cfg.require_source()
    overrides = dict(query_max_length=cfg.query_max_length, doc_max_length=cfg.doc_max_length,
                     query_prefix=cfg.query_prefix, doc_prefix=cfg.doc_prefix,
                     inference_free_queries=cfg.inference_free_queries, query_top_k=cfg.query_top_k,
                     doc_top_k=cfg.doc_top_k, chunk_size=cfg.chunk_size, head_impl=cfg.head_impl)
    if cfg.query_idf_path:
        import json

        from lexray.paths import resolve_local

        p = resolve_local(cfg.query_idf_path)
        if p is None:
            raise FileNotFoundError(f"model.query_idf_path: {cfg.query_idf_path} not found")
        overrides["query_idf"] = {int(k): float(v) for k, v in json.loads(p.read_text()).items()}
    if cfg.random_init is not None:
        backbone, tokenizer, kind = build_random_backbone(cfg.random_init)
        special = cfg.special_tokens if cfg.special_tokens != "auto" else (
            "exclude" if kind == "decoder" else "include")
        enc = SparseEncoder(backbone, tokenizer, EncoderSettings(
            kind=kind, special_tokens=special, **{k: v for k, v in overrides.items() if v is not None}))
    else:
        if cfg.special_tokens != "auto":
            overrides["special_tokens"] = cfg.special_tokens
        enc = SparseEncoder.from_pretrained(cfg.name_or_path, kind=cfg.kind, dtype=cfg.dtype,
                                            trust_remote_code=cfg.trust_remote_code, num_layers=cfg.num_layers,
                                            **overrides)
    _refuse_second_calibration(cfg, enc.settings.calibration or {})  # before the corpus pass below
    if cfg.output_vocab == "full":
        enc.settings.output_ids = None
    elif cfg.output_vocab:
        enc.settings.output_ids = collection_output_ids(enc, cfg.output_vocab)
    if cfg.mlm_head_rescale != 1.0:
        rescale_mlm_head(enc.backbone, cfg.mlm_head_rescale)
        enc.settings.record_calibration("mlm_head_rescale", float(cfg.mlm_head_rescale))
    if cfg.apc.enabled:  # VT's Activation Potential Calibration (b <- b - c), after the rescale
        from lexray.vocab.apc import apply_apc

        apply_apc(enc, cfg.apc)
    return enc


def _refuse_second_calibration(cfg, done: dict) -> None:
    """A folder that lexray saved after APC or the MLM-head rescale carries them in its weights
    (``lexray_encoder.json`` ``calibration``): applying ``model.apc`` / ``model.mlm_head_rescale`` again would
    shift the output bias (or divide W) twice, silently — e.g. ``lexray evaluate --config <training recipe>
    --model <trained folder>``. Raises :class:`lexray.config.ConfigError` naming the key and the folder."""
    from lexray.recipes import ConfigError

    fix = ("drop it from the recipe, or --set 'model.apc={}' / --set model.mlm_head_rescale=1.0; the training jobs "
           "evaluate their trained model this way (lexray.workflows.trained_model_config)")
    if cfg.apc.enabled and "apc" in done:
        raise ConfigError(f"model.apc: {cfg.name_or_path} already has APC in its weights (lexray_encoder.json "
                          f"calibration.apc = {done['apc']}); applying it again would shift the output bias twice: "
                          f"{fix}")
    if cfg.mlm_head_rescale != 1.0 and "mlm_head_rescale" in done:
        raise ConfigError(f"model.mlm_head_rescale: {cfg.name_or_path} is already rescaled (lexray_encoder.json "
                          f"calibration.mlm_head_rescale = {done['mlm_head_rescale']}); rescaling again would divide "
                          f"W twice: {fix}")


def collection_output_ids(encoder: SparseEncoder, dataset: str, batch_size: int = 512) -> list[int]:
    """The sorted token ids occurring in a BEIR corpus, tokenized as :meth:`SparseEncoder.encode` tokenizes
    documents (prefix, ``doc_max_length`` truncation, pooled positions only).

    Why: a decoder LM's head scores every one of |V| terms per position (SmolLM2: 576 x 49,152, 80 % of the
    encoder's FLOPs with its first 2 layers), yet a document of the collection can only share a term with a
    query's own tokens or expansions. Restricting the head to the collection's tokens (21,201 of 49,152 for
    SciFact at 128 tokens) cuts a token's FLOPs from 70.8 to 38.6 M with 2 layers. What is lost: expansion
    terms that no document contains (they can only match another expansion). A CPU-budget departure from LACONIC
    (arXiv:2601.01684, laconic.txt §2.1, scores all of |V|); recipes that use it say so.

    Raises:
        FileNotFoundError: the corpus is missing.
    """
    from lexray.data.beir import ReadReport, iter_corpus

    report = ReadReport()
    seen: set[int] = set()
    batch: list[str] = []

    def flush() -> None:
        if batch:
            t = encoder.tokenize(batch, "document")
            seen.update(t["input_ids"][t["pool_mask"].bool()].unique().tolist())
            batch.clear()

    # Bad rows (Cranfield's two empty documents) carry no tokens: they are skipped and counted here whatever
    # data.on_error says; the encode itself applies data.on_error to them (fail, or skip and report).
    for doc in iter_corpus(dataset, on_error="skip", report=report):
        batch.append(doc.full_text)
        if len(batch) >= batch_size:
            flush()
    flush()
    log.info("output vocabulary of %s: %d of %d terms (%s)", dataset, len(seen), encoder.vocab_size,
             "; ".join(report.summary().splitlines()))  # one console line
    return sorted(seen)
