"""Model identity: the content hash a run's fingerprint is built from (no Ray, no model load)."""

from __future__ import annotations

import pytest


def test_single_file_models_are_identified_by_their_bytes(tmp_path):
    """Two GGUF files side by side (a package folder) get different identities, and rewritten bytes a new one;
    before, a file's *folder* was hashed over folder-model suffixes only, and every GGUF had the empty hash."""
    from lexray.config import ModelConfig
    from lexray.encode.identity import model_content_hash

    (tmp_path / "a.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    (tmp_path / "b.gguf").write_bytes(b"GGUF" + b"\1" * 64)
    ha, hb = (model_content_hash(ModelConfig(name_or_path=str(tmp_path / f))) for f in ("a.gguf", "b.gguf"))
    assert ha != hb and ha.startswith("sha256:")
    (tmp_path / "a.gguf").write_bytes(b"GGUF" + b"\1" * 64)
    assert model_content_hash(ModelConfig(name_or_path=str(tmp_path / "a.gguf"))) != ha


def test_fingerprinted_model_config_leaves_out_where_and_how_the_head_runs():
    """The model's location and the head's execution (chunk_size, head_impl) do not change a vector beyond float
    round-off, so they do not change a fingerprint (encode folders and stores made before the knobs keep theirs);
    a setting that changes vectors does."""
    from lexray.config import ModelConfig
    from lexray.encode.identity import model_config_identity

    base = model_config_identity(ModelConfig(name_or_path="a"))
    assert model_config_identity(ModelConfig(name_or_path="b", chunk_size=4, head_impl="unfused")) == base
    assert model_config_identity(ModelConfig(name_or_path="a", doc_max_length=128)) != base
    assert not {"name_or_path", "chunk_size", "head_impl", "dense"} & set(base)


def _bare_bert(splade_tiny_dir, path):
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(splade_tiny_dir)
    config = AutoConfig.for_model("bert", vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=1, num_attention_heads=4)
    AutoModel.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_headless_model_is_refused_at_start_by_encode_and_reencode(splade_tiny_dir, scifact_dir, tmp_path, capsys):
    """Issue 24: encode and reencode found a bare BertModel only inside the encoder actors (~30 s, ~270 lines
    ending in ActorDiedError) and left a ``running`` manifest behind; now one line, before anything is written."""
    from lexray import cli
    from lexray.config import ModelConfig
    from lexray.encode.identity import check_model

    bare = _bare_bert(splade_tiny_dir, tmp_path / "bare")
    capsys.readouterr()  # save_pretrained's progress bar
    with pytest.raises(ValueError, match="has no LM/MLM head"):
        check_model(ModelConfig(name_or_path=str(bare)))
    for argv, out in ((["encode", "--out", str(tmp_path / "shards"), "--backend", "local"], tmp_path / "shards"),
                      (["reencode", "--store", str(tmp_path / "store"), "--backend", "local"], tmp_path / "store")):
        rc = cli.main([*argv, "--model", str(bare), "--dataset", str(scifact_dir)])
        err = capsys.readouterr().err
        assert rc == 1 and err.count("\n") == 1 and "has no LM/MLM head" in err, err
        assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())
