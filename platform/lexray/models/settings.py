"""The tokenization contract of a sparse encoder, saved beside its weights as ``lexray_encoder.json``.

Why a file of its own: a SPLADE checkpoint is only meaningful together with how its inputs were built (max
lengths, prefixes, whether special-token positions were pooled, inference-free queries). Hugging Face's config
does not record these, so a checkpoint loaded without them silently encodes differently from how it was trained.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SETTINGS_FILE = "lexray_encoder.json"
FORMAT_VERSION = 1


class EncoderSettings(BaseModel):
    """Pooling and tokenization settings of a :class:`~lexray.models.SparseEncoder`."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    kind: Literal["mlm", "decoder"] = "mlm"
    pooling: Literal["max"] = "max"
    activation: Literal["log1p_relu"] = "log1p_relu"
    query_max_length: int = Field(64, ge=1)
    doc_max_length: int = Field(256, ge=1)
    query_prefix: str = ""
    doc_prefix: str = ""
    special_tokens: Literal["include", "exclude"] = "include"
    inference_free_queries: bool = False
    query_idf: dict[int, float] | None = Field(
        None, description="token id -> IDF weight for inference-free queries (absent ids weigh 1.0)")
    query_top_k: int | None = None
    doc_top_k: int | None = None
    chunk_size: int = Field(16, ge=1, description="sequences per (chunk, L, |V|) logits block")
    head_impl: Literal["auto", "fused", "unfused"] = Field(
        "auto", description="how a verified head is executed: 'fused' (vocabulary-blocked, no (B, L, |V|) logits: "
        "lexray.models.fused_head), 'unfused' (one matmul per chunk of chunk_size sequences), 'auto' = fused on "
        "CPU, unfused on accelerators (docs/models.md, 'Head execution'). Same weights within float round-off")
    output_ids: list[int] | None = Field(
        None, description="sorted token ids the head scores (a collection's vocabulary); every other term's "
        "weight is 0. None = all |V|")
    calibration: dict[str, Any] | None = Field(
        None, description="what lexray already applied to these weights, so that no later load applies it twice: "
        "'apc' (VT's Activation Potential Calibration, lexray.vocab.apc: the shift c and per_term) and "
        "'mlm_head_rescale' (the alpha of W <- W / alpha). None = nothing recorded (also every folder written "
        "before this field existed)")
    format_version: int = FORMAT_VERSION

    def record_calibration(self, name: str, value: Any) -> None:
        """Note that ``name`` (``apc`` or ``mlm_head_rescale``) is now part of the weights."""
        self.calibration = {**(self.calibration or {}), name: value}

    def max_length(self, kind: str) -> int:
        return self.query_max_length if kind == "query" else self.doc_max_length

    def prefix(self, kind: str) -> str:
        return self.query_prefix if kind == "query" else self.doc_prefix

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / SETTINGS_FILE
        path.write_text(json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True))
        return path

    @classmethod
    def load(cls, directory: str | Path) -> EncoderSettings | None:
        """Read ``lexray_encoder.json`` from a directory; None if the directory has none.

        Raises:
            ValueError: the file exists but is not valid JSON or has unknown/invalid fields (names the file).
        """
        path = Path(directory) / SETTINGS_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            if data.get("query_idf") is not None:
                data["query_idf"] = {int(k): float(v) for k, v in data["query_idf"].items()}
            return cls.model_validate(data)
        except Exception as e:  # noqa: BLE001 - re-raised with the file name
            raise ValueError(f"{path}: invalid lexray encoder settings: {e}") from None
