"""The migration end to end on a tiny random-init Llama over a real byte-level BPE tokenizer (deepseek-v3) into
bert-base-uncased (splade-tiny's tokenizer, Ẽ and b_tgt): embedding-only adaptation freezes every transformer
weight, the migrated model round-trips through save/load (with the bias added to Llama's bias-less head), the
report has what the issue asks, and the Ray Train adaptation runs."""

from __future__ import annotations

import json

import pytest
import torch

from lexray.config import load_config
from lexray.models import SparseEncoder
from lexray.vocab.migrate import migrate

BASE = {"model": {"random_init": {"tokenizer": "shared:tokenizers/deepseek-v3-bpe", "hidden_size": 32,
                                  "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}},
        "vt": {"adapt": {"max_steps": 3, "global_batch_size": 4, "max_docs": 16, "max_length": 32,
                         "warmup_steps": 1, "lr": 1e-2},
               "apc": {"target_rate": 0.4, "probe_docs": 4, "probe_max_length": 48}},
        "train": {"log_every": 1, "checkpoint_every": 2}}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    out = tmp_path_factory.mktemp("vt")
    return out, migrate(load_config(None, [], base=BASE), out, local=True)


def _params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_report(migrated):
    out, rep = migrated
    disk = json.loads((out / "vt_report.json").read_text())
    assert disk["alignment"]["overlap"] + disk["alignment"]["new"] == 30522
    assert {"overlap", "new", "overlap_fraction", "examples"} <= set(disk["alignment"])
    assert disk["head"]["tied"] and disk["head"]["source_bias"] == "added"
    assert disk["migrated"]["head_norm"]["mean_row_norm"] > 0 and disk["migrated"]["mlm_head_rescale"] == 1.0
    assert abs(disk["apc"]["rate_after"] - 0.4) <= 0.02


def test_embedding_only_training_freezes_transformer(migrated):
    out, _ = migrated
    before = SparseEncoder.from_pretrained(out / "init").backbone
    after = SparseEncoder.from_pretrained(out / "train" / "local" / "models" / "vt-adapted").backbone
    pb, pa = _params(before), _params(after)
    emb = "model.embed_tokens.weight"
    changed = {n for n in pb if not torch.equal(pb[n], pa[n])}
    assert emb in changed and "lm_head.bias" in changed
    assert changed <= {emb, "lm_head.weight", "lm_head.bias"}
    assert any(".layers." in n for n in pb) and not any(".layers." in n or "norm" in n for n in changed)


def test_round_trip(migrated, tmp_path):
    out, rep = migrated
    enc = SparseEncoder.from_pretrained(out / "model")
    assert enc.vocab_size == 30522 and enc.tokenizer.convert_ids_to_tokens(2023) == "this"
    assert enc.settings.kind == "decoder"
    bias = enc.backbone.get_output_embeddings().bias
    assert bias is not None and float(bias.detach().abs().max()) > 0          # the lexray-added head bias survived
    enc.save_pretrained(tmp_path / "again")
    enc2 = SparseEncoder.from_pretrained(tmp_path / "again")
    texts = ["Vocabulary transfer for learned sparse retrieval.", "the cells were counted"]
    a, b = enc.encode(texts), enc2.encode(texts)
    assert torch.equal(a, b) and (a > 0).any()


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_adaptation_on_ray_train(migrated, ray_session, tmp_path):
    from lexray.vocab.adapt import run_adaptation

    out, _ = migrated
    cfg = load_config(None, ["vt.adapt.max_steps=2"], base=BASE)
    model_dir = run_adaptation(cfg, out / "init", tmp_path / "train")
    enc = SparseEncoder.from_pretrained(model_dir)
    init = SparseEncoder.from_pretrained(out / "init")
    assert not torch.equal(enc.backbone.model.embed_tokens.weight, init.backbone.model.embed_tokens.weight)
    assert torch.equal(enc.backbone.model.layers[0].mlp.up_proj.weight, init.backbone.model.layers[0].mlp.up_proj.weight)
    lines = (tmp_path / "train" / "vt-adapt" / "lexray" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2
