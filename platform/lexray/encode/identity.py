"""What identifies an encoding run: the model's content hash, the run identity its fingerprint hashes, and the
checks that a model can be loaded before anything is written.

Why a module of its own: a shard folder is trusted (kept on resume, read by the index builder) only when its
fingerprint equals the run's. The fingerprint is :func:`lexray.encode.shards.fingerprint` of the identity built
here from the model's bytes (:func:`model_content_hash`), the output-relevant settings and the corpus hash, so
everything that changes a vector changes the fingerprint. :mod:`lexray.store.reencode` hashes the model with the
same function.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from lexray.config import EncodeConfig, ModelConfig
from lexray.fsio import file_sha256

__all__ = ["model_content_hash", "check_model", "normalise_model_cfg", "encode_identity", "diff_identity",
           "model_config_identity", "EXECUTION_KEYS"]

_MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".json", ".txt", ".model", ".tiktoken")


def _hash_files(h, root: Path) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in _MODEL_FILE_SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0")
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        h.update(b"\0")


def model_content_hash(model_cfg: ModelConfig) -> str:
    """sha256 identifying the encoder's weights and tokenization contract.

    Local directory: over the weight files (``*.safetensors``/``*.bin``), the config, tokenizer files and
    ``lexray_encoder.json`` (names and bytes). Local file (a ``.gguf``, also ``pkg:<module>/<file>``): over its
    name and bytes. Random init: over its config (seeded, so deterministic). Hub id:
    over the locally cached snapshot if there is one, else over the id string (prefixed ``id:``).
    """
    from lexray.paths import resolve_local

    h = hashlib.sha256()
    if model_cfg.random_init is not None:
        h.update(b"random_init\0" + json.dumps(model_cfg.random_init.model_dump(mode="json"),
                                               sort_keys=True).encode())
        return "sha256:" + h.hexdigest()
    local = resolve_local(model_cfg.name_or_path)
    if local is None:
        try:
            from huggingface_hub import snapshot_download

            local = Path(snapshot_download(model_cfg.name_or_path, local_files_only=True))
        except Exception:  # noqa: BLE001 - not cached: identify by id only
            return "id:" + str(model_cfg.name_or_path)
    if local.is_file():
        # a single-file model (a GGUF, possibly inside an installed package): that file's bytes. Hashing its
        # folder instead matched nothing (.gguf is not a folder-model suffix): every GGUF had the empty hash.
        h.update(b"file\0" + local.name.encode() + b"\0" + file_sha256(local).encode())
        return "sha256:" + h.hexdigest()
    _hash_files(h, local)
    return "sha256:" + h.hexdigest()


def check_model(model_cfg: ModelConfig) -> None:
    """Fail fast, before anything is written, when the model cannot be loaded: a local path that does not exist
    or holds no ``config.json``, a checkpoint without its LM/MLM head, or a hub id that is neither cached nor
    downloadable.

    Raises:
        FileNotFoundError: the message names the path or id.
        lexray.models.UnsupportedModelError: a local checkpoint without an LM/MLM head (names the folder).
    """
    from lexray.paths import resolve_local

    if model_cfg.require_source().random_init is not None:
        return
    name = str(model_cfg.name_or_path)
    local = resolve_local(name)
    looks_local = name.startswith(("/", ".", "~", "shared:")) or os.sep in name.strip("/").split("/", 1)[-1] \
        or Path(name).expanduser().exists()
    if local is not None and not local.exists():
        raise FileNotFoundError(f"model {name!r}: no such folder ({local})")
    if local is not None:
        folder = local.parent if local.is_file() else local
        if not (folder / "config.json").is_file() and not local.is_file():
            raise FileNotFoundError(f"model {name!r}: {folder} holds no config.json (not a model folder)")
        if local.is_dir() and getattr(model_cfg, "dense", None) is None:  # a dense encoder needs no head
            _check_head(local)
        return
    if looks_local:
        raise FileNotFoundError(f"model {name!r}: no such folder ({Path(name).expanduser().resolve()})")
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(name)
    except Exception as e:  # noqa: BLE001 - re-raised with the id
        raise FileNotFoundError(f"model {name!r}: not a local folder and not loadable from the hub cache "
                                f"({type(e).__name__}: {str(e)[:200]})") from None


def _check_head(folder: Path) -> None:
    """The head check of the loader (:func:`lexray.models.backbones.require_head`) on the folder's config.json
    (issue 24: a head-less model otherwise failed ~30 s later inside every encoder actor)."""
    from transformers import PretrainedConfig

    from lexray.models.backbones import require_head

    try:
        config = PretrainedConfig.from_json_file(str(folder / "config.json"))
    except (OSError, ValueError):
        return  # the loader reports an unreadable config with its own message
    require_head(config, str(folder))


def normalise_model_cfg(model_cfg_or_path: ModelConfig | str | os.PathLike) -> ModelConfig:
    """A ModelConfig whose local path is absolute (Ray workers may not share the driver's working directory)."""
    from lexray.paths import resolve_local

    if isinstance(model_cfg_or_path, ModelConfig):
        cfg = model_cfg_or_path.model_copy()
    else:
        cfg = ModelConfig(name_or_path=str(model_cfg_or_path))
    if cfg.name_or_path is not None:
        local = resolve_local(cfg.name_or_path)
        if local is not None:
            cfg = cfg.model_copy(update={"name_or_path": str(local)})
    return cfg


EXECUTION_KEYS = frozenset({"name_or_path", "chunk_size", "head_impl"})
"""ModelConfig keys left out of a fingerprint: where the model is (its files are hashed instead) and how the head
executes (chunk_size, head_impl: equal within float round-off, tests/models/test_encoder.py), so a folder made
before either knob keeps its fingerprint."""


OPTIONAL_SECTIONS = frozenset({"dense"})
"""ModelConfig sections added after fingerprints existed: hashed only when set, so a sparse model's folder made
before the section keeps its fingerprint."""


def model_config_identity(model_cfg: ModelConfig) -> dict[str, Any]:
    """The part of a ModelConfig that changes a document's vector (the one definition for encode and store)."""
    out = model_cfg.model_dump(mode="json", exclude=set(EXECUTION_KEYS))
    for key in OPTIONAL_SECTIONS:
        if out.get(key) is None:
            out.pop(key, None)
    return out


def encode_identity(model_cfg: ModelConfig, cfg: EncodeConfig, corpus: Path, on_error: str,
                    max_docs: int | None) -> dict[str, Any]:
    """The identity of a corpus encoding run, what its fingerprint hashes (manifest ``identity``).

    ``cfg.rows_per_shard`` must be resolved already (:func:`lexray.encode.plan.resolve_rows_per_shard`). Hashes
    the model files and ``corpus`` (sha256 of their bytes), so it reads them whole.
    """
    identity = {
        "format_version": 1,
        "model_hash": model_content_hash(model_cfg),
        "model_config": model_config_identity(model_cfg),
        "doc_top_k": cfg.doc_top_k, "threshold": cfg.threshold, "rows_per_shard": cfg.rows_per_shard,
        "corpus_sha256": file_sha256(corpus), "on_error": on_error, "max_docs": max_docs,
    }
    if cfg.batching != "length_sorted":  # only when set, so folders made before the knob keep their fingerprint
        identity["batching"] = cfg.batching
    return identity


def diff_identity(old: dict, new: dict) -> str:
    """What differs between two run identities, one ``key: old -> new`` per key (values cut at 120 characters),
    for the refusal message of a folder made by another run."""
    keys = sorted(set(old) | set(new))
    out = []
    for k in keys:
        if old.get(k) != new.get(k):
            out.append(f"{k}: {json.dumps(old.get(k), default=str)[:120]} -> "
                       f"{json.dumps(new.get(k), default=str)[:120]}")
    return "; ".join(out) or "fingerprint differs"
