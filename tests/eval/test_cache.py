"""The evaluation cache (the training jobs' zero-shot row): a second evaluation of the same model and collection
reuses the entry (no evaluation runs) and gives byte-identical metrics.json and run files, equal to an uncached
evaluation; another model, setting or collection is another entry."""

from __future__ import annotations

import pytest
from tiny_recipes import TINY_LLAMA

from lexray.config import LexrayConfig


def make_cfg(tmp_path, **over) -> LexrayConfig:
    cfg = {"name": "cache-test",
           "model": {"random_init": TINY_LLAMA, "doc_max_length": 32, "query_max_length": 16},
           "data": {"dataset": "shared:datasets/scifact", "max_docs": 40},
           "encode": {"backend": "local", "batch_size": 8},
           "eval": {"top_k": 10, "metrics": ["nDCG@10", "MRR@10"], "cache_dir": str(tmp_path / "cache")}}
    for k, v in over.items():
        cfg[k] = {**cfg.get(k, {}), **v}
    return LexrayConfig.model_validate(cfg)


@pytest.mark.timeout(240)
def test_second_evaluation_is_a_hit_with_identical_files(tmp_path, monkeypatch):
    import json

    import lexray.eval.pipeline as pipeline
    from lexray.eval.cache import cached_evaluate_sparse, evaluation_identity

    cfg = make_cfg(tmp_path)
    first = cached_evaluate_sparse(cfg, tmp_path / "a" / "zero-shot", retriever_name="tiny (zero-shot)")
    entry = json.loads((tmp_path / "a" / "zero-shot" / "cache.json").read_text())
    assert entry["hit"] is False and (tmp_path / "cache" / entry["key"] / "index" / "stats.json").is_file()
    # an uncached evaluation gives the same numbers
    fresh = pipeline.evaluate_sparse(cfg, tmp_path / "fresh", retriever_name="tiny (zero-shot)")
    assert fresh["metrics"] == first["metrics"] and first["metrics"]["nDCG@10"] > 0

    # a rerun into another output folder evaluates nothing and writes the same bytes
    monkeypatch.setattr(pipeline, "evaluate_sparse", lambda *a, **k: pytest.fail("evaluated on a cache hit"))
    second = cached_evaluate_sparse(cfg, tmp_path / "b" / "zero-shot", retriever_name="tiny (zero-shot)")
    assert second == first
    a, b = tmp_path / "a" / "zero-shot", tmp_path / "b" / "zero-shot"
    for name in ("metrics.json", "run.test.trec", "per_query.test.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert json.loads((b / "cache.json").read_text()) == {**entry, "hit": True}

    # what changes the numbers changes the key: model, encode settings, output vocabulary, collection size,
    # split, search depth; scheduling does not
    base = evaluation_identity(cfg, "exact", "tiny (zero-shot)")
    changed = [make_cfg(tmp_path, model={"random_init": {**cfg.model.random_init.model_dump(), "seed": 1}}),
               make_cfg(tmp_path, encode={"batch_size": 4}), make_cfg(tmp_path, encode={"output_vocab": "full"}),
               make_cfg(tmp_path, data={"max_docs": 41}), make_cfg(tmp_path, data={"split": "train"}),
               make_cfg(tmp_path, eval={"top_k": 100})]
    for c in changed:
        assert evaluation_identity(c, "exact", "tiny (zero-shot)") != base
    same = make_cfg(tmp_path, encode={"num_actors": 1, "cpus_per_actor": 1.0})
    assert evaluation_identity(same, "exact", "tiny (zero-shot)") == base
