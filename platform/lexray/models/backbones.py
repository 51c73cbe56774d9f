"""Loading the backbone of a sparse encoder: MLM encoders as they are, decoder LLMs made bidirectional.

Decoders (LACONIC arXiv:2601.01684 §2.1, ../shared/papers/laconic.txt): SPLADE's max pooling over positions
(eq. (1)) needs every position to see the whole input, so the causal mask is removed and the model "self-adapts"
during contrastive training. In transformers ≥ 5, ``config.is_causal = False`` makes the verified architectures below build a
bidirectional mask (padding still masked) for both sdpa and eager attention; setting ``is_causal`` on attention
modules alone does not, under padding. Architectures whose mask construction was not verified by the tests in
``tests/models/test_backbones.py`` are refused by name rather than silently run causally.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import torch
from torch import nn

from lexray.models.head import expected_output_bias, restore_output_bias
from lexray.paths import resolve_local

log = logging.getLogger(__name__)

VERIFIED_DECODERS = ("llama", "qwen2", "qwen3", "mistral")
"""Decoder ``model_type``s whose bidirectional mode is verified (tests/models/test_backbones.py)."""

_MLM_BODY_HEAD = {
    # model_type: (body attribute, head attributes applied in order)
    "bert": ("bert", ("cls",)),
    "roberta": ("roberta", ("lm_head",)),
    "xlm-roberta": ("roberta", ("lm_head",)),
    "modernbert": ("model", ("head", "decoder")),
}


class UnsupportedModelError(ValueError):
    """The backbone's architecture is not supported (named in the message)."""


def _is_decoder_type(config) -> bool:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    mt = config.model_type
    archs = config.architectures or []
    if any(a.endswith("ForMaskedLM") for a in archs):
        return False
    if any(a.endswith("ForCausalLM") for a in archs):
        return True
    return mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and mt not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def detect_kind(config) -> Literal["mlm", "decoder"]:
    """``"decoder"`` for causal-LM architectures, else ``"mlm"``."""
    return "decoder" if _is_decoder_type(config) else "mlm"


def make_bidirectional(model: nn.Module) -> nn.Module:
    """Remove the causal mask of a verified decoder (LACONIC arXiv:2601.01684 §2.1), in place; returns the model.

    Raises:
        UnsupportedModelError: ``model_type`` not in :data:`VERIFIED_DECODERS`.
    """
    mt = model.config.model_type
    if mt not in VERIFIED_DECODERS:
        raise UnsupportedModelError(
            f"decoder model_type '{mt}' is not verified to run bidirectionally; supported: "
            f"{', '.join(VERIFIED_DECODERS)}")
    for cfg in {id(model.config): model.config, id(getattr(model, "model", model).config):
                getattr(model, "model", model).config}.values():
        cfg.is_causal = False
        if getattr(cfg, "use_sliding_window", False) or getattr(cfg, "sliding_window", None):
            # A sliding window re-introduces a (banded) causal mask in some versions: switch it off.
            if hasattr(cfg, "use_sliding_window"):
                cfg.use_sliding_window = False
            cfg.sliding_window = None
    for module in model.modules():
        if hasattr(module, "is_causal") and isinstance(module.is_causal, bool):
            module.is_causal = False
    return model


def _torch_dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def resolve_model_dir(name_or_path: str) -> Path | None:
    """The local folder behind a model location, or None for a hub id.

    A ``.gguf`` file (a path or ``pkg:<module>/<file>``) is converted once into a cached HF folder
    (:func:`lexray.models.gguf.converted_dir`); a local folder is returned as it is.
    """
    from lexray.models.gguf import converted_dir, is_gguf

    local = resolve_local(name_or_path)
    if is_gguf(local):
        return converted_dir(local)
    return local


def load_backbone(name_or_path: str, kind: Literal["auto", "mlm", "decoder"] = "auto", dtype: str = "float32",
                  trust_remote_code: bool = False, num_layers: int | None = None):
    """Load (backbone, tokenizer, kind) from a hub id, a local directory or a GGUF file; safetensors only.

    Args:
        num_layers: keep only the first N transformer layers (None = all). A departure from every paper's
            recipe, for CPU runs: the kept layers and the LM/MLM head keep their pretrained weights.

    Raises:
        UnsupportedModelError: a decoder type not in :data:`VERIFIED_DECODERS`; ``kind`` disagrees with the
            checkpoint's architecture; or the checkpoint has no LM/MLM head (a bare ``BertModel`` or
            ``LlamaModel``: SPLADE reads term weights off the pretrained head, and a randomly initialised one
            would differ on every load).
        ValueError: ``num_layers`` outside ``1..config.num_hidden_layers``.
        OSError: the location is neither a local directory nor a reachable hub id.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    local = resolve_model_dir(name_or_path)
    src = str(local) if local is not None else name_or_path
    config = AutoConfig.from_pretrained(src, trust_remote_code=trust_remote_code)
    require_head(config, src)
    detected = detect_kind(config)
    if kind != "auto" and kind != detected:
        raise UnsupportedModelError(f"{src}: asked for a '{kind}' backbone but the checkpoint is "
                                    f"'{config.model_type}' ({detected})")
    if detected == "decoder" and config.model_type not in VERIFIED_DECODERS:
        raise UnsupportedModelError(
            f"{src}: decoder model_type '{config.model_type}' is not verified to run bidirectionally; "
            f"supported: {', '.join(VERIFIED_DECODERS)}")
    auto = AutoModelForCausalLM if detected == "decoder" else AutoModelForMaskedLM
    with expected_output_bias(config) as expect:  # a lexray-added head bias: no LOAD REPORT about it
        model, info = auto.from_pretrained(src, dtype=_torch_dtype(dtype), use_safetensors=True,
                                           trust_remote_code=trust_remote_code, output_loading_info=True)
        expect.loaded(model)
    missing = [k for k in info.get("missing_keys", ()) if not _tied_output(model, k)]
    if missing:
        raise UnsupportedModelError(
            f"{src}: the checkpoint lacks weights the {type(model).__name__} needs ({', '.join(sorted(missing)[:4])}"
            f"{' …' if len(missing) > 4 else ''}); they would be randomly initialised, differently on every load")
    tokenizer = AutoTokenizer.from_pretrained(src, trust_remote_code=trust_remote_code)
    _ensure_pad(tokenizer, model)
    restore_output_bias(model, local)  # a bias lexray added to a bias-less head (VT, APC)
    if num_layers is not None:
        keep_layers(model, num_layers)
    if detected == "decoder":
        make_bidirectional(model)
    model.eval()
    return model, tokenizer, detected


def require_head(config, src: str) -> None:
    """Refuse a checkpoint whose architectures have no LM/MLM head (a bare ``BertModel`` / ``LlamaModel``).

    Also called before any encoding by :func:`lexray.encode.identity.check_model` (encode, reencode), so the
    refusal is one line at start rather than an ``ActorDiedError`` inside every encoder actor (issue 24).

    Raises:
        UnsupportedModelError: naming ``src`` and its architectures.
    """
    archs = config.architectures or []
    if archs and not any(a.endswith(("ForMaskedLM", "ForCausalLM")) for a in archs):
        raise UnsupportedModelError(
            f"{src}: architecture {', '.join(archs)} has no LM/MLM head; a SPLADE encoder reads its term weights "
            "off the pretrained head. Use the *ForMaskedLM / *ForCausalLM checkpoint of this model.")


def _tied_output(model: nn.Module, key: str) -> bool:
    """A missing output-embedding weight is expected when the config ties it to the input embeddings."""
    out = model.get_output_embeddings()
    if out is None or not getattr(model.config, "tie_word_embeddings", False):
        return False
    names = {n for n, p in model.named_parameters(remove_duplicate=False) if p is out.weight}
    return key in names


def keep_layers(model: nn.Module, n: int) -> nn.Module:
    """Truncate a backbone to its first ``n`` transformer layers, in place (``config.num_hidden_layers = n``).

    Raises:
        ValueError: ``n`` is not in ``1..num_hidden_layers``.
    """
    layers = transformer_layers(model)
    total = len(layers)
    if not 1 <= n <= total:
        raise ValueError(f"model.num_layers={n}: the backbone has {total} layers")
    if n == total:
        return model
    for _, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == total and list(module) == layers:
            del module[n:]
            break
    for cfg in {id(model.config): model.config}.values():
        cfg.num_hidden_layers = n
        if isinstance(getattr(cfg, "layer_types", None), list):
            cfg.layer_types = cfg.layer_types[:n]
    return model


def _ensure_pad(tokenizer, model) -> None:
    """Decoders often ship without a pad token; pad with EOS (masked out of attention and pooling anyway)."""
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        elif tokenizer.unk_token is not None:
            tokenizer.pad_token = tokenizer.unk_token
        else:
            tokenizer.add_special_tokens({"pad_token": "<pad>"})
            model.resize_token_embeddings(len(tokenizer))
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id


def build_random_backbone(rcfg):
    """Build a random-init backbone (``lexray.config.RandomInitConfig``) over a real tokenizer.

    Used for tests and the CPU default of ``jobs/train_laconic.py`` (a tiny Llama-architecture model over the
    bert-base-uncased tokenizer), and for GPU smoke runs of architectures whose weights cannot be fetched.
    Returns (backbone, tokenizer, kind); |V| is ``len(tokenizer)``.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    local = resolve_local(rcfg.tokenizer)
    tokenizer = AutoTokenizer.from_pretrained(str(local) if local is not None else rcfg.tokenizer)
    vocab = len(tokenizer)
    common = dict(vocab_size=vocab, hidden_size=rcfg.hidden_size, intermediate_size=rcfg.intermediate_size,
                  num_hidden_layers=rcfg.num_hidden_layers, num_attention_heads=rcfg.num_attention_heads,
                  max_position_embeddings=rcfg.max_position_embeddings,
                  tie_word_embeddings=rcfg.tie_word_embeddings, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(rcfg.seed)
    if rcfg.architecture == "bert":
        config = AutoConfig.for_model("bert", **common)
        config.architectures = ["BertForMaskedLM"]
        model = AutoModelForMaskedLM.from_config(config)
        kind = "mlm"
    else:
        extra = {"num_key_value_heads": rcfg.num_key_value_heads or rcfg.num_attention_heads}
        if rcfg.architecture == "qwen3":
            extra["head_dim"] = rcfg.hidden_size // rcfg.num_attention_heads
        config = AutoConfig.for_model(rcfg.architecture, **common, **extra)
        config.architectures = [_causal_arch_name(rcfg.architecture)]
        model = AutoModelForCausalLM.from_config(config)
        kind = "decoder"
    _ensure_pad(tokenizer, model)
    if rcfg.embedding_anisotropy > 0:
        _add_shared_direction(model.get_input_embeddings().weight, rcfg.embedding_anisotropy)
    if kind == "decoder":
        make_bidirectional(model)
    model.eval()
    return model, tokenizer, kind


@torch.no_grad()
def _add_shared_direction(weight: torch.Tensor, ratio: float) -> None:
    """Add ``ratio · mean_row_norm · u`` (u a random unit vector) to every row of an embedding matrix.

    Why: SPLADE's sparsity needs most vocabulary logits ``h·E_t`` to fall below zero at once. Trained LMs can
    do that because their embeddings share a common direction (anisotropy, Ethayarajh 2019): moving ``h``
    against it lowers every logit. Isotropic random-init embeddings have no such direction, so a random-init
    backbone stays dense (every one of the 30,522 terms active) whatever λ_D is. With tied weights the output
    projection gets the same direction.
    """
    u = torch.randn(weight.shape[1], generator=torch.Generator().manual_seed(12345))
    u = u / u.norm()
    weight.add_(ratio * weight.norm(dim=1).mean() * u.to(weight.dtype))


def _causal_arch_name(model_type: str) -> str:
    return {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
            "mistral": "MistralForCausalLM"}[model_type]


def body_and_head(model: nn.Module, kind: str):
    """Split a backbone into (body, head) so the head can run on chunks of hidden states.

    Returns ``(body, head_fn)`` where ``body(input_ids=, attention_mask=)`` returns an object with
    ``last_hidden_state`` (B, L, H) and ``head_fn(hidden)`` returns logits (…, |V|); or ``None`` when the
    architecture's head is not known, in which case callers run the full model per chunk (same memory bound).
    """
    if kind == "decoder":
        return model.model, model.lm_head
    spec = _MLM_BODY_HEAD.get(model.config.model_type)
    if spec is None:
        return None
    body_attr, head_attrs = spec
    body = getattr(model, body_attr, None)
    heads = [getattr(model, a, None) for a in head_attrs]
    if body is None or any(h is None for h in heads):
        return None

    def head_fn(hidden: torch.Tensor) -> torch.Tensor:
        for h in heads:
            hidden = h(hidden)
        return hidden

    return body, head_fn


def transformer_layers(model: nn.Module) -> list[nn.Module]:
    """The repeated transformer blocks (for FSDP2 ``fully_shard`` per layer and activation checkpointing).

    Finds the ``nn.ModuleList`` whose length equals ``config.num_hidden_layers``. Raises ValueError if none.
    """
    n = getattr(model.config, "num_hidden_layers", None)
    for _, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == n:
            return list(module)
    raise ValueError(f"could not find the {n} transformer layers of {type(model).__name__}")
