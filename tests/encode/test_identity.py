"""Model identity: the content hash a run's fingerprint is built from (no Ray, no model load)."""

from __future__ import annotations


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
