"""CAI's vocabulary expansion (arXiv:2211.03988 §3.2.1, Algorithm 1) on a slice of the real SciFact corpus with
splade-tiny's WordPiece tokenizer and the real byte-level BPE tokenizer of DeepSeek-V3: the loop's stopping rule,
what counts as a word, every added token tokenizing to itself, and the mean-of-sub-words rows."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from lexray.data.beir import iter_corpus
from lexray.vocab.expand import (
    add_words,
    expand_vocabulary,
    init_new_rows,
    is_noise,
    self_tokenization_failures,
    subword_pieces,
)


@pytest.fixture(scope="module")
def texts(scifact_dir):
    return [d.full_text for d in iter_corpus(scifact_dir, max_docs=150)]


@pytest.fixture(scope="module")
def wordpiece(splade_tiny_dir, texts):
    tok = AutoTokenizer.from_pretrained(splade_tiny_dir)
    return tok, expand_vocabulary(tok, texts, delta_v=400)


def test_noise_words():
    assert is_noise("1999") and is_noise("(±)") and is_noise("") and is_noise("3.5%")
    assert not is_noise("p53") and not is_noise("il-6") and not is_noise("cd4")


def test_algorithm_1_stops_when_an_iteration_adds_fewer_than_delta_v(wordpiece):
    tok, ex = wordpiece
    assert len(tok) == 30522 and ex.v0 == 30522                       # the base tokenizer is untouched
    its = ex.iterations
    assert ex.stopped_by == "criterion" and len(its) >= 2
    assert all(it["added_over_previous"] == 400 for it in its[:-1]) and its[-1]["added_over_previous"] < 400
    assert len(ex.words) == its[-1]["size"] - 30522 == len(ex.tokenizer) - 30522
    assert ex.ids == list(range(30522, len(ex.tokenizer)))
    assert ex.counts == sorted(ex.counts, reverse=True) and min(ex.counts) >= 1
    vocab = tok.get_vocab()
    assert not any(w in vocab or w.startswith("##") or is_noise(w) for w in ex.words)
    assert "chromatin" in ex.words[:50]


def test_every_added_wordpiece_token_tokenizes_to_itself(wordpiece):
    _, ex = wordpiece
    assert self_tokenization_failures(ex.tokenizer, ex.words, ex.ids) == []
    w = ex.words[0]
    ids = ex.tokenizer(f"The {w}s were", add_special_tokens=False)["input_ids"]
    assert ex.ids[0] in ids                                            # greedy prefix match inside a longer word


def test_max_iterations_caps_the_loop(splade_tiny_dir, texts):
    ex = expand_vocabulary(AutoTokenizer.from_pretrained(splade_tiny_dir), texts, delta_v=100, max_iterations=2)
    assert ex.stopped_by == "max_iterations" and len(ex.words) == 200
    with pytest.raises(ValueError, match="delta_v"):
        expand_vocabulary(AutoTokenizer.from_pretrained(splade_tiny_dir), texts, delta_v=0)
    with pytest.raises(ValueError, match="empty"):
        expand_vocabulary(AutoTokenizer.from_pretrained(splade_tiny_dir), [], delta_v=10)


def test_new_rows_are_the_mean_of_their_sub_words(splade_tiny_dir, wordpiece, tmp_path):
    tok, ex = wordpiece
    model = AutoModelForMaskedLM.from_pretrained(splade_tiny_dir)
    e0 = model.get_input_embeddings().weight.detach().clone()
    b0 = model.cls.predictions.bias.detach().clone()
    pieces = subword_pieces(tok, ex.words)
    info = init_new_rows(model, ex.ids, pieces)
    assert info["tied"] and info["bias"] and info["rows"] == len(ex.tokenizer)
    e1, b1 = model.get_input_embeddings().weight, model.cls.predictions.bias
    assert torch.equal(e1[:30522], e0) and torch.equal(b1[:30522], b0)
    for k in (0, len(ex.words) - 1):
        p = torch.tensor(pieces[k])
        assert len(p) >= 2
        torch.testing.assert_close(e1[ex.ids[k]], e0[p].mean(0))
        torch.testing.assert_close(b1[ex.ids[k]], b0[p].mean(0))
    assert model.get_output_embeddings().weight.data_ptr() == e1.data_ptr()   # still tied
    model.save_pretrained(tmp_path)
    ex.tokenizer.save_pretrained(tmp_path)
    tok2 = AutoTokenizer.from_pretrained(tmp_path)                         # plain transformers, unchanged
    m2 = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert len(tok2) == m2.config.vocab_size == len(ex.tokenizer)
    assert self_tokenization_failures(tok2, ex.words, ex.ids) == []
    torch.testing.assert_close(m2.get_output_embeddings().weight[ex.ids[0]], e0[torch.tensor(pieces[0])].mean(0))


def test_byte_level_bpe_words_are_added_tokens_with_the_leading_space(bpe_tokenizer_dir, texts):
    tok = AutoTokenizer.from_pretrained(bpe_tokenizer_dir)
    ex = expand_vocabulary(tok, texts[:40], delta_v=100, max_iterations=1)
    assert ex.convention == "byte_bpe" and len(ex.words) == 100 and len(tok) == 129280
    assert all(w.startswith(" ") and not is_noise(w[1:]) for w in ex.words)
    assert not any("Ġ" + w[1:] in tok.get_vocab() for w in ex.words)
    assert self_tokenization_failures(ex.tokenizer, ex.words, ex.ids) == []
    pieces = subword_pieces(tok, ex.words)
    assert all(tok.convert_ids_to_tokens(p)[0].startswith("Ġ") for p in pieces)   # sub-words of " word"
    with pytest.raises(ValueError, match="already"):
        add_words(tok, [" the"])                                       # 'Ġthe' exists
