"""A dense model in ``lexray evaluate`` (detected from its folder) on LexSemBridge task folders that share one
corpus file: the corpus is encoded once and every task is scored, nDCG@1 included (arXiv:2508.17858 §3.3)."""

from __future__ import annotations

import json

from lexray.commands.evaluate import main as evaluate_main
from lexray.config import DenseConfig, ModelConfig, RandomInitConfig
from lexray.data.tasks import build_tasks
from lexray.models.dense import load_dense_encoder


def test_dense_model_on_task_folders_encodes_the_shared_corpus_once(tmp_path, scifact_dir, splade_tiny_dir):
    src = tmp_path / "src"
    (src / "qrels").mkdir(parents=True)
    lines = (scifact_dir / "corpus.jsonl").read_text().splitlines(keepends=True)[:60]
    (src / "corpus.jsonl").write_text("".join(lines))
    (src / "queries.jsonl").write_text("")
    (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    build_tasks(src, tmp_path / "tasks", n=8, seed=0, tasks=["keyword", "pop16"])
    model = tmp_path / "dense"
    load_dense_encoder(ModelConfig(random_init=RandomInitConfig(
        architecture="bert", tokenizer=str(splade_tiny_dir), hidden_size=32, intermediate_size=64,
        num_hidden_layers=1, num_attention_heads=2, seed=3), dense=DenseConfig(),
        doc_max_length=32)).save_pretrained(model)
    out = tmp_path / "eval"
    summary = evaluate_main(["--model", str(model), "--dataset", str(tmp_path / "tasks" / "keyword"),
                             "--dataset", str(tmp_path / "tasks" / "pop16"), "--out", str(out),
                             "--set", "encode.backend=local", "--set", "eval.metrics=[nDCG@1,nDCG@10]"])
    assert [r["dataset"] for r in summary["datasets"]] == ["keyword", "pop16"]
    assert all(set(r["metrics"]) == {"nDCG@1", "nDCG@10"} and r["n_queries"] == 8 for r in summary["datasets"])
    shards = list((out / "dense-shards").iterdir())
    assert len(shards) == 1  # one corpus file, one encoding
    assert json.loads((shards[0] / "manifest.json").read_text())["totals"]["docs"] == 60
    assert not (out / "keyword" / "shards").exists()
