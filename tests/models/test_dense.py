"""Dense bi-encoder and LexSemBridge (arXiv:2508.17858 §3.4-3.5): ST folders load as ST encodes them, the bridge
round-trips through save/load, bad input is refused naming the key."""

from __future__ import annotations

import json

import pytest
import torch

from lexray.config import ConfigError, DenseConfig, ModelConfig, RandomInitConfig, load_config
from lexray.models.bridge import BridgeConfigError, LexSemBridge
from lexray.models.dense import BRIDGE_FILE, load_dense_encoder

TEXTS = ["protein folding in yeast cells", "a", "The iPhone SE was released on March 31, 2016 by Apple Inc."]


def _tiny(splade_tiny_dir, **dense) -> ModelConfig:
    return ModelConfig(random_init=RandomInitConfig(architecture="bert", tokenizer=str(splade_tiny_dir),
                                                    hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                                    num_attention_heads=2, seed=3),
                       dense=DenseConfig(**dense))


@pytest.fixture(scope="module")
def st_folder(tmp_path_factory, splade_tiny_dir):
    """A tiny random BERT (no MLM head) saved as a sentence-transformers folder: Transformer, mean Pooling,
    Normalize (the layout of all-MiniLM-L6-v2)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    root = tmp_path_factory.mktemp("st")
    tok = AutoTokenizer.from_pretrained(splade_tiny_dir)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2)).save_pretrained(root)
    tok.save_pretrained(root)
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 48}))
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                                "pooling_mode_mean_tokens": True}))
    (root / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    return root


def test_st_folder_encodes_as_sentence_transformers_does(st_folder):
    from sentence_transformers import SentenceTransformer

    enc = load_dense_encoder(ModelConfig(name_or_path=str(st_folder), dense=DenseConfig()))
    assert (enc.settings.pooling, enc.settings.similarity, enc.settings.doc_max_length) == ("mean", "cosine", 48)
    ours = enc.encode(TEXTS, "document")
    ref = SentenceTransformer(str(st_folder), device="cpu").encode(TEXTS, convert_to_tensor=True)
    torch.testing.assert_close(ours, ref.float(), atol=1e-5, rtol=1e-4)


def test_clr_without_mlm_head_is_refused_naming_the_key(st_folder):
    with pytest.raises(BridgeConfigError, match=r"model\.dense\.bridge=clr needs an MLM head"):
        load_dense_encoder(ModelConfig(name_or_path=str(st_folder), dense=DenseConfig(bridge="clr")))


def test_unknown_bridge_name_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"model\.dense\.bridge"):
        load_config(None, ["model.name_or_path=x", "model.dense.bridge=xlr"])
    with pytest.raises(BridgeConfigError, match=r"model\.dense\.bridge"):
        LexSemBridge("xlr", 10, 4, 4)


@pytest.mark.parametrize("bridge,form", [("llr", {}), ("llr", {"llr_form": "token_weight"}),
                                         ("clr", {"clr_form": "logits"})])
def test_bridge_save_load_gives_identical_query_vectors(tmp_path, splade_tiny_dir, bridge, form):
    enc = load_dense_encoder(_tiny(splade_tiny_dir, bridge=bridge, **form))
    torch.manual_seed(1)
    with torch.no_grad():  # a "trained" bridge: weights no init reproduces
        for p in enc.bridge.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    before = enc.encode(TEXTS, "query")
    plain = enc.encode(TEXTS, "document")  # bridge_side query: documents are not modulated
    enc.save_pretrained(tmp_path / "m")
    again = load_dense_encoder(ModelConfig(name_or_path=str(tmp_path / "m"), dense=DenseConfig()))
    assert again.settings.bridge == bridge and again.bridge is not None
    assert torch.equal(again.encode(TEXTS, "query"), before)
    assert not torch.allclose(before, plain, atol=1e-4)  # the bridge does change the query vectors


def test_paper_forms_follow_the_equations(splade_tiny_dir):
    enc = load_dense_encoder(_tiny(splade_tiny_dir, bridge="slr"))
    t = enc.tokenize(TEXTS[:1], "query")
    hidden = enc.body(input_ids=t["input_ids"], attention_mask=t["attention_mask"]).last_hidden_state
    w = enc.bridge.lexical(t["input_ids"], t["attention_mask"], hidden, enc.mlm_head)
    present = torch.zeros(w.shape[1])
    present[t["input_ids"][0]] = 1.0
    torch.testing.assert_close(w[0], torch.log1p(present))  # Eq. 5
    clr = LexSemBridge("clr", w.shape[1], 32, 32)
    wc = clr.lexical(t["input_ids"], t["attention_mask"], hidden, enc.mlm_head)
    torch.testing.assert_close(wc, torch.log1p(torch.softmax(enc.mlm_head(hidden[:, 0]), -1)))  # Eq. 7
    q_lex = clr(t["input_ids"], t["attention_mask"], hidden, enc.mlm_head)
    torch.testing.assert_close(q_lex.sum(-1), torch.ones(1))  # Eq. 8: a softmax over d


def test_lexical_only_and_bridge_side(splade_tiny_dir):
    only = load_dense_encoder(_tiny(splade_tiny_dir, bridge="slr", lexical_only=True, similarity="dot"))
    t = only.tokenize(TEXTS, "query")
    out = only(**t, kind="query")
    torch.testing.assert_close(out.sum(-1), torch.ones(len(TEXTS)))  # q_lex alone
    both = load_dense_encoder(_tiny(splade_tiny_dir, bridge="slr", bridge_side="passage"))
    plain = load_dense_encoder(_tiny(splade_tiny_dir))
    assert torch.equal(both.encode(TEXTS, "query"), plain.encode(TEXTS, "query"))
    assert not torch.allclose(both.encode(TEXTS, "document"), plain.encode(TEXTS, "document"))


def test_bridge_file_of_another_shape_is_refused(tmp_path, splade_tiny_dir):
    enc = load_dense_encoder(_tiny(splade_tiny_dir, bridge="slr"))
    enc.save_pretrained(tmp_path / "m")
    from safetensors.torch import save_file

    save_file({"align.weight": torch.zeros(16, enc.bridge.vocab_size)}, str(tmp_path / "m" / BRIDGE_FILE))
    with pytest.raises(BridgeConfigError, match="dimension mismatch"):
        load_dense_encoder(ModelConfig(name_or_path=str(tmp_path / "m"), dense=DenseConfig()))
    with pytest.raises(BridgeConfigError, match=r"model\.dense\.bridge='llr'"):
        load_dense_encoder(ModelConfig(name_or_path=str(tmp_path / "m"), dense=DenseConfig(bridge="llr")))


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_saved_dense_model_loads_in_sentence_transformers(tmp_path, splade_tiny_dir, pooling):
    """A lexray dense folder carries ST's files: ``encode_query`` / ``encode_document`` give lexray's vectors
    (two lengths, prefixes as prompts); a bridged folder is refused by ST with the reason."""
    from sentence_transformers import SentenceTransformer

    from lexray.models.dense import is_dense_folder

    cfg = _tiny(splade_tiny_dir, pooling=pooling).model_copy(update={"doc_max_length": 12, "query_max_length": 5,
                                                                     "query_prefix": "q: "})
    enc = load_dense_encoder(cfg)
    enc.save_pretrained(tmp_path / "m")
    assert is_dense_folder(tmp_path / "m") and not is_dense_folder(splade_tiny_dir)
    st = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    torch.testing.assert_close(st.encode_document(TEXTS, convert_to_tensor=True).float(),
                               enc.encode(TEXTS, "document"), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(st.encode_query(TEXTS, convert_to_tensor=True).float(),
                               enc.encode(TEXTS, "query"), atol=1e-5, rtol=1e-4)
    bridged = load_dense_encoder(_tiny(splade_tiny_dir, pooling=pooling, bridge="slr"))
    bridged.save_pretrained(tmp_path / "m")  # over the plain one: its ST files are replaced, not left stale
    assert not (tmp_path / "m" / "1_Pooling").exists()
    with pytest.raises(ValueError, match="sentence-transformers cannot load"):
        SentenceTransformer(str(tmp_path / "m"), device="cpu", trust_remote_code=True)


def test_bridge_departures_follow_their_definitions(splade_tiny_dir):
    """The options beside the paper's Eq. 8 (docs/lexsembridge.md): l1-normalised w, W from the input embeddings,
    and the tied alignment W = A Ê^T (A zero at init, so q_lex is uniform and the ranking is the backbone's)."""
    enc = load_dense_encoder(_tiny(splade_tiny_dir, bridge="slr", bridge_w_norm="l1", bridge_init="embedding",
                                   bridge_init_scale=2.0))
    E = enc.backbone.get_input_embeddings().weight.detach()
    torch.testing.assert_close(enc.bridge.align.weight, (2.0 * E / E.pow(2).mean().sqrt()).T)
    t = enc.tokenize(TEXTS[:1], "query")
    hidden = enc.body(input_ids=t["input_ids"], attention_mask=t["attention_mask"]).last_hidden_state
    w = enc.bridge.lexical(t["input_ids"], t["attention_mask"], hidden, None)
    q_lex = enc.bridge(t["input_ids"], t["attention_mask"], hidden, None)
    torch.testing.assert_close(q_lex, torch.softmax(enc.bridge.align(w / w.sum(-1, keepdim=True)), -1))
    tied = load_dense_encoder(_tiny(splade_tiny_dir, bridge="slr", bridge_align="tied"))
    plain = load_dense_encoder(_tiny(splade_tiny_dir))
    torch.testing.assert_close(tied.encode(TEXTS, "query"), plain.encode(TEXTS, "query"))  # A = 0: identity
    with torch.no_grad():
        tied.bridge.align_core.weight.normal_(0, 0.5)
    u = (w @ E) / E.pow(2).mean().sqrt()
    got = tied.bridge(t["input_ids"], t["attention_mask"], hidden, None, E)
    torch.testing.assert_close(got, torch.softmax(u @ tied.bridge.align_core.weight.T, -1))
    assert not torch.allclose(tied.encode(TEXTS, "query"), plain.encode(TEXTS, "query"), atol=1e-4)


def test_tied_bridge_round_trips_and_bad_options_are_refused(tmp_path, splade_tiny_dir):
    enc = load_dense_encoder(_tiny(splade_tiny_dir, bridge="slr", bridge_align="tied", bridge_w_norm="l1"))
    with torch.no_grad():
        enc.bridge.align_core.weight.normal_(0, 0.5)
    before = enc.encode(TEXTS, "query")
    enc.save_pretrained(tmp_path / "m")
    again = load_dense_encoder(ModelConfig(name_or_path=str(tmp_path / "m"), dense=DenseConfig()))
    assert again.settings.bridge_align == "tied" and again.settings.bridge_w_norm == "l1"
    assert torch.equal(again.encode(TEXTS, "query"), before)
    with pytest.raises(BridgeConfigError, match=r"model\.dense\.bridge_init"):
        LexSemBridge("slr", 10, 4, 4, init="zero", align="tied")
    with pytest.raises(BridgeConfigError, match=r"model\.dense\.bridge_w_norm"):
        LexSemBridge("slr", 10, 4, 4, w_norm="l2")
    with pytest.raises(BridgeConfigError, match=r"model\.dense\.bridge_init=embedding.*dimension mismatch"):
        LexSemBridge("slr", 10, 4, 4).init_from_embeddings(torch.zeros(10, 5))
    with pytest.raises(ConfigError, match=r"bridge_align"):
        load_config(None, ["model.name_or_path=x", "model.dense.bridge_align=wide"])
