"""workflows: the trained model's evaluation config does not re-apply load-time transforms."""

from __future__ import annotations

from pathlib import Path

from lexray.config import LexrayConfig
from lexray.workflows import trained_model_config


def test_trained_model_config_does_not_shift_or_rescale_twice():
    """APC's bias shift and the MLM-head rescale are applied when the phase-1 encoder is built and are then part
    of the trained weights; evaluating the checkpoint with them still set would apply them a second time."""
    cfg = LexrayConfig.model_validate({"model": {"name_or_path": "shared:models/splade-tiny", "num_layers": 2,
                                                 "mlm_head_rescale": 4.0, "apc": {"target_rate": 0.02}}})
    m = trained_model_config(cfg, Path("/tmp/trained")).model
    assert m.name_or_path == "/tmp/trained" and m.mlm_head_rescale == 1.0
    assert not m.apc.enabled and m.num_layers == 2
