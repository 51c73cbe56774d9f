"""Shard schema, atomic writes, reading back (lexray.encode.reader), verification and the manifest (no model, no
Ray)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lexray.encode.reader import iter_shards, read_shard
from lexray.encode.shards import (
    SHARD_SCHEMA,
    Manifest,
    ModelInfo,
    ShardInfo,
    fingerprint,
    ids_digest,
    load_manifest,
    remove_stale_tmp,
    save_manifest,
    schema_problem,
    shard_metadata,
    shard_name,
    shard_table,
    verify_shard,
    write_shard,
)


def _rows():
    ids = ["d1", "d2", "d3"]
    term_ids = [np.array([3, 7, 100], np.int32), np.array([], np.int32), np.array([5], np.int32)]
    weights = [np.array([0.5, 1.25, 2.0], np.float32), np.array([], np.float32), np.array([0.1], np.float32)]
    offsets = np.array([0, 3, 3, 4])
    return ids, term_ids, weights, offsets


def _table(fp="fp-a", index=0):
    ids, term_ids, weights, offsets = _rows()
    return shard_table(ids, offsets, np.concatenate(term_ids), np.concatenate(weights),
                       metadata=shard_metadata(fp, index))


def _info(path_rows=3, index=0):
    ids, *_ = _rows()
    return ShardInfo(index=index, file=shard_name(index), rows=path_rows, first_doc=0, first_doc_id=ids[0],
                     last_doc_id=ids[-1], ids_sha1=ids_digest(ids))


def test_shard_table_schema_is_exact_and_round_trips(tmp_path):
    path = tmp_path / shard_name(0)
    nbytes = write_shard(_table(), path)
    assert nbytes == path.stat().st_size > 0
    on_disk = pq.read_schema(path)
    assert on_disk.equals(SHARD_SCHEMA, check_metadata=False)
    assert on_disk.field("term_ids").type == pa.list_(pa.int32())
    assert on_disk.field("weights").type == pa.list_(pa.float32())
    assert on_disk.metadata[b"lexray.fingerprint"] == b"fp-a"
    doc_ids, term_ids, weights = read_shard(path)
    ids, exp_t, exp_w, _ = _rows()
    assert doc_ids == ids
    for a, b in zip(term_ids, exp_t, strict=True):
        assert a.dtype == np.int32 and a.tolist() == b.tolist()
    for a, b in zip(weights, exp_w, strict=True):
        assert a.dtype == np.float32 and a.tolist() == b.tolist()
    assert not list(tmp_path.glob(".*tmp*")), "temporary file left behind"


def test_shard_table_rejects_inconsistent_arrays():
    ids, term_ids, weights, offsets = _rows()
    with pytest.raises(ValueError, match="disagree"):
        shard_table(ids, offsets, np.concatenate(term_ids), np.concatenate(weights)[:-1])
    with pytest.raises(ValueError, match="offsets"):
        shard_table(ids, offsets[:-1], np.concatenate(term_ids), np.concatenate(weights))


def test_write_shard_refuses_wrong_schema_and_leaves_nothing(tmp_path):
    bad = pa.table({"doc_id": ["a"], "term_ids": pa.array([[1]], pa.list_(pa.int64())),
                    "weights": pa.array([[1.0]], pa.list_(pa.float32()))})
    with pytest.raises(ValueError, match="schema"):
        write_shard(bad, tmp_path / shard_name(0))
    assert list(tmp_path.iterdir()) == []


def test_iter_shards_batches_in_manifest_order(tmp_path):
    write_shard(_table(index=0), tmp_path / shard_name(0))
    write_shard(_table(index=1), tmp_path / shard_name(1))
    batches = list(iter_shards(tmp_path, batch_size=2))
    assert [len(b.doc_ids) for b in batches] == [2, 1, 2, 1]
    assert [d for b in batches for d in b.doc_ids] == ["d1", "d2", "d3"] * 2
    assert batches[1].term_ids[0].tolist() == [5]


def test_verify_shard_detects_missing_truncated_foreign_and_wrong_rows(tmp_path):
    path = tmp_path / shard_name(0)
    assert verify_shard(path, _info(), "fp-a")[:2] == (False, "missing")
    write_shard(_table(), path)
    ok, why, postings = verify_shard(path, _info(), "fp-a")
    assert ok and why == "ok" and postings == 4
    assert verify_shard(path, _info(), "fp-b")[0] is False  # made by another model/settings
    ok, why, _ = verify_shard(path, _info(path_rows=4), "fp-a")
    assert not ok and "rows 3 != 4" in why
    other = _info().model_copy(update={"ids_sha1": ids_digest(["x", "y", "z"])})
    assert verify_shard(path, other, "fp-a")[0] is False
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a truncated file (e.g. a copy that was cut off)
    ok, why, _ = verify_shard(path, _info(), "fp-a")
    assert not ok and why.startswith("unreadable")


def test_manifest_round_trip_and_stale_tmp_cleanup(tmp_path):
    ident = {"model_hash": "sha256:x", "threshold": 0.0}
    m = Manifest(fingerprint=fingerprint(ident), identity=ident, rows_per_shard=3,
                 model=ModelInfo(name_or_path="m", content_hash="sha256:x", vocab_size=10), shards=[_info()])
    save_manifest(m, tmp_path)
    back = load_manifest(tmp_path)
    assert back == m and back.shards[0].ids_sha1 == ids_digest(["d1", "d2", "d3"])
    assert fingerprint(ident) == fingerprint(dict(reversed(list(ident.items()))))  # key order irrelevant
    assert fingerprint(ident) != fingerprint({**ident, "threshold": 0.1})
    (tmp_path / ".part-00000.parquet.tmp-abc").write_bytes(b"partial")
    assert remove_stale_tmp(tmp_path) == 1
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match="manifest.json"):
        load_manifest(tmp_path)
    assert load_manifest(tmp_path / "nowhere") is None


def test_row_groups_are_sized_by_postings_not_rows(tmp_path):
    """Dense rows (an untrained model activates every term) must not make a row group no reader can hold:
    600 documents × 20,000 non-zeros are split into row groups of at most ~ROW_GROUP_POSTINGS postings."""
    from lexray.encode.shards import ROW_GROUP_POSTINGS

    n, nnz = 600, 20_000
    rng = np.random.default_rng(0)
    ids = [f"d{i}" for i in range(n)]
    term_ids = np.tile(np.arange(nnz, dtype=np.int32), n)
    weights = rng.random(n * nnz, dtype=np.float32)
    offsets = np.arange(n + 1) * nnz
    table = shard_table(ids, offsets, term_ids, weights)
    path = tmp_path / shard_name(0)
    write_shard(table, path)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups >= n * nnz // ROW_GROUP_POSTINGS
    assert all(meta.row_group(g).num_rows * nnz <= ROW_GROUP_POSTINGS for g in range(meta.num_row_groups))
    back = read_shard(path)
    assert back.doc_ids == ids and np.array_equal(back.weights[-1], weights[-nnz:])


# ------------------------------------------------------------------------------------------ integrity (issue 11)
def _complete_folder(d, n_shards=2, fp="fp-a"):
    """A folder as a finished encode leaves it: shards + a complete manifest with content checksums."""
    from lexray.fsio import file_sha256

    d.mkdir(parents=True, exist_ok=True)
    infos = []
    for k in range(n_shards):
        write_shard(_table(fp=fp, index=k), d / shard_name(k))
        infos.append(_info(index=k).model_copy(update={"sha256": file_sha256(d / shard_name(k)), "postings": 4}))
    m = Manifest(fingerprint=fp, identity={"x": 1}, rows_per_shard=3, status="complete", vocab_size=128,
                 model=ModelInfo(name_or_path="m", content_hash="sha256:x", vocab_size=128), shards=infos)
    save_manifest(m, d)
    return m


def test_resolve_shards_verifies_the_manifest(tmp_path):
    from lexray.encode.reader import ShardStoreError, resolve_shards

    d = tmp_path / "ok"
    _complete_folder(d)
    sset = resolve_shards(d)
    assert [f.name for f in sset.files] == [shard_name(0), shard_name(1)] and sset.verified and sset.vocab_size == 128

    running = tmp_path / "running"  # an interrupted encode
    m = _complete_folder(running)
    save_manifest(m.model_copy(update={"status": "running"}), running)
    with pytest.raises(ShardStoreError, match="status 'running'"):
        resolve_shards(running)

    gone = tmp_path / "gone"  # a listed shard deleted
    _complete_folder(gone)
    (gone / shard_name(1)).unlink()
    with pytest.raises(ShardStoreError, match=r"part-00001\.parquet: shard listed in .*manifest.json is missing"):
        resolve_shards(gone)

    flip = tmp_path / "flip"  # one bit flipped inside a shard: schema, rows and ids still read fine
    _complete_folder(flip)
    raw = bytearray((flip / shard_name(0)).read_bytes())
    raw[len(raw) // 3] ^= 0x10
    (flip / shard_name(0)).write_bytes(bytes(raw))
    with pytest.raises(ShardStoreError, match=r"part-00000\.parquet: content checksum .* differs"):
        resolve_shards(flip)

    mixed = tmp_path / "mixed"  # a shard of another run (fingerprint), with a manifest that lists its bytes
    m = _complete_folder(mixed)
    write_shard(_table(fp="fp-b", index=1), mixed / shard_name(1))
    from lexray.fsio import file_sha256

    m.shards[1].sha256 = file_sha256(mixed / shard_name(1))
    save_manifest(m, mixed)
    with pytest.raises(ShardStoreError, match=r"part-00001\.parquet: made by another run"):
        resolve_shards(mixed)


def test_truncated_shard_error_names_the_file(tmp_path):
    from lexray.encode.reader import ShardStoreError

    write_shard(_table(), tmp_path / shard_name(0))
    data = (tmp_path / shard_name(0)).read_bytes()
    (tmp_path / shard_name(0)).write_bytes(data[: len(data) // 2])
    with pytest.raises(ShardStoreError, match=r"part-00000\.parquet: unreadable shard"):
        list(iter_shards(tmp_path))
    with pytest.raises(ShardStoreError, match=r"part-00000\.parquet: unreadable shard"):
        read_shard(tmp_path / shard_name(0))


def test_live_rows_skip_tombstones(tmp_path):
    from lexray.encode.reader import ShardSet, iter_live_rows

    write_shard(_table(index=0), tmp_path / shard_name(0))
    write_shard(_table(index=1), tmp_path / shard_name(1))
    sset = ShardSet([tmp_path / shard_name(0), tmp_path / shard_name(1)], dead={str(tmp_path / shard_name(1)): [0, 2]})
    got = [(p.name, r.tolist(), ids) for p, _, r, ids, _, _ in iter_live_rows(sset)]
    assert got == [(shard_name(0), [0, 1, 2], ["d1", "d2", "d3"]), (shard_name(1), [1], ["d2"])]


def test_schema_problem_is_the_one_shard_schema_check():
    """Exact column names, order and types; declared nullability (pyarrow's default) is not a problem."""
    nullable = pa.schema([("doc_id", pa.string()), ("term_ids", pa.list_(pa.int32())),
                          ("weights", pa.list_(pa.float32()))])
    assert schema_problem(SHARD_SCHEMA) is None and schema_problem(nullable) is None
    large = pa.schema([("doc_id", pa.large_string()), *list(nullable)[1:]])
    assert schema_problem(large) == "column 'doc_id' has type large_string, expected string"
    assert "column 'weights' missing" in schema_problem(pa.schema(list(nullable)[:2]))
    extra = pa.schema([*nullable, ("text", pa.string())])
    assert "expected exactly ['doc_id', 'term_ids', 'weights']" in schema_problem(extra)
    swapped = pa.schema([nullable.field(1), nullable.field(0), nullable.field(2)])
    assert "in this order" in schema_problem(swapped)


def test_stray_shards_outside_the_plan_are_removed_only_with_a_warning_naming_them(tmp_path, caplog):
    """Issue 24: encode deleted stray part-*.parquet files in --out without saying so."""
    from lexray.encode.pipeline import _verify_existing

    write_shard(_table(), tmp_path / shard_name(0))
    write_shard(_table(index=7), tmp_path / shard_name(7))  # e.g. left by a run with smaller shards
    with caplog.at_level("WARNING", logger="lexray.encode.pipeline"):
        todo = _verify_existing(tmp_path, [_info()], None, "fp-a")
    assert todo == [] and not (tmp_path / shard_name(7)).exists()
    assert "removing 1 part-*.parquet" in caplog.text and shard_name(7) in caplog.text
