"""``lexray adapt-domain`` (CAI §3.2.1, arXiv:2211.03988) on splade-tiny and a 40-document JSONL slice of SciFact:
the report, every parameter trained, the result loading unchanged in transformers and sentence-transformers with
lexray's vectors, bad input refused before any work, and the continual MLM phase on Ray Train."""

from __future__ import annotations

import json

import pytest
import torch

from lexray.config import ConfigError, load_config
from lexray.data.beir import iter_corpus
from lexray.data.report import DataError
from lexray.models import SparseEncoder
from lexray.models.backbones import UnsupportedModelError
from lexray.vocab.domain import adapt_domain, check_inputs
from lexray.vocab.expand import self_tokenization_failures


def _cfg(corpus, *extra):
    return load_config(None, [f"model.name_or_path={corpus[1]}", f"cai.corpus={corpus[0]}",
                              "cai.expand.delta_v=150", "cai.mlm.max_steps=2", "cai.mlm.global_batch_size=4",
                              "cai.mlm.max_length=32", "cai.mlm.warmup_steps=0", "cai.mlm.lr=1e-3",
                              "train.log_every=1", *extra])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, scifact_dir, splade_tiny_dir):
    d = tmp_path_factory.mktemp("cai")
    lines = [json.dumps({"id": x.doc_id, "body": x.text, "head": x.title}) for x in iter_corpus(scifact_dir, max_docs=40)]
    (d / "c.jsonl").write_text("\n".join(lines) + "\n")
    return str(d / "c.jsonl"), str(splade_tiny_dir), d


@pytest.fixture(scope="module")
def adapted(corpus):
    out = corpus[2] / "out"
    cfg = _cfg(corpus, "cai.text_field=body", "cai.title_field=head")
    return out, adapt_domain(cfg, out, local=True)


def test_report_and_every_parameter_trains(adapted, splade_tiny_dir):
    out, rep = adapted
    disk = json.loads((out / "adapt_report.json").read_text())
    assert disk["v0"] == 30522 and disk["v_final"] == 30522 + len(disk["added"]) > 30522
    assert disk["documents"] == 40 and disk["stopped_by"] == "criterion" and disk["iterations"][-1]["added_over_previous"] < 150
    a = disk["added"][0]
    assert {"token", "id", "count", "count_final", "pieces"} <= set(a) and a["id"] == 30522 and a["count"] >= 1
    assert [m["step"] for m in disk["mlm_loss"]] == [1, 2] and all(m["loss"] > 0 for m in disk["mlm_loss"])
    assert {"read", "load", "expand", "init", "mlm", "total"} <= set(disk["timings_s"])
    before = SparseEncoder.from_pretrained(out / "expanded").backbone.state_dict()
    after = SparseEncoder.from_pretrained(out / "model").backbone.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert "bert.encoder.layer.0.attention.self.query.weight" in changed and "cls.predictions.bias" in changed


def test_result_loads_in_transformers_and_sentence_transformers(adapted):
    st = pytest.importorskip("sentence_transformers")
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    out, rep = adapted
    tok = AutoTokenizer.from_pretrained(out / "model")
    words, ids = [a["token"] for a in rep["added"]], [a["id"] for a in rep["added"]]
    assert self_tokenization_failures(tok, words, ids) == []
    assert AutoModelForMaskedLM.from_pretrained(out / "model").config.vocab_size == len(tok) == rep["v_final"]
    texts = [f"The {words[0]} and {words[1]} of the cells.", "Plain words only."]
    ours = SparseEncoder.from_pretrained(out / "model").encode(texts)
    theirs = st.SparseEncoder(str(out / "model"), device="cpu").encode_document(texts, convert_to_tensor=True)
    theirs = theirs.to_dense() if theirs.is_sparse else theirs
    assert ours.shape[1] == rep["v_final"] and ids[0] in tok(texts[0])["input_ids"]
    torch.testing.assert_close(theirs.float().cpu(), ours, atol=1e-4, rtol=1e-4)


def test_bad_input_is_refused_before_any_work(corpus, tmp_path):
    from transformers import BertConfig, BertModel

    with pytest.raises(ConfigError, match="cai.expand.delta_v"):
        _cfg(corpus, "cai.expand.delta_v=-1")
    with pytest.raises(ConfigError, match="cai.expand.bogus"):
        _cfg(corpus, "cai.expand.bogus=1")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="cai.corpus"):
        check_inputs(_cfg((str(tmp_path / "empty.jsonl"), corpus[1])))
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{"text": 3}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: field 'text'"):
        check_inputs(_cfg((str(tmp_path / "bad.jsonl"), corpus[1])))
    BertModel(BertConfig(vocab_size=64, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=8)).save_pretrained(tmp_path / "headless")
    with pytest.raises(UnsupportedModelError, match="model.name_or_path.*no MLM head"):
        check_inputs(_cfg((corpus[0], str(tmp_path / "headless")), "cai.text_field=body"))
    with pytest.raises(ConfigError, match="nothing to do"):
        check_inputs(_cfg(corpus, "cai.expand.enabled=false", "cai.mlm.enabled=false"))


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_continual_mlm_on_ray_train(adapted, corpus, ray_session, tmp_path):
    from lexray.vocab.adapt import run_mlm
    from lexray.vocab.domain import ContinualMLMPhase

    out, _ = adapted
    cfg = _cfg(corpus, "cai.text_field=body", "cai.mlm.max_steps=2")
    model_dir = run_mlm(cfg, ContinualMLMPhase, out / "expanded", tmp_path / "train", "cai-mlm")
    enc, init = SparseEncoder.from_pretrained(model_dir), SparseEncoder.from_pretrained(out / "expanded")
    assert enc.vocab_size == init.vocab_size > 30522
    assert not torch.equal(enc.backbone.bert.encoder.layer[1].output.dense.weight,
                           init.backbone.bert.encoder.layer[1].output.dense.weight)
    lines = (tmp_path / "train" / "cai-mlm" / "lexray" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2
