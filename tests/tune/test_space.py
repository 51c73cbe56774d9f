"""Search-space files and config guard rails: invalid spaces and values are rejected with the key named; the
shipped spaces validate against their recipes (apc.yaml only as a file until model.apc exists)."""

from __future__ import annotations

import pytest

from lexray.commands.tune import DEFAULT_RECIPE
from lexray.config import ConfigError, load_config
from lexray.paths import REPO_ROOT
from lexray.tune.space import SpaceError, check_space_against_config, load_space, trial_config


@pytest.fixture(scope="module")
def base():
    return load_config(None, None, base=DEFAULT_RECIPE)


def write(tmp_path, text: str):
    p = tmp_path / "space.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("override,key", [
    ("train.phases.0.flops.lambda_q=-1", "train.phases.0.flops.lambda_q"),
    ("train.phases.0.flops.lambda_d=-0.001", "train.phases.0.flops.lambda_d"),
    ("model.mlm_head_rescale=0", "model.mlm_head_rescale"),
    ("model.mlm_head_rescale=-2", "model.mlm_head_rescale"),
    ("train.phases.0.lora.r=0", "train.phases.0.lora.r"),
    ("tune.dev_queries=0", "tune.dev_queries"),
])
def test_config_rejects_invalid_values_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, [override], base=DEFAULT_RECIPE)


@pytest.mark.parametrize("name", ["flops", "rescale", "laconic"])
def test_shipped_spaces_validate_against_their_recipes(name, base):
    space = load_space(REPO_ROOT / "tune_spaces" / f"{name}.yaml")
    cfg = load_config(REPO_ROOT / space.recipe) if space.recipe else base
    check_space_against_config(space, cfg)
    assert space.main.metric == "dev_nDCG@10" and space.main.mode == "max"


def test_apc_space_validates_against_the_config(base, tmp_path):
    """tune_spaces/apc.yaml searches VT's APC target activation rate (model.apc.target_rate, lexray.vocab.apc);
    a rate outside (0, 1) is rejected with the key named."""
    space = load_space(REPO_ROOT / "tune_spaces" / "apc.yaml")
    assert space.params["model.apc.target_rate"].uniform == (0.1, 0.9)
    check_space_against_config(space, base)
    bad = load_space(write(tmp_path, "params:\n  model.apc.target_rate: {uniform: [0.5, 1.5]}\n"
                                     "search: {algorithm: random}\n"))
    with pytest.raises(SpaceError, match=r"model\.apc\.target_rate"):
        check_space_against_config(bad, base)


@pytest.mark.parametrize("params,match", [
    ("train.phases.0.flops.lambda_q: {uniform: [-1.0, 1.0]}", r"(?s)params\.train\.phases\.0\.flops\.lambda_q=-1\.0.*"
                                                               r"greater than or equal to 0"),
    ("model.mlm_head_rescale: {choice: [0, 2]}", r"(?s)params\.model\.mlm_head_rescale=0.*greater than 0"),
    ("train.phases.0.flops.lamda_q: {loguniform: [1.0e-5, 1.0e-1]}", r"lamda_q.*unknown key"),
    ("train.phases.3.lr: {loguniform: [1.0e-5, 1.0e-3]}", r"train\.phases\.3\.lr.*not a valid list index"),
])
def test_space_values_the_config_rejects_name_the_key(tmp_path, base, params, match):
    space = load_space(write(tmp_path, f"params:\n  {params}\nsearch: {{algorithm: random}}\n"))
    with pytest.raises(SpaceError, match=match):
        check_space_against_config(space, base)


@pytest.mark.parametrize("text,match", [
    ("params:\n  train.seed: {loguniform: [0.0, 1.0]}\n", r"params\.train\.seed.*bounds must be > 0"),
    ("params:\n  train.seed: {uniform: [2.0, 1.0]}\n", r"params\.train\.seed.*low must be < high"),
    ("params:\n  train.seed: {normal: [0, 1]}\n", r"params\.train\.seed\.normal: unknown key"),
    ("params:\n  train.seed: {choice: []}\n", r"params\.train\.seed.*at least one value"),
    ("params:\n  train.seed: {grid: [1, 2]}\nsearch: {algorithm: optuna_tpe}\n",
     r"params\.train\.seed: grid needs search\.algorithm random or grid"),
    ("params:\n  train.seed: {choice: [1, 2]}\nobjective: {metric: ndcg, mode: max}\n",
     r"objective\.0\.metric.*unknown metric 'ndcg'"),
    ("params:\n  train.seed: {choice: [1, 2]}\nobjective: [{metric: dev_nDCG@10, mode: max}, "
     "{metric: dev_flops, mode: min}]\nsearch: {algorithm: optuna_tpe}\n", r"optuna_nsga2"),
    ("params:\n  train.seed: {choice: [1, 2]}\nscheduler: {kind: asha, reduction_factor: 1}\n",
     r"scheduler\.reduction_factor"),
    ("params: {}\n", r"at least one parameter"),
    ("parms:\n  train.seed: {choice: [1]}\n", r"parms: unknown key"),
])
def test_invalid_space_files_are_rejected_with_the_key(tmp_path, text, match):
    with pytest.raises(SpaceError, match=match):
        load_space(write(tmp_path, text))


def test_trial_config_applies_sampled_values(base):
    import numpy as np

    cfg = trial_config(base, {"train.phases.0.flops.lambda_q": np.float64(3e-3), "model.mlm_head_rescale": 4})
    assert cfg.train.phases[0].flops.lambda_q == pytest.approx(3e-3) and cfg.model.mlm_head_rescale == 4.0
    with pytest.raises(ConfigError, match=r"lambda_d"):
        trial_config(base, {"train.phases.0.flops.lambda_d": -1.0})
