"""Collection store re-encoding on SciFact subsets with the real splade-tiny (short documents for speed).

A scripted mutation (+new, edited, deleted documents) must re-encode exactly the changed documents, and the new
version's exact top-k for every query must equal a from-scratch store over the mutated corpus; rollback restores
the previous results byte for byte. kill -9 during a run, then a rerun reaching the same state while a reader
polling ``current`` never sees a partial version: test_reencode_kills.py (at each stage; the ``encode`` stage is
the kill this module made from outside, now exact). A second writer refused: tests/test_cli.py
(``test_a_held_store_lock_exits_with_status_3``), tests/test_locks.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lexray.config import load_config
from lexray.store import reencode, resolve_current, rollback
from lexray.store.catalog import Catalog

REPO = Path(__file__).resolve().parents[2]
N_DOCS = 40
SETTINGS = ["model.doc_max_length=32", "encode.rows_per_shard=8", "encode.batch_size=16",
            "store.validate_queries=5", "store.validate_k=50"]


def make_dataset(src: Path, dst: Path, docs: list[dict]) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    shutil.copy(src / "queries.jsonl", dst / "queries.jsonl")
    if not (dst / "qrels").exists():
        shutil.copytree(src / "qrels", dst / "qrels")
    return dst


def mutate(docs: list[dict], n_new: int, n_edit: int, n_del: int, extra: list[dict]) -> list[dict]:
    """Edit the first n_edit documents, delete the last n_del, append n_new (SciFact documents not yet in)."""
    out = [dict(d) for d in docs[: len(docs) - n_del]]
    for d in out[:n_edit]:
        d["text"] = d["text"] + " (revised)"
    return out + extra[:n_new]


def config(dataset: Path, backend: str = "local", extra: list[str] = ()):
    return load_config(None, [f"data.dataset={dataset}", f"encode.backend={backend}", *SETTINGS, *extra],
                       base={"model": {"name_or_path": "shared:models/splade-tiny"},
                             "encode": {"batching": "exact_length", "num_actors": 2, "cpus_per_actor": 0.5}})


@pytest.fixture(scope="module")
def corpus(scifact_dir):
    lines = (scifact_dir / "corpus.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines[: N_DOCS + 20]]


@pytest.fixture(scope="module")
def searcher_queries(splade_tiny_dir, scifact_dir):
    from lexray.data.beir import load_queries
    from lexray.models import load_encoder

    cfg = load_config(None, ["model.doc_max_length=32"], base={"model": {"name_or_path": str(splade_tiny_dir)}})
    enc = load_encoder(cfg.model)
    queries = load_queries(scifact_dir, "test")
    qids = list(queries)
    q_ids, q_ws = enc.encode_sparse([queries[q] for q in qids], "query")
    return qids, q_ids, q_ws


def run_of(store: Path, queries, k: int = 1000) -> dict[str, list[tuple[str, float]]]:
    from lexray.index.search import ExactSearcher

    qids, q_ids, q_ws = queries
    s = ExactSearcher(resolve_current(store) / "index")
    run = s.search_run(qids, q_ids, q_ws, k=k)
    return {q: sorted(r.items(), key=lambda x: (-x[1], x[0])) for q, r in run.items()}


def same_topk(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    """Equal (doc_id, score) lists up to the order of exactly tied documents (the two stores number documents
    differently); at the k-th place only the tied score must agree."""
    if [s for _, s in a] != [s for _, s in b]:
        return False
    if not a:
        return True
    last = a[-1][1]
    return {x for x in a if x[1] != last} == {x for x in b if x[1] != last}


@pytest.mark.timeout(600)
def test_mutation_reencodes_only_changes_and_equals_a_scratch_build(corpus, scifact_dir, tmp_path,
                                                                    searcher_queries):
    base_docs, extra = corpus[:N_DOCS], corpus[N_DOCS:]
    ds = make_dataset(scifact_dir, tmp_path / "ds", base_docs)
    store = tmp_path / "store"
    first = reencode(store, config(ds), show_progress=False)
    assert (first["added"], first["encoded"], first["version"]) == (N_DOCS, N_DOCS, 1)
    assert first["validation"]["topk_equal"] and first["validation"]["queries"] == 5
    before = run_of(store, searcher_queries)

    noop = reencode(store, config(ds), show_progress=False)
    assert noop["noop"] and noop["encoded"] == 0 and noop["version"] == 1

    mutated = mutate(base_docs, n_new=5, n_edit=3, n_del=2, extra=extra)
    make_dataset(scifact_dir, ds, mutated)
    second = reencode(store, config(ds), show_progress=False)
    assert {k: second[k] for k in ("added", "changed", "deleted", "encoded", "version")} == \
        {"added": 5, "changed": 3, "deleted": 2, "encoded": 8, "version": 2}
    with Catalog(store, read_only=True) as cat:
        assert cat.live_count(2) == len(mutated)
        assert len(cat.dead_rows(2)) >= 1 and sum(map(len, cat.dead_rows(2).values())) == 5  # 3 edited + 2 deleted
        # old shards are immutable: version 2 reads version 1's shards plus one new one
        assert {s[0][:7] for s in cat.version_shards(2)} == {"s000001", "s000002"}

    # lexray search / open_index: the store's current version, with the model and corpus it records
    from lexray.search import open_index

    qids, q_ids, q_ws = searcher_queries
    with open_index(store) as ix:
        assert ix.location.kind == "store" and ix.location.index_dir == resolve_current(store) / "index"
        assert Path(ix.location.model.name_or_path).name == "splade-tiny"
        hits = ix.search_vectors(q_ids[0], q_ws[0], k=10)
    assert same_topk([(h.doc_id, h.score) for h in hits], run_of(store, searcher_queries, k=10)[qids[0]])
    by_id = {d["_id"]: d for d in mutated}
    assert hits and all(h.text == by_id[h.doc_id]["text"] for h in hits)  # fields of the version's corpus

    scratch = tmp_path / "scratch"
    make_dataset(scifact_dir, tmp_path / "ds2", mutated)
    reencode(scratch, config(tmp_path / "ds2"), show_progress=False)
    inc, ref = run_of(store, searcher_queries), run_of(scratch, searcher_queries)
    assert inc.keys() == ref.keys() and len(inc) == 300
    assert all(same_topk(inc[q], ref[q]) for q in inc)
    assert sum(len(r) for r in inc.values()) > 300 * 10  # not vacuous: many documents per query

    # rollback: the previous version's results, byte for byte (TREC run files)
    from lexray.eval.runs import write_trec_run

    def trec(path):
        write_trec_run({q: dict(r) for q, r in run_of(store, searcher_queries).items()}, path)
        return path.read_bytes()

    write_trec_run({q: dict(r) for q, r in before.items()}, tmp_path / "v1.trec")
    back = rollback(store)
    assert back["version"] == 1 and back["previous"] == 2
    assert trec(tmp_path / "rolled.trec") == (tmp_path / "v1.trec").read_bytes()


def _index_bytes(store: Path) -> dict[str, bytes]:
    d = resolve_current(store) / "index"
    out = {p.name: p.read_bytes() for p in d.glob("*.npy")}
    out["doc_ids"] = json.dumps(pq.read_table(d / "doc_ids.parquet").to_pylist()).encode()
    return out


@pytest.mark.timeout(120)
def test_model_change_reencodes_everything_and_bad_model_writes_nothing(corpus, scifact_dir, tmp_path):
    ds = make_dataset(scifact_dir, tmp_path / "ds", corpus[:16])
    store = tmp_path / "store"
    with pytest.raises(FileNotFoundError, match="splade-tinny"):
        reencode(store, config(ds, extra=["model.name_or_path=shared:models/splade-tinny"]), show_progress=False)
    assert not store.exists()
    reencode(store, config(ds), show_progress=False)
    again = reencode(store, config(ds, extra=["encode.doc_top_k=16"]), show_progress=False)
    assert (again["changed"], again["encoded"], again["version"]) == (16, 16, 2)
    with Catalog(store, read_only=True) as cat:
        assert {s[0][:7] for s in cat.version_shards(2)} == {"s000002"}
    lens = [len(t) for b in pq.read_table(next((store / "shards").glob("s000002-*"))).column("term_ids").to_pylist()
            for t in [b]]
    assert max(lens) <= 16
    assert np.all(np.array(lens) > 0)


@pytest.mark.timeout(300)
def test_ray_data_path_gives_the_same_index_as_in_process(ray_session, corpus, scifact_dir, tmp_path):
    """The job's default backend: Ray Data actors (encode_payloads) write the store's shards; with exact_length
    batching the index is byte-identical to the in-process encoder's."""
    ds = make_dataset(scifact_dir, tmp_path / "ds", corpus[:16])
    a = reencode(tmp_path / "ray", config(ds, "ray"), show_progress=False)
    b = reencode(tmp_path / "local", config(ds, "local"), show_progress=False)
    assert a["encoded"] == b["encoded"] == 16 and a["validation"]["topk_equal"]
    assert _index_bytes(tmp_path / "ray") == _index_bytes(tmp_path / "local")


def _flip(path: Path, where: float = 0.5) -> None:
    raw = bytearray(path.read_bytes())
    raw[int(len(raw) * where)] ^= 0x10
    path.write_bytes(bytes(raw))


@pytest.mark.timeout(300)
def test_damage_is_found_quarantined_and_repaired_and_lexray_verify_reports_it(corpus, scifact_dir, tmp_path,
                                                                                  searcher_queries, capsys):
    """Issue 24: after one flipped shard byte an unchanged-corpus run said ``noop``, a run with an edit failed and
    left a pending version that blocked the store for good; a flipped bit in an index file went unnoticed."""
    from lexray import cli

    ds = make_dataset(scifact_dir, tmp_path / "ds", corpus[:24])
    store = tmp_path / "store"
    reencode(store, config(ds), show_progress=False)
    scratch = tmp_path / "scratch"
    reencode(scratch, config(ds), show_progress=False)
    ref = run_of(scratch, searcher_queries, k=20)
    assert cli.main(["verify", "--store", str(store)]) == 0
    shard = sorted((store / "shards").glob("*.parquet"))[1]
    _flip(shard)
    capsys.readouterr()
    assert cli.main(["verify", "--store", str(store)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and shard.name in err and "content checksum" in err, err

    fixed = reencode(store, config(ds), show_progress=False)  # the corpus is unchanged: not a no-op any more
    assert not fixed["noop"] and fixed["repaired"]["quarantined"] == [shard.name]
    assert fixed["encoded"] == 8 and fixed["version"] == 2
    assert (store / "quarantine" / shard.name).is_file() and not shard.exists()
    got = run_of(store, searcher_queries, k=20)
    assert all(same_topk(got[q], ref[q]) for q in ref)
    assert cli.main(["verify", "--store", str(store)]) == 0

    weights = resolve_current(store) / "index" / "postings_weight.npy"
    _flip(weights, 0.7)
    assert cli.main(["verify", "--store", str(store)]) == 1
    assert "postings_weight.npy" in capsys.readouterr().err
    again = reencode(store, config(ds), show_progress=False)
    assert not again["noop"] and any("postings_weight.npy" in p for p in again["repaired"]["index"])
    assert again["version"] == 2 and cli.main(["verify", "--store", str(store)]) == 0
    got = run_of(store, searcher_queries, k=20)
    assert all(same_topk(got[q], ref[q]) for q in ref)
    assert reencode(store, config(ds), show_progress=False)["noop"]


@pytest.mark.timeout(300)
def test_a_pending_version_reading_a_damaged_shard_is_rolled_back_and_redone(corpus, scifact_dir, tmp_path,
                                                                            monkeypatch):
    """Issue 24: every later run failed with 'committed by an interrupted run'; the pending version is now rolled
    back (its damaged shard quarantined) and its changes re-encoded; the summary says what was recovered."""
    import importlib

    rs = importlib.import_module("lexray.store.reencode")

    docs = corpus[:16]
    ds = make_dataset(scifact_dir, tmp_path / "ds", docs)
    store = tmp_path / "store"
    reencode(store, config(ds), show_progress=False)
    make_dataset(scifact_dir, ds, mutate(docs, 0, 2, 0, []))

    def killed(*a, **k):
        raise KeyboardInterrupt("killed after the commit")

    monkeypatch.setattr(rs, "_publish", killed)
    with pytest.raises(KeyboardInterrupt):
        reencode(store, config(ds), show_progress=False)
    monkeypatch.undo()
    with Catalog(store, read_only=True) as cat:
        assert [v["version"] for v in cat.versions("pending")] == [2]
    new = next((store / "shards").glob("s000002-*.parquet"))
    _flip(new)
    out = reencode(store, config(ds), show_progress=False)
    assert out["repaired"]["rolled_back"] == [2] and out["repaired"]["quarantined"] == [new.name]
    assert (out["changed"], out["encoded"], out["version"]) == (2, 2, 3) and not out["noop"]
    with Catalog(store, read_only=True) as cat:
        assert cat.versions("pending") == [] and [v["version"] for v in cat.versions("published")] == [1, 3]
    # a plain recovery (nothing damaged): the summary says what it recovered, not "noop"
    make_dataset(scifact_dir, ds, mutate(docs, 0, 3, 0, []))
    monkeypatch.setattr(rs, "_publish", killed)
    with pytest.raises(KeyboardInterrupt):
        reencode(store, config(ds), show_progress=False)
    monkeypatch.undo()
    rec = reencode(store, config(ds), show_progress=False)
    assert rec["recovered"] == [4] and rec["version"] == 4 and rec["encoded"] == 0 and rec["noop"] is False
