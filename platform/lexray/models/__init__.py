"""Sparse encoders: SPLADE over MLM encoders and over bidirectional decoder LLMs (LACONIC)."""

from lexray.models.backbones import VERIFIED_DECODERS, UnsupportedModelError, make_bidirectional
from lexray.models.encoder import SparseEncoder, load_encoder
from lexray.models.head import mlm_head_norm, rescale_mlm_head
from lexray.models.pooling import splade_max_pool
from lexray.models.settings import EncoderSettings
from lexray.models.sparse import to_sparse

__all__ = [
    "VERIFIED_DECODERS",
    "EncoderSettings",
    "SparseEncoder",
    "UnsupportedModelError",
    "load_encoder",
    "make_bidirectional",
    "mlm_head_norm",
    "rescale_mlm_head",
    "splade_max_pool",
    "to_sparse",
]
