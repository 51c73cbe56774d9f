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


def test_model_source_is_optional_but_required_where_a_model_loads(tmp_path):
    with pytest.raises(ConfigError, match="at most one"):
        load_config(None, base={"model": {"name_or_path": "m", "random_init": {"tokenizer": "t"}}})
    with pytest.raises(ConfigError, match=r"model\.name_or_path is not set"):
        load_config(None, base={"model": {}})
    (tmp_path / "r.yaml").write_text("index:\n  quant_bits: 6\n")
    with pytest.raises(ConfigError, match=r"r\.yaml: model\.name_or_path is not set"):
        load_config(tmp_path / "r.yaml")
    cfg = load_config(tmp_path / "r.yaml", require_model=False)  # lexray index needs no model
    assert cfg.model.name_or_path is None and cfg.model.random_init is None and cfg.index.quant_bits == 6
    with pytest.raises(ConfigError, match=r"model\.name_or_path"):
        cfg.model.require_source()
    assert load_config(None, ["model.name_or_path=m"], require_model=False).model.require_source().name_or_path == "m"


def test_seeds_are_named_for_what_they_seed(tmp_path, caplog):
    cfg = load_config(None, base=BASE)
    assert (cfg.data.mining_seed, cfg.train.seed, cfg.tune.dev_seed, cfg.vt.seed) == (42, 42, 0, 0)
    assert "seed" not in cfg.model_dump()
    # a training-seed study keeps the mined negatives (docs/recipes.md's seed-1 VT rows)
    assert load_config(None, ["train.seed=1"], base=BASE).data.mining_seed == 42
    # the former top-level key still reads, as the mining seed it always was, with a warning
    (tmp_path / "old.yaml").write_text("seed: 7\nmodel:\n  name_or_path: m\n")
    with caplog.at_level("WARNING", logger="lexray.config"):
        old = load_config(tmp_path / "old.yaml")
    assert (old.data.mining_seed, old.train.seed) == (7, 42) and "deprecated" in caplog.text
    assert load_config(None, ["seed=9"], base=BASE).data.mining_seed == 9
    (tmp_path / "both.yaml").write_text("seed: 7\nmodel:\n  name_or_path: m\ndata:\n  mining_seed: 3\n")
    with pytest.raises(ConfigError, match="set only data.mining_seed"):
        load_config(tmp_path / "both.yaml")


def test_every_recipe_resolves_the_same_seeds():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for recipe in sorted((root / "jobs" / "configs").glob("*.yaml")):
        cfg = load_config(recipe)
        assert (cfg.data.mining_seed, cfg.train.seed, cfg.tune.dev_seed, cfg.vt.seed) == (42, 42, 0, 0), recipe.name


def test_resolved_config_roundtrips(tmp_path):
    cfg = load_config(None, ["index.quant_bits=8"], base=BASE)
    path = save_config(cfg, tmp_path)
    again = load_config(path)
    assert again == cfg


def test_invalid_yaml_names_file(tmp_path):
    (tmp_path / "x.yaml").write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="x.yaml"):
        load_config(tmp_path / "x.yaml")


def test_eval_top_k_below_a_metric_cut_off_is_refused_naming_both_keys():
    """Issue 24: ``--set eval.top_k=1`` reported R@100 = 0.889 (recall over a 1-document run cut at 100)."""
    with pytest.raises(ConfigError, match=r"eval\.top_k.*1.*eval\.metrics.*R@100"):
        load_config(None, ["eval.top_k=1"], require_model=False)
    with pytest.raises(ConfigError, match=r"eval\.top_k.*R@1000"):
        load_config(None, ["eval.top_k=999"], require_model=False)
    cfg = load_config(None, ["eval.top_k=100", "eval.metrics=[nDCG@10,R@100]"], require_model=False)
    assert cfg.eval.top_k == 100


def test_eval_transfer_entries_are_validated_naming_the_key():
    """eval.transfer (issue 28 item 6): a bad entry is refused before anything runs, the message names the key."""
    ok = load_config(None, ["eval.transfer=[{dataset: ../shared/datasets/cranfield, on_error: skip}]"],
                     require_model=False)
    (t,) = ok.eval.transfer
    assert (t.label, t.on_error, t.output_vocab, t.split, t.zero_shot) == ("cranfield", "skip", "collection", "test",
                                                                          False)
    assert load_config(None, require_model=False).eval.transfer == []  # default: none
    with pytest.raises(ConfigError, match=r"eval\.transfer\.0\.output_vocab"):
        load_config(None, ["eval.transfer=[{dataset: d, output_vocab: scifact}]"], require_model=False)
    with pytest.raises(ConfigError, match=r"eval\.transfer\.0\.dataset: Field required"):
        load_config(None, ["eval.transfer=[{on_error: skip}]"], require_model=False)
    with pytest.raises(ConfigError, match=r"eval\.transfer\.1\.on_eror: unknown key"):
        load_config(None, ["eval.transfer=[{dataset: a}, {dataset: b, on_eror: skip}]"], require_model=False)
    with pytest.raises(ConfigError, match=r"eval\.transfer\.0.*folder name"):
        load_config(None, ["eval.transfer=[{dataset: a, name: ../x}]"], require_model=False)
    with pytest.raises(ConfigError, match=r"eval\.transfer: two entries are named cranfield"):
        load_config(None, ["eval.transfer=[{dataset: x/cranfield}, {dataset: y/cranfield, output_vocab: full}]"],
                    require_model=False)
