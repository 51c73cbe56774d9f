"""encode.output_vocab: a checkpoint whose lexray_encoder.json restricts its head to its training collection's
terms (``model``, the default) can encode another collection with that collection's terms (``collection``,
recomputed) or all of |V| (``full``)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from lexray.config import EncodeConfig, ModelConfig


def _collection(path, texts):
    path.mkdir(parents=True)
    (path / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n"
                                               for i, t in enumerate(texts)))
    return path


def _terms(shards):
    return {t for f in sorted(shards.glob("part-*.parquet")) for row in pq.read_table(f).column("term_ids").to_pylist()
            for t in row}


@pytest.mark.timeout(180)
def test_restricted_checkpoint_encodes_another_collection_with_its_terms(tmp_path, splade_tiny_dir):
    from lexray.encode.pipeline import encode_corpus
    from lexray.models import load_encoder

    train = _collection(tmp_path / "train", ["protein folding in the cell", "the cell membrane"])
    other = _collection(tmp_path / "other", ["zebra giraffe volcano", "the volcano erupted"])
    enc = load_encoder(ModelConfig(name_or_path=str(splade_tiny_dir), output_vocab=str(train)))
    train_ids = set(enc.settings.output_ids)
    other_ids = set(enc.tokenizer("zebra giraffe volcano erupted")["input_ids"]) - set(enc.tokenizer.all_special_ids)
    assert other_ids - train_ids, "the test needs words of the other collection outside the training one"
    ckpt = enc.save_pretrained(tmp_path / "ckpt")  # lexray_encoder.json carries the training collection's ids

    model = ModelConfig(name_or_path=str(ckpt))
    assert load_encoder(model).settings.output_ids == sorted(train_ids)
    assert load_encoder(model.with_output_vocab("full", str(other))).settings.output_ids is None
    got = {}
    for choice in ("model", "collection", "full"):
        encode_corpus(model, other, tmp_path / choice, EncodeConfig(backend="local", output_vocab=choice),
                      show_progress=False)
        got[choice] = _terms(tmp_path / choice)
    assert got["model"] <= train_ids  # the default: only the training collection's terms, as before
    assert got["collection"] & (other_ids - train_ids)  # the other collection's own words become terms
    assert got["collection"] <= set(load_encoder(model.with_output_vocab("collection", str(other))).settings.output_ids)
    assert len(got["full"]) >= len(got["collection"])  # full: expansion terms outside both collections too
    assert not got["full"] <= other_ids | train_ids
