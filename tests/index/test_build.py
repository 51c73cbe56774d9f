"""Index build from small random Parquet shards: postings equal the shards, impacts, statistics, bad shards."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lexray.config import IndexConfig
from lexray.index.build import IndexBuildError, build_index, load_stats

SCHEMA = pa.schema([("doc_id", pa.string()), ("term_ids", pa.list_(pa.int32())), ("weights", pa.list_(pa.float32()))])


def write_shard(path, doc_ids, term_ids, weights, schema=SCHEMA):
    pq.write_table(pa.table({"doc_id": doc_ids, "term_ids": term_ids, "weights": weights}, schema=schema), path)


def random_shards(d, n_docs=300, vocab=200, max_nnz=25, n_shards=3, seed=0):
    """Random sparse documents in ``n_shards`` files; returns the dense (n_docs, vocab) matrix and the ids."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    dense = np.zeros((n_docs, vocab), np.float32)
    ids = [f"doc-{rng.integers(1e9)}-{i}" for i in range(n_docs)]  # not sorted: order must come from the shards
    for s, idx in enumerate(np.array_split(np.arange(n_docs), n_shards)):
        tids, ws = [], []
        for i in idx:
            t = rng.choice(vocab, size=rng.integers(0, max_nnz), replace=False).astype(np.int32)  # unsorted
            w = rng.gamma(2.0, 0.7, size=len(t)).astype(np.float32)
            if len(w) > 3:
                w[0] = 0.0  # zero weights are dropped from the postings (and counted)
            dense[i, t] = w
            tids.append(t)
            ws.append(w)
        write_shard(d / f"shard-{s:03d}.parquet", [ids[i] for i in idx], tids, ws)
    return dense, ids


def read_postings(index_dir):
    return (np.load(index_dir / "offsets.npy"), np.load(index_dir / "postings_doc.npy"),
            np.load(index_dir / "postings_weight.npy"), np.load(index_dir / "postings_impact.npy"))


def test_build_matches_shards(tmp_path):
    dense, ids = random_shards(tmp_path / "shards")
    # small record batches: the duplicate check and df counting must work across batch boundaries
    stats = build_index(tmp_path / "shards", tmp_path / "index", IndexConfig(threads=1, memory_limit="256MB"),
                        vocab_size=256, show_progress=False, batch_rows=97)
    off, pdoc, pw, imp = read_postings(tmp_path / "index")
    assert off.dtype == np.int64 and pdoc.dtype == np.int32 and pw.dtype == np.float32 and imp.dtype == np.uint8
    assert stats.vocab_size == 256 and off.shape == (257,) and off[-1] == len(pdoc) == stats.n_postings
    rebuilt = np.zeros((len(ids), 256), np.float32)
    for t in range(256):
        docs = pdoc[off[t]:off[t + 1]]
        assert np.all(np.diff(docs) > 0), f"postings of term {t} not sorted by doc"
        rebuilt[docs, t] = pw[off[t]:off[t + 1]]
    np.testing.assert_array_equal(rebuilt[:, :200], dense)
    assert not rebuilt[:, 200:].any()
    # doc ids in shard order
    tab = pq.read_table(tmp_path / "index" / "doc_ids.parquet")
    assert tab.column("doc_idx").to_pylist() == list(range(len(ids)))
    assert tab.column("doc_id").to_pylist() == ids
    # statistics
    nnz = (dense > 0).sum()
    assert stats.n_postings == nnz and stats.n_docs == 300 and stats.n_shards == 3
    assert stats.zero_weight_postings_dropped > 0
    assert stats.empty_docs == int(((dense > 0).sum(1) == 0).sum())
    assert stats.avg_nnz_per_doc == pytest.approx(nnz / 300)
    p = (dense > 0).sum(0) / 300
    assert stats.flops == pytest.approx(float((p ** 2).sum()))
    assert stats.max_weight == pytest.approx(float(dense.max()))
    assert stats.n_terms == int(((dense > 0).sum(0) > 0).sum())
    on_disk = load_stats(tmp_path / "index")
    assert on_disk["n_postings"] == stats.n_postings and on_disk["quant_bits"] == 8
    assert stats.index_bytes >= sum(f.stat().st_size for f in (tmp_path / "index").glob("*.npy"))


def test_impacts_quantization(tmp_path):
    random_shards(tmp_path / "shards")
    stats = build_index(tmp_path / "shards", tmp_path / "index", show_progress=False)
    _, _, pw, imp = read_postings(tmp_path / "index")
    assert stats.quant_scale == pytest.approx(stats.max_weight / 255)
    assert imp.max() == 255
    np.testing.assert_array_equal(imp, np.floor(pw.astype(np.float64) / stats.max_weight * 255 + 0.5))
    assert np.abs(imp * stats.quant_scale - pw).max() <= stats.quant_scale / 2 + 1e-7
    # 4 bits: same rule, coarser
    st4 = build_index(tmp_path / "shards", tmp_path / "index4", IndexConfig(quant_bits=4), show_progress=False)
    imp4 = np.load(tmp_path / "index4" / "postings_impact.npy")
    assert imp4.max() == 15 and np.abs(imp4 * st4.quant_scale - pw).max() <= st4.quant_scale / 2 + 1e-7


def test_rebuild_replaces_and_cleans_up(tmp_path):
    random_shards(tmp_path / "shards", n_docs=50)
    build_index(tmp_path / "shards", tmp_path / "index", show_progress=False)
    random_shards(tmp_path / "shards", n_docs=60, n_shards=3, seed=1)
    st = build_index(tmp_path / "shards", tmp_path / "index", show_progress=False)
    assert st.n_docs == 60 and load_stats(tmp_path / "index")["n_docs"] == 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "shards"]  # no temp folders left


@pytest.mark.parametrize("case", ["duplicate_id", "length_mismatch", "negative_weight", "nan_weight",
                                  "inf_weight", "repeated_term",
                                  "term_out_of_vocab", "null_id", "wrong_type", "large_string", "extra_column"])
def test_bad_shards(tmp_path, case):
    d = tmp_path / "shards"
    d.mkdir()
    write_shard(d / "a.parquet", ["x", "y"], [[1, 2], [3]], [[0.5, 1.0], [2.0]])
    schema = SCHEMA
    rows = {"duplicate_id": (["z", "x"], [[1], [2]], [[1.0], [1.0]]),
            "length_mismatch": (["z", "w"], [[1], [2, 3]], [[1.0], [1.0]]),
            "negative_weight": (["z", "w"], [[1], [2]], [[1.0], [-1.0]]),
            "nan_weight": (["z", "w"], [[1], [2, 3]], [[1.0], [1.0, float("nan")]]),
            "inf_weight": (["z", "w"], [[1], [2, 3]], [[1.0], [float("inf"), 1.0]]),
            "repeated_term": (["z", "w"], [[1], [2, 5, 2]], [[1.0], [1.0, 1.0, 2.0]]),
            "term_out_of_vocab": (["z", "w"], [[1], [9]], [[1.0], [1.0]]),
            "null_id": (["z", None], [[1], [2]], [[1.0], [1.0]]),
            "wrong_type": (["z", "w"], [[1], [2]], [[1.0], [1.0]]),
            "large_string": (["z", "w"], [[1], [2]], [[1.0], [1.0]]),
            "extra_column": (["z", "w"], [[1], [2]], [[1.0], [1.0]])}[case]
    if case == "wrong_type":
        schema = pa.schema([("doc_id", pa.string()), ("term_ids", pa.list_(pa.int64())),
                            ("weights", pa.list_(pa.float32()))])
    if case == "large_string":  # the shard schema is checked once (encode.shards.schema_problem), strictly
        schema = pa.schema([("doc_id", pa.large_string()), *list(SCHEMA)[1:]])
    write_shard(d / "b.parquet", *rows, schema=schema)
    if case == "extra_column":
        t = pq.read_table(d / "b.parquet")
        pq.write_table(t.append_column("text", pa.array(["", ""])), d / "b.parquet")
    expected = {"duplicate_id": r"b\.parquet: row 1 \(doc_id 'x'\): field 'doc_id': duplicate .*a\.parquet row 0",
                "length_mismatch": r"b\.parquet: row 1 \(doc_id 'w'\): field 'weights': term_ids has 2 .* 1",
                "negative_weight": r"b\.parquet: row 1 \(doc_id 'w'\): field 'weights': invalid weight -1",
                "nan_weight": r"b\.parquet: row 1 \(doc_id 'w'\): field 'weights': invalid weight nan",
                "inf_weight": r"b\.parquet: row 1 \(doc_id 'w'\): field 'weights': invalid weight inf",
                "repeated_term": r"b\.parquet: row 1 \(doc_id 'w'\): field 'term_ids': term id 2 appears more",
                "term_out_of_vocab": r"b\.parquet: row 1 \(doc_id 'w'\): field 'term_ids': term id 9 >= vocab_size 8",
                "null_id": r"b\.parquet: row 1 \(doc_id None\): field 'doc_id'",
                "wrong_type": r"b\.parquet: column 'term_ids' has type list<.*int64>",
                "large_string": r"b\.parquet: column 'doc_id' has type large_string, expected string",
                "extra_column": r"b\.parquet: columns \['doc_id', 'term_ids', 'weights', 'text'\], expected exactly"}[case]
    with pytest.raises(IndexBuildError, match=expected):
        build_index(d, tmp_path / "index", show_progress=False, vocab_size=8 if case == "term_out_of_vocab" else None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]


def test_missing_shards(tmp_path):
    with pytest.raises(FileNotFoundError, match="no \\*.parquet shards"):
        (tmp_path / "empty").mkdir()
        build_index(tmp_path / "empty", tmp_path / "index")


# ------------------------------------------------------------------------------------------ integrity (issue 11)
def _encoded_folder(d, fp="fp-a", n_shards=3, seed=0):
    """Random shards written by lexray.encode.shards with a complete manifest (checksums, fingerprint)."""
    from lexray.encode.shards import (
        Manifest,
        ModelInfo,
        ShardInfo,
        ids_digest,
        save_manifest,
        shard_metadata,
        shard_name,
        shard_table,
    )
    from lexray.encode.shards import write_shard as write_encoded
    from lexray.fsio import file_sha256

    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    infos = []
    for k in range(n_shards):
        ids = [f"s{k}-d{i}" for i in range(20)]
        lens = rng.integers(1, 10, size=20)
        terms = np.concatenate([np.sort(rng.choice(64, n, replace=False)) for n in lens]).astype(np.int32)
        weights = rng.gamma(2.0, 0.5, size=len(terms)).astype(np.float32) + 0.01
        offsets = np.concatenate([[0], np.cumsum(lens)])
        write_encoded(shard_table(ids, offsets, terms, weights, metadata=shard_metadata(fp, k)), d / shard_name(k))
        infos.append(ShardInfo(index=k, file=shard_name(k), rows=20, first_doc=20 * k, first_doc_id=ids[0],
                               last_doc_id=ids[-1], ids_sha1=ids_digest(ids), postings=int(len(terms)),
                               sha256=file_sha256(d / shard_name(k))))
    m = Manifest(fingerprint=fp, identity={}, rows_per_shard=20, status="complete", vocab_size=64,
                 model=ModelInfo(name_or_path="m", content_hash="sha256:x"), shards=infos)
    save_manifest(m, d)
    return m


@pytest.mark.parametrize("case", ["running", "shard_deleted", "mixed_runs", "bit_flip", "truncated"])
def test_build_index_refuses_a_folder_its_manifest_does_not_vouch_for(tmp_path, case):
    """Each case was indexed with exit 0 before issue 11 (or failed with a raw ArrowInvalid without a file)."""
    from lexray.encode.reader import ShardStoreError
    from lexray.encode.shards import save_manifest, shard_metadata, shard_table
    from lexray.encode.shards import write_shard as write_encoded
    from lexray.fsio import file_sha256

    d = tmp_path / "shards"
    m = _encoded_folder(d)
    assert build_index(d, tmp_path / "ok", show_progress=False).n_docs == 60  # the intact folder builds
    target = d / "part-00001.parquet"
    if case == "running":
        save_manifest(m.model_copy(update={"status": "running"}), d)
        expected = "status 'running'"
    elif case == "shard_deleted":
        target.unlink()
        expected = r"part-00001\.parquet: shard listed in .* is missing"
    elif case == "mixed_runs":  # a concurrent run with other settings rewrote one shard and its checksum
        t = shard_table(["x"] * 0 + [f"s1-d{i}" for i in range(20)], np.arange(21), np.arange(20, dtype=np.int32),
                        np.ones(20, np.float32), metadata=shard_metadata("fp-b", 1))
        write_encoded(t, target)
        m.shards[1].sha256 = file_sha256(target)
        save_manifest(m, d)
        expected = r"part-00001\.parquet: made by another run"
    elif case == "bit_flip":
        raw = bytearray(target.read_bytes())
        raw[len(raw) // 3] ^= 0x04
        target.write_bytes(bytes(raw))
        expected = r"part-00001\.parquet: content checksum"
    else:
        target.write_bytes(target.read_bytes()[:200])
        expected = r"part-00001\.parquet: content checksum"
    with pytest.raises(ShardStoreError, match=expected):
        build_index(d, tmp_path / "index", show_progress=False)
    assert not (tmp_path / "index").exists()


def test_truncated_shard_without_manifest_names_the_file(tmp_path):
    from lexray.encode.reader import ShardStoreError

    random_shards(tmp_path / "shards", n_docs=60, n_shards=2, seed=3)
    f = sorted((tmp_path / "shards").glob("*.parquet"))[1]
    f.write_bytes(f.read_bytes()[:300])
    with pytest.raises(ShardStoreError, match=rf"{f.name}: unreadable shard"):
        build_index(tmp_path / "shards", tmp_path / "index", show_progress=False)


def test_tombstoned_rows_are_left_out_and_the_rest_numbered_densely(tmp_path):
    from lexray.encode.reader import ShardSet, resolve_shards

    d = tmp_path / "shards"
    _encoded_folder(d)
    files = resolve_shards(d).files
    dead = {str(files[0]): [0, 5], str(files[2]): [19]}
    st = build_index(ShardSet(files, vocab_size=64, dead=dead), tmp_path / "index", show_progress=False)
    assert st.n_docs == 57
    ids = pq.read_table(tmp_path / "index" / "doc_ids.parquet").column("doc_id").to_pylist()
    expected = [f"s{k}-d{i}" for k in range(3) for i in range(20)]
    for gone in ("s0-d0", "s0-d5", "s2-d19"):
        expected.remove(gone)
    assert ids == expected
    off, pdoc, pw, _ = read_postings(tmp_path / "index")
    assert off[-1] == len(pdoc) == st.n_postings and pdoc.max() == 56


# ---- issue 24, defect 1: --out must never delete what lexray did not write
@pytest.mark.parametrize("target", ["shards", "parent", "user_files"])
def test_out_that_is_not_an_index_of_these_shards_is_refused_and_left_untouched(tmp_path, target):
    """Before issue 24 ``build_index`` rmtree'd ``index_dir`` whatever it held (exit 0): the shard folder, its
    parent, or a folder of user files were wiped."""
    from lexray.index.build import IndexOutError

    random_shards(tmp_path / "shards", n_docs=40, n_shards=2)
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("precious")
    out = {"shards": tmp_path / "shards", "parent": tmp_path, "user_files": user}[target]
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    with pytest.raises(IndexOutError, match="not a lexray index"):
        build_index(tmp_path / "shards", out, show_progress=False)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_an_index_of_other_shards_or_with_user_files_is_refused(tmp_path):
    from lexray.index.build import IndexOutError

    random_shards(tmp_path / "a", n_docs=30, n_shards=1)
    random_shards(tmp_path / "b", n_docs=30, n_shards=1, seed=2)
    build_index(tmp_path / "a", tmp_path / "index", show_progress=False)
    with pytest.raises(IndexOutError, match="index of other inputs"):
        build_index(tmp_path / "b", tmp_path / "index", show_progress=False)
    (tmp_path / "index" / "keep.txt").write_text("mine")
    with pytest.raises(IndexOutError, match="keep.txt"):
        build_index(tmp_path / "a", tmp_path / "index", show_progress=False)
    assert (tmp_path / "index" / "keep.txt").read_text() == "mine"
    (tmp_path / "index" / "keep.txt").unlink()
    assert build_index(tmp_path / "a", tmp_path / "index", show_progress=False).n_docs == 30  # same inputs: rebuilt
    (tmp_path / "empty").mkdir()
    assert build_index(tmp_path / "a", tmp_path / "empty", show_progress=False).n_docs == 30  # an empty folder is fine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "empty", "index"]


# ---- issue 24, defect 4: a folder without manifest.json mixed from two runs
def test_folder_without_manifest_mixing_fingerprints_is_refused(tmp_path):
    """Before issue 24 a manifest-less folder was indexed unverified with a warning, even when mixed."""
    from lexray.encode.reader import ShardStoreError
    from lexray.encode.shards import shard_metadata, shard_table
    from lexray.encode.shards import write_shard as write_encoded

    d = tmp_path / "shards"
    d.mkdir()
    for k, fp in enumerate(["fp-a", "fp-b"]):
        t = shard_table([f"s{k}-d{i}" for i in range(5)], np.arange(6), np.arange(5, dtype=np.int32),
                        np.ones(5, np.float32), metadata=shard_metadata(fp, k))
        write_encoded(t, d / f"part-{k:05d}.parquet")
    with pytest.raises(ShardStoreError, match=r"mixes shards of 2 runs.*part-00001\.parquet"):
        build_index(d, tmp_path / "index", show_progress=False)
    assert not (tmp_path / "index").exists()
