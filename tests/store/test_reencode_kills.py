"""``kill -9`` of ``lexray reencode`` at each stage separately (issue 24): encode, build, validate, switch, and
between the switch and the catalog's ``published`` mark.

Each kill is exact: the job is a real subprocess run with ``LEXRAY_TEST_KILL_AT=<stage>``, and
``lexray.store.faults.stage`` SIGKILLs it at that point, so no kill races the run. After each kill,
``current`` must name a complete, valid version (the old one, or the new one once it was switched to), and a rerun
(``--break-stale-lock``: the killed run's lock is stale) must finish the pending version (or encode again when
nothing was committed) and reach the store an uninterrupted run reaches: same index bytes, same shards, same
catalog rows, nothing temporary left, nothing pending. Throughout the kill and the rerun a reader polling ``current``
never sees a partial version, and the killed run's stale lock refuses a plain rerun, naming the dead holder and
``--break-stale-lock``.

(These checks were also a test of their own in test_reencode.py, killing the job from outside once its first new
shard appeared: the same point as the ``encode`` stage here, but raced. It is merged into this one.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lexray.config import load_config
from lexray.locks import LockHeldError
from lexray.store import reencode, resolve_current
from lexray.store.catalog import Catalog
from lexray.store.faults import KILL_AT_ENV, STAGES
from lexray.store.integrity import verify_store, version_problems

REPO = Path(__file__).resolve().parents[2]
SETTINGS = ["model.doc_max_length=32", "encode.rows_per_shard=8", "encode.batch_size=16",
            "store.validate_queries=5", "store.validate_k=50"]
N_DOCS = 16
NEW, EDIT, DEL = 10, 2, 2  # 12 documents to encode: two shards of 8 and 4, so the "encode" kill leaves one


def config(dataset: Path):
    return load_config(None, [f"data.dataset={dataset}", "encode.backend=local", *SETTINGS],
                       base={"model": {"name_or_path": "shared:models/splade-tiny"},
                             "encode": {"batching": "exact_length"}})


def make_dataset(src: Path, dst: Path, docs: list[dict]) -> Path:
    import json

    dst.mkdir(parents=True, exist_ok=True)
    (dst / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    shutil.copy(src / "queries.jsonl", dst / "queries.jsonl")
    if not (dst / "qrels").exists():
        shutil.copytree(src / "qrels", dst / "qrels")
    return dst


def index_bytes(store: Path) -> dict[str, bytes]:
    import pyarrow.parquet as pq

    d = resolve_current(store) / "index"
    out = {p.name: p.read_bytes() for p in d.glob("*.npy")}
    out["doc_ids"] = pq.read_table(d / "doc_ids.parquet").to_pylist()
    return out


@pytest.fixture(scope="module")
def stores(scifact_dir, tmp_path_factory):
    """(dataset after the mutation, the store at version 1 before it, the store an uninterrupted run leaves)."""
    import json

    docs = [json.loads(x) for x in (scifact_dir / "corpus.jsonl").read_text().splitlines()[: N_DOCS + NEW]]
    root = tmp_path_factory.mktemp("kills")
    ds = make_dataset(scifact_dir, root / "ds", docs[:N_DOCS])
    base = root / "base"
    reencode(base, config(ds), show_progress=False)
    changed = [dict(d) for d in docs[: N_DOCS - DEL]]  # the first EDIT edited, the last DEL deleted, NEW added
    for d in changed[:EDIT]:
        d["text"] += " (revised)"
    make_dataset(scifact_dir, ds, changed + docs[N_DOCS:])
    twin = root / "twin"
    shutil.copytree(base, twin, symlinks=True)
    clean = reencode(twin, config(ds), show_progress=False)
    assert clean["version"] == 2 and clean["encoded"] == NEW + EDIT
    return ds, base, twin


class Reader:
    """Resolves ``current`` every 5 ms and checks that the version it got is whole (version.json, the index's
    stats and its doc-id table agree); ``problems`` lists any partial view, ``seen`` the versions read."""

    def __init__(self, store: Path):
        self.store, self.problems, self.seen = store, [], set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import pyarrow.parquet as pq

        while not self._stop.is_set():
            try:
                v = resolve_current(self.store)
                info = json.loads((v / "version.json").read_text())
                stats = json.loads((v / "index" / "stats.json").read_text())
                n = pq.ParquetFile(v / "index" / "doc_ids.parquet").metadata.num_rows
                if not (info["docs"] == stats["n_docs"] == n):
                    self.problems.append(f"{v}: {info['docs']} / {stats['n_docs']} / {n}")
                self.seen.add(v.name)
            except Exception as e:  # noqa: BLE001 - any failure to read a resolved version is a partial view
                self.problems.append(f"{type(e).__name__}: {e}")
            time.sleep(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _leftovers(store) -> list[str]:
    """Temporary names a run leaves only when it is killed (dot files and folders)."""
    return sorted(p.name for d in (store, store / "versions", store / "shards") for p in d.iterdir()
                  if p.name.startswith(".") and p.name != ".tmp")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stage", STAGES)
def test_kill_at_each_stage_leaves_a_valid_current_and_a_rerun_finishes(stage, stores, tmp_path):
    ds, base, twin = stores
    store = tmp_path / "store"
    shutil.copytree(base, store, symlinks=True)
    env = {**os.environ, "PYTHONPATH": str(REPO / "platform"), KILL_AT_ENV: stage}
    sets = [a for s in SETTINGS for a in ("--set", s)]
    with Reader(store) as reader:
        job = subprocess.Popen([sys.executable, "-m", "lexray.cli", "reencode", "--store", str(store), "--dataset",
                                str(ds), "--model", "shared:models/splade-tiny", "--backend", "local", *sets],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, _ = job.communicate(timeout=240)
        assert job.returncode == -signal.SIGKILL, out[-2000:]
        check_killed_store(stage, store)
        # the killed run's lock is stale: a plain rerun is refused, naming the dead holder and the way out
        with pytest.raises(LockHeldError, match=rf"held by pid {job.pid}\b.*no longer running.*--break-stale-lock"):
            reencode(store, config(ds), show_progress=False)
        rerun = reencode(store, config(ds), break_stale_lock=True, show_progress=False)
    assert not reader.problems, reader.problems[:3]
    assert reader.seen == {"v000001", "v000002"}
    assert rerun["version"] == 2
    if stage == "encode":  # nothing was committed: the changes are encoded again, the stray shard removed
        assert rerun["recovered"] == [] and rerun["encoded"] == NEW + EDIT
    else:  # committed: the rerun finishes that version, then finds nothing new to encode
        assert rerun["recovered"] == [2] and rerun["encoded"] == 0
    assert resolve_current(store).name == "v000002"
    assert verify_store(store) == [] and _leftovers(store) == []
    assert index_bytes(store) == index_bytes(twin)
    assert sorted(p.name for p in (store / "shards").iterdir()) == sorted(p.name for p in (twin / "shards").iterdir())
    with Catalog(store, read_only=True) as a, Catalog(twin, read_only=True) as b:
        q = "SELECT doc_id, content_sha256, model_fp, shard, \"row\" FROM entries WHERE version = 2 ORDER BY doc_id"
        assert a.rows(q) == b.rows(q)
        q = "SELECT file, sha256 FROM shards ORDER BY file"
        assert a.rows(q) == b.rows(q)
    assert not (store / "LOCK").exists()


def check_killed_store(stage: str, store: Path) -> None:
    """What a kill at ``stage`` leaves: the old version current (the new one after the switch), complete and
    valid; the new version pending once committed; only that stage's temporary names."""
    cur = resolve_current(store)
    assert cur.name == ("v000002" if stage == "published" else "v000001")
    assert version_problems(store, int(cur.name[1:])) == []
    with Catalog(store, read_only=True) as cat:
        pending = [v["version"] for v in cat.versions("pending")]
    assert pending == ([] if stage == "encode" else [2])
    left = _leftovers(store)
    expected = {"encode": [], "build": [".v000002.building"], "validate": [".v000002.building"],
                "switch": [".current.tmp"], "published": []}[stage]
    assert [x.split("-")[0] for x in left] == expected, left
    if stage == "encode":  # a new shard written, not committed
        assert list((store / "shards").glob("s000002-*.parquet"))
    if stage == "switch":  # the version's folder is in place, current not yet switched to it
        assert (store / "versions" / "v000002" / "version.json").is_file()

