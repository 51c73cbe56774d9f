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


def test_training_needs_a_model_and_names_the_key(tmp_path):
    import pytest

    from lexray.config import ConfigError
    from lexray.workflows import train_and_evaluate

    cfg = LexrayConfig.model_validate({"out_dir": str(tmp_path / "out")})
    with pytest.raises(ConfigError, match=r"model\.name_or_path is not set"):
        train_and_evaluate(cfg)
    assert not (tmp_path / "out").exists()  # refused before writing anything


def test_mining_uses_data_mining_seed_not_train_seed(tmp_path, monkeypatch, scifact_dir):
    import lexray.data.mining as mining
    import lexray.index.lucene as lucene
    from lexray.workflows import prepare_hard_negatives

    seen = {}

    def fake_mine(dataset, index_dir, **kw):
        seen.update(kw)
        return [], mining.MiningReport(settings={"num_negatives": kw["num_negatives"], "depth": 100})

    monkeypatch.setattr(mining, "mine_bm25_negatives", fake_mine)
    monkeypatch.setattr(lucene, "build_bm25_index", lambda *a, **k: None)
    cfg = LexrayConfig.model_validate({"model": {"name_or_path": "m"}, "data": {"dataset": str(scifact_dir),
                                                                                  "mining_seed": 5},
                                       "train": {"seed": 1}})
    out = prepare_hard_negatives(cfg, tmp_path)
    assert seen["seed"] == 5
    assert out.train.phases[0].data_path.endswith(".bm25.n15.jsonl")


def test_mining_pool_mines_more_negatives_than_a_step_samples(tmp_path, monkeypatch, scifact_dir):
    """data.mining_pool: the file holds the pool, the phase still samples its num_negatives per epoch; a pool
    below a phase's num_negatives is refused, naming the key, before anything is mined."""
    import pytest

    import lexray.data.mining as mining
    import lexray.index.lucene as lucene
    from lexray.config import ConfigError
    from lexray.workflows import prepare_hard_negatives

    seen = {}

    def fake_mine(dataset, index_dir, **kw):
        seen.update(kw)
        return [], mining.MiningReport(settings={"num_negatives": kw["num_negatives"], "depth": 100})

    monkeypatch.setattr(mining, "mine_bm25_negatives", fake_mine)
    monkeypatch.setattr(lucene, "build_bm25_index", lambda *a, **k: None)

    def cfg(pool):
        return LexrayConfig.model_validate({"model": {"name_or_path": "m"},
                                            "data": {"dataset": str(scifact_dir), "mining_pool": pool},
                                            "train": {"phases": [{"num_negatives": 1}]}})

    out = prepare_hard_negatives(cfg(8), tmp_path)
    assert seen["num_negatives"] == 8
    assert out.train.phases[0].data_path.endswith(".bm25.n8.jsonl") and out.train.phases[0].num_negatives == 1
    seen.clear()
    with pytest.raises(ConfigError, match="data.mining_pool"):
        prepare_hard_negatives(cfg(1).model_copy(update={"train": cfg(1).train.model_copy(update={
            "phases": [cfg(1).train.phases[0].model_copy(update={"num_negatives": 3})]})}), tmp_path / "b")
    assert not seen
