"""``kill -9`` of ``lexray reencode`` at each stage separately (issue 24): encode, build, validate, switch, and
between the switch and the catalog's ``published`` mark.

Each kill is exact: the job is a real subprocess run with ``LEXRAY_TEST_KILL_AT=<stage>``, and
``lexray.store.faults.stage`` SIGKILLs it at that point, so no kill races the run. After each kill,
``current`` must name a complete, valid version (the old one, or the new one once it was switched to), and a rerun
(``--break-stale-lock``: the killed run's lock is stale) must finish the pending version (or encode again when
nothing was committed) and reach the store an uninterrupted run reaches: same index bytes, same shards, nothing
temporary left, nothing pending.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lexray.config import load_config
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
    job = subprocess.run([sys.executable, "-m", "lexray.cli", "reencode", "--store", str(store), "--dataset",
                          str(ds), "--model", "shared:models/splade-tiny", "--backend", "local", *sets],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    assert job.returncode == -signal.SIGKILL, job.stdout[-2000:]

    # what the kill left: the old version current (the new one after the switch), complete and valid
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

    rerun = reencode(store, config(ds), break_stale_lock=True, show_progress=False)
    assert rerun["version"] == 2
    if stage == "encode":  # nothing was committed: the changes are encoded again, the stray shard removed
        assert rerun["recovered"] == [] and rerun["encoded"] == NEW + EDIT
    else:  # committed: the rerun finishes that version, then finds nothing new to encode
        assert rerun["recovered"] == [2] and rerun["encoded"] == 0
    assert resolve_current(store).name == "v000002"
    assert verify_store(store) == [] and _leftovers(store) == []
    assert index_bytes(store) == index_bytes(twin)
    assert sorted(p.name for p in (store / "shards").iterdir()) == sorted(p.name for p in (twin / "shards").iterdir())
    assert not (store / "LOCK").exists()
