"""Alignment of a case-sensitive byte-level BPE vocabulary (deepseek-v3) with bert-base-uncased's WordPiece."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from lexray.vocab.alignment import KINDS, align_vocabularies, canonical, tokenizer_convention


@pytest.fixture(scope="module")
def toks(bpe_tokenizer_dir, splade_tiny_dir):
    src = AutoTokenizer.from_pretrained(str(bpe_tokenizer_dir))
    src.add_special_tokens({"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"})
    return src, AutoTokenizer.from_pretrained(str(splade_tiny_dir))


@pytest.fixture(scope="module")
def alignment(toks):
    return align_vocabularies(*toks)


def _pair(al, src, tgt, target_token):
    t = tgt.convert_tokens_to_ids(target_token)
    s = int(al.source_of[t])
    return (src.convert_ids_to_tokens(s) if s >= 0 else None), (KINDS[al.kind[t]] if s >= 0 else None)


def test_conventions(toks):
    assert tokenizer_convention(toks[0]) == "byte_bpe"
    assert tokenizer_convention(toks[1]) == "wordpiece"
    assert canonical("Ġthe", "byte_bpe").word_start and canonical("Ġthe", "byte_bpe").text == "the"
    assert canonical("##ing", "wordpiece") == canonical("ing", "byte_bpe")
    assert canonical("Ã©", "byte_bpe").text == "é"
    assert canonical("Ã", "byte_bpe").text is None          # half of a UTF-8 character: a byte token
    assert canonical("<0x41>", "sentencepiece").raw == b"A"


def test_known_pairs(alignment, toks):
    src, tgt = toks
    assert _pair(alignment, src, tgt, "the") == ("Ġthe", "exact")
    assert _pair(alignment, src, tgt, "##ing") == ("ing", "exact")
    assert _pair(alignment, src, tgt, "paris") == ("ĠParis", "case_folded")   # no lower-case 'Ġparis' in V
    assert _pair(alignment, src, tgt, "[CLS]") == ("<｜begin▁of▁sentence｜>", "special")
    assert _pair(alignment, src, tgt, "[SEP]") == ("<｜end▁of▁sentence｜>", "special")
    assert _pair(alignment, src, tgt, "[MASK]") == (None, None)               # the source has no mask token
    assert _pair(alignment, src, tgt, "[unused0]") == (None, None)


def test_report(alignment):
    r = alignment.report()
    assert r["overlap"] + r["new"] == r["target_size"] == 30522
    assert 0.5 < r["overlap_fraction"] < 0.9
    assert sum(r["by_kind"].values()) == r["overlap"]
    assert r["examples"]["exact"] and r["examples"]["case_folded"] and r["examples"]["new"]
    for t, s in r["examples"]["case_folded"]:
        assert t == t.lower() and s.lstrip("Ġ").lower() == t
