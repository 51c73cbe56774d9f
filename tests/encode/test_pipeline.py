"""Corpus encoding through Ray Data with the real splade-tiny on the first SciFact documents.

One Ray Data run (module fixture) is shared by the schema, exactly-once and weight checks; the resume test damages
a copy of its output and re-runs; refusal and bad-row tests fail before any encoding; the overwrite test uses the
in-process backend on a few documents.

Sizes: 80 documents in 4 shards of 20, truncated to 64 tokens (``MODEL``; splade-tiny's own limit is 256): the
MLM head over 30,522 terms at every token is nearly all of the encoding cost, and 4 shards are what the resume
test needs (two kept, one deleted, one truncated).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from lexray.config import EncodeConfig, ModelConfig
from lexray.data.beir import DataError, iter_corpus
from lexray.encode.pipeline import encode_corpus
from lexray.encode.reader import iter_shards
from lexray.encode.shards import SHARD_SCHEMA, ManifestMismatchError, load_manifest

N_DOCS = 80
ROWS = 20
DOC_LEN = 64
CFG = EncodeConfig(rows_per_shard=ROWS, num_actors=2, cpus_per_actor=0.5, batch_size=16)


@pytest.fixture(scope="module")
def model(splade_tiny_dir):
    """splade-tiny with documents truncated to DOC_LEN tokens."""
    return ModelConfig(name_or_path=str(splade_tiny_dir), doc_max_length=DOC_LEN)


@pytest.fixture(scope="module")
def encoded(ray_session, tmp_path_factory, model, scifact_dir):
    out = tmp_path_factory.mktemp("shards")
    manifest = encode_corpus(model, scifact_dir, out, CFG, max_docs=N_DOCS, backend="ray", show_progress=False)
    return out, manifest


@pytest.fixture(scope="module")
def encoder(model):
    from lexray.models import load_encoder

    return load_encoder(model)


def _all_rows(out):
    ids, tids, ws = [], [], []
    for b in iter_shards(out):
        ids += b.doc_ids
        tids += b.term_ids
        ws += b.weights
    return ids, tids, ws


@pytest.mark.timeout(240)
def test_schema_exact_and_every_document_exactly_once(encoded, scifact_dir):
    out, manifest = encoded
    files = sorted(out.glob("*.parquet"))
    assert [f.name for f in files] == [f"part-{k:05d}.parquet" for k in range(N_DOCS // ROWS)]
    for f in files:
        schema = pq.read_schema(f)
        assert schema.equals(SHARD_SCHEMA, check_metadata=False), schema
        assert pq.ParquetFile(f).metadata.num_rows == ROWS
    expected = [d.doc_id for d in iter_corpus(scifact_dir, max_docs=N_DOCS)]
    ids, tids, ws = _all_rows(out)
    assert ids == expected  # corpus order, each document once
    assert all(len(t) == len(w) and t.dtype == np.int32 and w.dtype == np.float32 for t, w in zip(tids, ws, strict=True))
    assert all(np.all(np.diff(t) > 0) and np.all(w > 0) for t, w in zip(tids, ws, strict=True))
    m = load_manifest(out)
    assert m == manifest and m.status == "complete"
    assert m.totals.docs == N_DOCS and m.totals.shards_encoded == N_DOCS // ROWS
    assert m.totals.postings == sum(len(t) for t in tids) and m.totals.avg_nnz > 50
    assert m.vocab_size == 30522 and m.model.doc_max_length == DOC_LEN
    assert m.model.content_hash.startswith("sha256:") and m.read_report["kept"]["corpus.jsonl"] == N_DOCS
    assert [s.rows for s in m.shards] == [ROWS] * (N_DOCS // ROWS)
    assert m.shards[0].first_doc_id == expected[0] and m.shards[-1].last_doc_id == expected[-1]
    assert m.timings["head_pool"] > 0 and m.timings["padded_tokens"] >= m.timings["real_tokens"] > 0
    # fixed cost around the shards (actor start and model load before the first one; collection after the last):
    # both measured, and together with any shard's own time within the wall time
    wall = m.totals.encode_seconds
    assert m.timings["to_first_shard"] > 0 and m.timings["after_last_shard"] >= 0
    assert m.timings["to_first_shard"] + min(s.encode_seconds for s in m.shards) + m.timings["after_last_shard"] < wall


@pytest.mark.timeout(240)
def test_weights_equal_encoder_on_same_texts(encoded, encoder, scifact_dir):
    out, _ = encoded
    docs = list(iter_corpus(scifact_dir, max_docs=N_DOCS))
    texts = [d.full_text for d in docs]
    ids, tids, ws = _all_rows(out)
    ref_ids, ref_ws = encoder.encode_sparse(texts, batch_size=32)
    dense = torch.zeros(len(texts), encoder.vocab_size)
    ref = torch.zeros_like(dense)
    for i in range(len(texts)):
        dense[i, torch.as_tensor(tids[i], dtype=torch.long)] = torch.as_tensor(ws[i])
        ref[i, torch.as_tensor(ref_ids[i], dtype=torch.long)] = torch.as_tensor(ref_ws[i])
    assert (dense - ref).abs().max().item() <= 1e-5
    exact_sets = sum(np.array_equal(a, b) for a, b in zip(tids, ref_ids, strict=True))
    assert exact_sets >= len(texts) - 2  # only a logit within float noise of 0 could flip


@pytest.mark.timeout(240)
def test_resume_redoes_only_deleted_and_truncated_shards(encoded, ray_session, model, scifact_dir, tmp_path):
    src, _ = encoded
    out = tmp_path / "resume"
    shutil.copytree(src, out)
    (out / "part-00001.parquet").unlink()
    data = (out / "part-00002.parquet").read_bytes()
    (out / "part-00002.parquet").write_bytes(data[: len(data) // 3])
    kept_mtime = {k: (out / f"part-{k:05d}.parquet").stat().st_mtime_ns for k in (0, 3)}
    m = encode_corpus(model, scifact_dir, out, CFG, max_docs=N_DOCS, backend="ray", show_progress=False)
    assert m.status == "complete"
    assert (m.totals.shards_encoded, m.totals.shards_reused, m.totals.docs_encoded) == (2, 2, 2 * ROWS)
    for k, t in kept_mtime.items():
        assert (out / f"part-{k:05d}.parquet").stat().st_mtime_ns == t, f"shard {k} was rewritten"
    for k in range(N_DOCS // ROWS):
        a = pq.read_table(src / f"part-{k:05d}.parquet")
        b = pq.read_table(out / f"part-{k:05d}.parquet")
        assert a.column("doc_id").equals(b.column("doc_id"))
        assert a.column("term_ids").equals(b.column("term_ids"))
        np.testing.assert_allclose(a.column("weights").combine_chunks().values.to_numpy(),
                                   b.column("weights").combine_chunks().values.to_numpy(), atol=1e-6)
    assert _all_rows(out)[0] == _all_rows(src)[0]
    assert not list(out.glob(".*tmp*"))


@pytest.mark.timeout(120)
def test_refuses_folder_of_other_settings_and_overwrites_when_told(encoded, model, scifact_dir, encoder, tmp_path):
    src, _ = encoded
    out = tmp_path / "other"
    shutil.copytree(src, out)
    before = (out / "manifest.json").read_text()
    with pytest.raises(ManifestMismatchError, match="threshold"):
        encode_corpus(model, scifact_dir, out, CFG.model_copy(update={"threshold": 0.5}),
                      max_docs=N_DOCS, backend="ray", show_progress=False)
    assert (out / "manifest.json").read_text() == before  # nothing touched
    # overwrite=True replaces the folder (in-process backend, a few documents)
    m = encode_corpus(model, scifact_dir, out, CFG.model_copy(update={"threshold": 0.5}),
                      max_docs=10, backend="local", overwrite=True, show_progress=False)
    assert m.totals.docs == 10 and sorted(p.name for p in out.glob("*.parquet")) == ["part-00000.parquet"]
    ids, tids, ws = _all_rows(out)
    texts = [d.full_text for d in iter_corpus(scifact_dir, max_docs=10)]
    ref_ids, ref_ws = encoder.encode_sparse(texts, threshold=0.5)
    assert all(w.min() > 0.5 for w in ws)
    for a, b, wa, wb in zip(tids, ref_ids, ws, ref_ws, strict=True):
        assert np.array_equal(a, b)
        np.testing.assert_allclose(wa, wb, atol=1e-5)


@pytest.mark.timeout(120)
def test_bad_rows_fail_with_location_or_are_skipped_and_counted(splade_tiny_dir, tmp_path):
    ds = tmp_path / "bad"
    ds.mkdir()
    lines = [json.dumps({"_id": "a", "title": "Cells", "text": "Stem cells divide."}),
             "{not json",
             json.dumps({"_id": "b", "title": "", "text": "Insulin lowers glucose."}),
             json.dumps({"title": "no id", "text": "x"}),
             json.dumps({"_id": "c", "title": "T", "text": "Vitamin D and bone density."})]
    (ds / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    with pytest.raises(DataError, match=r"corpus.jsonl:2"):
        encode_corpus(splade_tiny_dir, ds, out, CFG, backend="local", show_progress=False)
    assert not list(out.glob("*.parquet"))
    m = encode_corpus(splade_tiny_dir, ds, out, CFG, on_error="skip", backend="local", show_progress=False)
    assert m.read_report["skipped"] == {"bad_json": 1, "missing_id": 1}
    assert any("corpus.jsonl:4" in msg and "_id" in msg for msg in m.read_report["messages"])
    assert _all_rows(out)[0] == ["a", "b", "c"] and m.totals.docs == 3


@pytest.mark.timeout(60)
def test_mistyped_model_path_fails_before_writing_anything(scifact_dir, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(FileNotFoundError, match="splade-tinny"):
        encode_corpus(str(tmp_path.parent / "models" / "splade-tinny"), scifact_dir, out, CFG, max_docs=10,
                      backend="local", show_progress=False)
    assert not out.exists()  # no running manifest left to block the corrected rerun


@pytest.mark.timeout(60)
def test_concurrent_encode_into_one_folder_is_refused(splade_tiny_dir, scifact_dir, tmp_path):
    import os
    import socket
    import subprocess
    import sys

    from lexray.locks import LockHeldError

    out = tmp_path / "out"
    out.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # the other encode
    try:
        (out / ".lock").write_text(json.dumps({"pid": other.pid, "host": socket.gethostname(),
                                               "started_at": "t0", "command": "encode_corpus.py"}))
        with pytest.raises(LockHeldError, match=f"pid {other.pid}"):
            encode_corpus(splade_tiny_dir, scifact_dir, out, CFG.model_copy(update={"doc_top_k": 16}),
                          max_docs=10, backend="local", show_progress=False)
        assert sorted(os.listdir(out)) == [".lock"]  # the refused run wrote nothing
    finally:
        other.kill()
        other.wait()


@pytest.mark.timeout(120)
def test_default_shard_size_is_auto_and_a_resumed_folder_keeps_its_own(splade_tiny_dir, scifact_dir, tmp_path):
    from lexray.config import ModelConfig

    # 8-token documents: the shard plan is what is tested, not the encoder (140 documents: one full auto shard)
    model = ModelConfig(name_or_path=str(splade_tiny_dir), doc_max_length=8)
    auto = EncodeConfig(batch_size=16, backend="local")
    assert auto.rows_per_shard is None
    m = encode_corpus(model, scifact_dir, tmp_path / "auto", auto, max_docs=140, show_progress=False)
    assert m.rows_per_shard == 128 and m.encode["rows_per_shard"] == 128
    assert [s.rows for s in m.shards] == [128, 12]
    # a folder made with another size (e.g. the former default) is resumed with that size, not re-cut
    old = encode_corpus(model, scifact_dir, tmp_path / "old", auto.model_copy(update={"rows_per_shard": 100}),
                        max_docs=140, show_progress=False)
    assert [s.rows for s in old.shards] == [100, 40]
    (tmp_path / "old" / old.shards[-1].file).unlink()
    again = encode_corpus(model, scifact_dir, tmp_path / "old", auto, max_docs=140, show_progress=False)
    assert again.fingerprint == old.fingerprint and again.rows_per_shard == 100
    assert (again.totals.shards_encoded, again.totals.shards_reused) == (1, 1)
