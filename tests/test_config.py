from __future__ import annotations

import pytest

from lexray.config import ConfigError, load_config, save_config

BASE = {"model": {"name_or_path": "shared:models/splade-tiny"}}


def test_yaml_recipe_with_include_and_overrides(tmp_path):
    (tmp_path / "base.yaml").write_text("model:\n  name_or_path: m\n  doc_max_length: 128\nencode:\n  batch_size: 8\n")
    (tmp_path / "r.yaml").write_text("include: base.yaml\nencode:\n  batch_size: 16\n")
    cfg = load_config(tmp_path / "r.yaml", ["model.doc_max_length=192", "train.phases.0.lr=1e-4",
                                            "eval.metrics=[nDCG@10]"])
    assert cfg.encode.batch_size == 16
    assert cfg.model.doc_max_length == 192
    assert cfg.train.phases[0].lr == pytest.approx(1e-4)
    assert cfg.eval.metrics == ["nDCG@10"]


def test_unknown_key_names_key_and_file(tmp_path):
    (tmp_path / "bad.yaml").write_text("model:\n  name_or_path: m\n  doc_max_lenght: 5\n")
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "bad.yaml")
    assert "bad.yaml" in str(e.value) and "model.doc_max_lenght" in str(e.value) and "unknown key" in str(e.value)


def test_wrong_type_in_override_is_an_error():
    with pytest.raises(ConfigError, match="encode.batch_size"):
        load_config(None, ["encode.batch_size=many"], base=BASE)
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["encode.batch_size"], base=BASE)


def test_model_needs_exactly_one_source():
    with pytest.raises(ConfigError, match="exactly one"):
        load_config(None, base={"model": {}})


def test_resolved_config_roundtrips(tmp_path):
    cfg = load_config(None, ["index.quant_bits=8"], base=BASE)
    path = save_config(cfg, tmp_path)
    again = load_config(path)
    assert again == cfg


def test_invalid_yaml_names_file(tmp_path):
    (tmp_path / "x.yaml").write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="x.yaml"):
        load_config(tmp_path / "x.yaml")
