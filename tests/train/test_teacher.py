"""Distillation: teacher scores computed once and cached beside the negatives (hit on a rerun, missed when the
teacher, its settings or the negatives change), exact for a sparse teacher; a tiny in-process training run with
KL-Div distillation mixed into InfoNCE reports the distillation term."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_recipes import TINY_LLAMA

from lexray.config import LexrayConfig, TeacherConfig
from lexray.data.beir import iter_corpus, load_qrels, load_queries
from lexray.data.mining import read_groups_jsonl


@pytest.fixture(scope="module")
def negatives(tmp_path_factory, scifact_dir):
    """8 SciFact train queries, their judged positives and 3 other corpus documents each as negatives."""
    qrels, queries = load_qrels(scifact_dir, "train"), load_queries(scifact_dir, "train")
    ids = [d.doc_id for d, _ in zip(iter_corpus(scifact_dir), range(40), strict=False)]
    rows = []
    for k, qid in enumerate(list(qrels)[:8]):
        pos = sorted(qrels[qid])
        rows.append({"query_id": qid, "query": queries[qid], "positive_ids": pos,
                     "negative_ids": [d for d in ids[3 * k:3 * k + 4] if d not in pos][:3]})
    p = tmp_path_factory.mktemp("hardneg") / "scifact.train.bm25.n3.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


@pytest.mark.timeout(120)
def test_sparse_teacher_scores_are_exact_and_cached(negatives, scifact_dir, monkeypatch):
    import lexray.train.teacher as teacher_mod
    from lexray.config import ModelConfig
    from lexray.models import load_encoder

    t = TeacherConfig(kind="sparse", model="shared:models/splade-tiny")
    path, hit = teacher_mod.teacher_scores_cached(negatives, scifact_dir, t)
    assert not hit and path.parent == negatives.parent and path.name.startswith(negatives.stem + ".teacher-sparse-")
    groups = read_groups_jsonl(path)
    assert [g.negative_ids for g in groups] == [g.negative_ids for g in read_groups_jsonl(negatives)]
    g = groups[0]
    enc = load_encoder(ModelConfig(name_or_path="shared:models/splade-tiny"))
    texts = {d.doc_id: d.full_text for d in iter_corpus(scifact_dir) if d.doc_id in {g.positive_ids[0],
                                                                                     g.negative_ids[0]}}
    q = enc.encode([g.query], "query")[0]
    d = enc.encode([texts[g.positive_ids[0]], texts[g.negative_ids[0]]], "document")
    assert g.positive_scores[0] == pytest.approx(float(q @ d[0]), rel=1e-4)
    assert g.negative_scores[0] == pytest.approx(float(q @ d[1]), rel=1e-4)
    assert g.positive_scores[0] > 0

    # a rerun computes nothing: the same file is hit
    monkeypatch.setattr(teacher_mod, "score_sparse", lambda *a, **k: pytest.fail("recomputed on a cache hit"))
    assert teacher_mod.teacher_scores_cached(negatives, scifact_dir, t) == (path, True)
    # another setting of the teacher, or other negatives, is another entry (missed)
    t2 = t.model_copy(update={"batch_size": 8})
    assert teacher_mod.cache_key(t2, negatives, scifact_dir) != teacher_mod.cache_key(t, negatives, scifact_dir)
    other = negatives.with_name("other.jsonl")
    other.write_text(negatives.read_text().splitlines()[0] + "\n")
    assert teacher_mod.cache_key(t, other, scifact_dir) != teacher_mod.cache_key(t, negatives, scifact_dir)
    # another kind of teacher is another entry too
    bm25 = TeacherConfig(kind="bm25")
    assert teacher_mod.cache_key(bm25, negatives, scifact_dir) != teacher_mod.cache_key(t, negatives, scifact_dir)
    assert teacher_mod.cache_key(bm25.model_copy(update={"k1": 1.2}), negatives, scifact_dir) \
        != teacher_mod.cache_key(bm25, negatives, scifact_dir)


def test_distilling_phase_needs_negatives_and_a_teacher(tmp_path, scifact_dir, negatives):
    from lexray.config import ConfigError
    from lexray.workflows import prepare_hard_negatives

    with pytest.raises(ValueError, match="distill needs data 'hard_negatives'"):
        LexrayConfig.model_validate({"train": {"phases": [{"data": "title_abstract_pairs", "num_negatives": 0,
                                                           "distill": {"loss": "kl"}}]}})
    with pytest.raises(ValueError, match="teacher.model"):
        TeacherConfig(kind="sparse")
    out = tmp_path / "out"
    (out / "hardneg").mkdir(parents=True)
    # a mined file already there: no mining, but a distilling phase without a teacher is refused by name
    (out / "hardneg" / "scifact.train.bm25.n3.jsonl").write_text(negatives.read_text())
    cfg = LexrayConfig.model_validate({"model": {"name_or_path": "m"}, "data": {"dataset": str(scifact_dir)},
                                       "train": {"phases": [{"num_negatives": 3, "distill": {"loss": "kl"}}]}})
    with pytest.raises(ConfigError, match=r"train\.phases\.0 needs teacher scores.*train\.teacher\.kind"):
        prepare_hard_negatives(cfg, out)


@pytest.mark.timeout(180)
def test_tiny_training_with_kl_distillation_reports_the_term(tmp_path, negatives, scifact_dir):
    from lexray.train.loop import train_local
    from lexray.train.teacher import teacher_scores_cached

    scored, _ = teacher_scores_cached(negatives, scifact_dir,
                                      TeacherConfig(kind="sparse", model="shared:models/splade-tiny"))
    weight = 0.5
    cfg = LexrayConfig.model_validate({
        "name": "distill",
        "model": {"random_init": TINY_LLAMA},
        "data": {"dataset": "shared:datasets/scifact"},
        "train": {"log_every": 1, "checkpoint_every": 100, "collapse_max_fraction": 1.0, "tensorboard": False,
                  "phases": [{"name": "distill", "data": "hard_negatives", "data_path": str(scored),
                              "num_negatives": 2, "max_steps": 3, "global_batch_size": 4, "lr": 1e-3,
                              "query_max_length": 12, "doc_max_length": 24, "warmup_ratio": 0.0,
                              "flops": {"lambda_q": 1e-4, "lambda_d": 1e-4, "warmup_steps": 0},
                              "distill": {"loss": "kl", "weight": weight, "teacher_temperature": 10.0}}]}})
    _, rep = train_local(cfg, tmp_path / "run")
    steps = [m for m in rep.history if "step" in m]
    assert [int(m["step"]) for m in steps] == [1, 2, 3]
    for m in steps:
        assert m["distill_loss"] > 0 and torch.isfinite(torch.tensor(m["distill_loss"]))
        reg = m["lambda_q"] * m["reg_q"] + m["lambda_d"] * m["reg_d"]
        assert m["loss"] == pytest.approx(m["rank_loss"] + weight * m["distill_loss"] + reg, rel=1e-5)
