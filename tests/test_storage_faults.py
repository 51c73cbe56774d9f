"""Storage faults at lexray's write boundaries (issue 24, Build 2): ENOSPC / EIO while a shard or an index is
written, injected by a failing-writer shim that writes part of the file and then raises, as a full or failing disk
does. Each case: a clear error naming the errno and the file, nothing partial published (no shard, no index, no
temporary file left), and a rerun that recovers (the finished shards are not encoded again). Plus a read-only
output folder refused before any model or Ray work. No Ray: the encode runs in-process (``backend="local"``);
the checkpoint case runs in the multi-node suite (tests/cluster/test_faults.py)."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest

from lexray.config import EncodeConfig
from lexray.encode.pipeline import encode_corpus
from lexray.encode.shards import load_manifest

DOCS = 60


class FailingWriter:
    """Wraps a writer ``fn``: its ``fail_on``-th call writes 100 bytes to its file argument (positional
    ``path_arg``) and raises ``OSError(err)`` naming it; the others write normally."""

    def __init__(self, fn, fail_on: int, err: int, path_arg: int = 1):
        self.fn, self.fail_on, self.err, self.path_arg, self.calls = fn, fail_on, err, path_arg, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.fail_on:
            path = args[self.path_arg]
            with open(path, "wb") as fh:
                fh.write(b"\0" * 100)
            raise OSError(self.err, os.strerror(self.err), str(path))
        return self.fn(*args, **kwargs)


def _cfg():
    return EncodeConfig(backend="local", rows_per_shard=20, batch_size=32)


def _ids(out):
    return [i for p in sorted(out.glob("part-*.parquet"))
            for i in pq.read_table(p, columns=["doc_id"])["doc_id"].to_pylist()]


@pytest.mark.timeout(240)
def test_disk_full_or_failing_while_writing_shards_then_index(splade_tiny_dir, scifact_dir, tmp_path, monkeypatch):
    """ENOSPC on the 2nd shard: the error names errno and file; shard 0 and a ``running`` manifest stay, nothing
    partial, no lock; the rerun encodes only shards 1-2. Then EIO on the index's first array: no index folder
    and no temporary sibling; the rerun builds it."""
    import lexray.encode.shards as shards
    import lexray.index.build as build
    from lexray.index.build import build_index
    from lexray.index.search import ExactSearcher

    out = tmp_path / "shards"
    monkeypatch.setattr(shards.pq, "write_table", FailingWriter(pq.write_table, fail_on=2, err=errno.ENOSPC))
    with pytest.raises(OSError) as e:
        encode_corpus(splade_tiny_dir, scifact_dir, out, _cfg(), max_docs=DOCS, show_progress=False)
    assert e.value.errno == errno.ENOSPC and "part-00001.parquet" in str(e.value)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "part-00000.parquet"]  # no tmp, no lock
    assert load_manifest(out).status == "interrupted"
    monkeypatch.undo()
    m = encode_corpus(splade_tiny_dir, scifact_dir, out, _cfg(), max_docs=DOCS, show_progress=False)
    assert m.status == "complete" and (m.totals.shards_reused, m.totals.shards_encoded) == (1, 2)
    want = [json.loads(line)["_id"] for line, _ in zip(open(scifact_dir / "corpus.jsonl"), range(DOCS), strict=False)]
    assert sorted(_ids(out)) == sorted(want)

    monkeypatch.setattr(build.np, "save", FailingWriter(np.save, fail_on=1, err=errno.EIO, path_arg=0))
    with pytest.raises(OSError) as e:
        build_index(out, tmp_path / "index", show_progress=False)
    assert e.value.errno == errno.EIO and "offsets.npy" in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]  # no index, no temporary sibling
    monkeypatch.undo()
    stats = build_index(out, tmp_path / "index", show_progress=False)
    assert stats.n_docs == DOCS
    row = pq.read_table(out / "part-00000.parquet").slice(0, 1).to_pylist()[0]  # doc 0 as the query: found
    searcher = ExactSearcher(tmp_path / "index")
    _, idx = searcher.search([np.array(row["term_ids"])], [np.array(row["weights"], np.float32)], k=1)
    assert searcher.n_docs == DOCS and idx[0, 0] >= 0


@pytest.mark.timeout(60)
def test_read_only_output_folder_is_refused_before_any_work(splade_tiny_dir, scifact_dir, tmp_path, monkeypatch):
    """Root ignores permission bits, so the read-only file system is simulated at the probe's file creation
    (EROFS, what a read-only mount returns); the encoder is never loaded."""
    import tempfile

    import lexray.encode.pipeline as pipeline
    from lexray.fsio import OutputNotWritableError, check_writable

    def erofs(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    def no_model(*a, **k):
        raise AssertionError("the model was checked before the output folder")

    monkeypatch.setattr(tempfile, "mkstemp", erofs)
    monkeypatch.setattr(pipeline, "check_model", no_model)
    with pytest.raises(OutputNotWritableError, match=r"encode output folder .*out.* is not writable .*Read-only"):
        encode_corpus(splade_tiny_dir, scifact_dir, tmp_path / "out", _cfg(), max_docs=DOCS, show_progress=False)
    assert not (tmp_path / "out").exists()
    monkeypatch.undo()
    check_writable(tmp_path / "out" / "deeper")  # a writable parent: accepted, nothing created
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(60)
def test_checkpoint_write_fault_registers_nothing_and_the_previous_checkpoint_resumes(tmp_path, monkeypatch):
    """ENOSPC while the step-4 checkpoint copies its model: the error propagates (the worker fails, Ray Train
    restarts or fails the run), no checkpoint is reported, the temporary folder is removed, and resuming reads
    the step-2 checkpoint. Same reporter contract as Ray's (``report(metrics, folder)``), in-process."""
    import shutil
    import tempfile

    from lexray.train.checkpoint import TrainerState
    from lexray.train.runner import LocalReporter, report_checkpoint, resume_state

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\0" * 1000)
    rep = LocalReporter(tmp_path / "ckpts")
    report_checkpoint(rep, {"step": 2.0}, TrainerState(0, 2, str(model)), model)

    def copy_then_enospc(src, dst, *a, **k):
        os.makedirs(dst)
        shutil.copy(os.path.join(src, "config.json"), dst)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.path.join(dst, "model.safetensors"))

    monkeypatch.setattr(shutil, "copytree", copy_then_enospc)
    with pytest.raises(OSError) as e:
        report_checkpoint(rep, {"step": 4.0}, TrainerState(0, 4, str(model)), model)
    monkeypatch.undo()
    assert e.value.errno == errno.ENOSPC
    assert [m["step"] for m in rep.metrics] == [2.0] and not list((tmp_path / "tmp").iterdir())
    assert resume_state(rep, TrainerState()).step == 2
