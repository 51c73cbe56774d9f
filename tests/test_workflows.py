"""workflows: the trained model's evaluation config does not re-apply load-time transforms."""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.fixture
def fake_mining(monkeypatch):
    """Mining and the BM25 index replaced by recorders: the dict gets the keyword arguments mining was called
    with."""
    import lexray.data.mining as mining
    import lexray.index.lucene as lucene

    seen = {}

    def fake_mine(dataset, index_dir, **kw):
        seen.update(kw)
        return [], mining.MiningReport(settings={"num_negatives": kw["num_negatives"], "depth": 100})

    monkeypatch.setattr(mining, "mine_bm25_negatives", fake_mine)
    monkeypatch.setattr(lucene, "build_bm25_index", lambda *a, **k: None)
    return seen


def test_mining_uses_data_mining_seed_not_train_seed(tmp_path, fake_mining, scifact_dir):
    from lexray.workflows import prepare_hard_negatives

    cfg = LexrayConfig.model_validate({"model": {"name_or_path": "m"}, "data": {"dataset": str(scifact_dir),
                                                                                  "mining_seed": 5},
                                       "train": {"seed": 1}})
    out = prepare_hard_negatives(cfg, tmp_path)
    assert fake_mining["seed"] == 5
    assert out.train.phases[0].data_path.endswith(".bm25.n15.jsonl")


def test_phases_that_read_only_their_first_groups_mine_only_those(tmp_path, fake_mining, scifact_dir):
    """A smoke run's phases read their first ``max_train_examples`` groups: the largest count is mined, into a
    file of its own; one phase without a limit mines every query."""
    from lexray.workflows import prepare_hard_negatives

    def cfg(*limits):
        return LexrayConfig.model_validate({"model": {"name_or_path": "m"}, "data": {"dataset": str(scifact_dir)},
                                            "train": {"phases": [{"name": f"p{i}", "max_train_examples": n}
                                                                 for i, n in enumerate(limits)]}})

    out = prepare_hard_negatives(cfg(16, 32), tmp_path / "a")
    assert fake_mining["max_groups"] == 32
    assert all(p.data_path.endswith(".bm25.n15.first32.jsonl") for p in out.train.phases)
    out = prepare_hard_negatives(cfg(16, None), tmp_path / "b")
    assert fake_mining["max_groups"] is None and out.train.phases[0].data_path.endswith(".bm25.n15.jsonl")


def test_mining_pool_mines_more_negatives_than_a_step_samples(tmp_path, fake_mining, scifact_dir):
    """data.mining_pool: the file holds the pool, the phase still samples its num_negatives per epoch; a pool
    below a phase's num_negatives is refused, naming the key, before anything is mined."""
    from lexray.config import ConfigError
    from lexray.workflows import prepare_hard_negatives

    def cfg(pool, num_negatives=1):
        return LexrayConfig.model_validate({"model": {"name_or_path": "m"},
                                            "data": {"dataset": str(scifact_dir), "mining_pool": pool},
                                            "train": {"phases": [{"num_negatives": num_negatives}]}})

    out = prepare_hard_negatives(cfg(8), tmp_path)
    assert fake_mining["num_negatives"] == 8
    assert out.train.phases[0].data_path.endswith(".bm25.n8.jsonl") and out.train.phases[0].num_negatives == 1
    fake_mining.clear()
    with pytest.raises(ConfigError, match="data.mining_pool"):
        prepare_hard_negatives(cfg(1, num_negatives=3), tmp_path / "b")
    assert not fake_mining


TINY = {"architecture": "llama", "tokenizer": "shared:models/splade-tiny", "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 128,
        "embedding_anisotropy": 0.5}


@pytest.mark.timeout(900)
def test_transfer_rows_join_the_jobs_table_with_cranfields_skipped_documents(tmp_path, monkeypatch, cranfield_dir,
                                                                            scifact_dir, capsys):
    """eval.transfer (issue 28 item 6): after training, the trained model is evaluated on Cranfield through the same
    pipeline into eval/transfer/cranfield/ with Cranfield's own output vocabulary; the job's metrics.json, metrics.md
    and printed table get its rows (the starting model's too, through the evaluation cache), and Cranfield's two
    empty documents (ids 471 and 995, within the first 1,000) are reported as skipped. Training is replaced by a
    saved tiny random-init encoder; encoding runs in process (no Ray), 16 tokens and top-32 terms per document."""
    import json

    import yaml

    import lexray.train.loop as loop
    from lexray import ablation
    from lexray.commands import train as train_cmd
    from lexray.config import ModelConfig, RandomInitConfig
    from lexray.data.beir import load_qrels
    from lexray.models import load_encoder
    from lexray.train.loop import TrainResult

    model_dir = load_encoder(ModelConfig(random_init=RandomInitConfig(**TINY), special_tokens="exclude",
                                         doc_max_length=16, query_max_length=8)).save_pretrained(tmp_path / "m")
    monkeypatch.setattr(loop, "run_training", lambda cfg, storage_path=None: TrainResult(
        model_dir=model_dir, phase_dirs=[model_dir], metrics={}, history=[], run_dir=tmp_path / "run",
        checkpoint_path=None))
    mini = tmp_path / "mini"  # the training collection: 30 SciFact documents, 3 test queries (fast)
    docs = [json.loads(line) for line in (scifact_dir / "corpus.jsonl").read_text().splitlines()[:30]]
    (mini / "qrels").mkdir(parents=True)
    (mini / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (mini / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": docs[i]["title"]}) + "\n"
                                                for i in range(3)))
    (mini / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\t{docs[i]['_id']}\t1\n" for i in range(3)))
    out = tmp_path / "out"
    sets = [f"out_dir={out}", "name=tiny-transfer", f"data.dataset={mini}", f"model.random_init={json.dumps(TINY)}",
            "model.special_tokens=exclude", "model.doc_max_length=16", "model.query_max_length=8",
            "train.tensorboard=false", "train.phases.0.data=title_abstract_pairs",
            "model.query_top_k=16", "model.doc_top_k=32", "encode.doc_top_k=32",  # a random model is dense
            "encode.backend=local", "eval.top_k=100", "eval.metrics=[nDCG@10,R@100]",
            f"eval.cache_dir={tmp_path / 'cache'}",
            f"eval.transfer=[{{dataset: {cranfield_dir}, on_error: skip, max_docs: 1000, zero_shot: true}}]"]
    argv = ["--config", str(tmp_path / "none.yaml")]
    (tmp_path / "none.yaml").write_text("name: x\n")
    for s in sets:
        argv += ["--set", s]
    result = train_cmd.train_laconic(argv)
    printed = capsys.readouterr().out

    rows = json.loads((out / "metrics.json").read_text())
    assert [(r["dataset"], r["retriever"]) for r in rows] == [
        ("mini", "random-init llama (zero-shot)"), ("mini", "tiny-transfer (trained)"),
        ("cranfield", "random-init llama (zero-shot)"), ("cranfield", "tiny-transfer (trained)")]
    assert result["rows"] == rows
    n_queries = len(load_qrels(cranfield_dir, "test"))
    for rec in rows[2:]:
        t = rec["transfer"]
        assert t["name"] == "cranfield" and t["output_vocab"] == "collection" and t["on_error"] == "skip"
        assert rec["split"] == "test" and rec["n_queries"] == n_queries
        assert t["skipped_docs"] == 2 and rec["efficiency"]["encode_docs_skipped"] == 2
        assert rec["efficiency"]["encode_docs"] == 1000  # max_docs counts kept documents: the 2 empty ones skipped
        assert all(0.0 <= v <= 1.0 for v in rec["metrics"].values())
    assert "transfer" not in rows[0] and "transfer" not in rows[1]
    # readers that take the last rows (the compute curve) still get the in-domain ones
    assert ablation.metrics_entries(out / "metrics.json") == rows[:2]
    assert ablation.metrics_entries(out / "metrics.json", transfer=True) == rows
    assert rows[1]["efficiency"]["encode_docs_skipped"] == 0  # the training collection has no bad rows

    folder = out / "eval" / "transfer" / "cranfield"
    assert json.loads((folder / "metrics.json").read_text()) == {k: v for k, v in rows[3].items() if k != "transfer"}
    assert json.loads((folder / "zero-shot" / "cache.json").read_text())["hit"] is False
    resolved = yaml.safe_load((folder / "config.resolved.yaml").read_text())
    assert resolved["data"]["dataset"] == str(cranfield_dir) and resolved["data"]["on_error"] == "skip"
    assert resolved["model"]["name_or_path"] == str(model_dir)  # the trained model, not the starting one
    assert resolved["model"]["output_vocab"] == str(cranfield_dir)  # Cranfield's own terms (encode.output_vocab)
    assert next(folder.glob("run.test*.trec")).read_text()
    table = [line for line in printed.splitlines() if line.startswith("| ")]
    assert sum("| cranfield | test |" in line for line in table) == 2 and len(table) == 5
    assert (out / "metrics.md").read_text().count("| cranfield |") == 2


def test_a_missing_transfer_collection_is_refused_before_training(tmp_path):
    from lexray.config import ConfigError
    from lexray.workflows import train_and_evaluate

    cfg = LexrayConfig.model_validate({"model": {"name_or_path": "m"}, "out_dir": str(tmp_path / "out"),
                                       "eval": {"transfer": [{"dataset": str(tmp_path / "nowhere")}]}})
    with pytest.raises(ConfigError, match=r"eval\.transfer\.0\.dataset: .*nowhere"):
        train_and_evaluate(cfg)
    assert not (tmp_path / "out").exists()
