"""Encode, Ray Train DDP and a Tune search on a 3-node cluster (head + 2 worker nodes, ``conftest.py``): the work
is spread over both worker nodes, and the results are those of one node (every shard exactly once, training
finished, every trial accounted for)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.cluster

DOCS = 240


def encode_cfg(**over):
    from lexray.config import EncodeConfig

    return EncodeConfig(**{"num_actors": 2, "cpus_per_actor": 0.75, "reader_cpus": 0.25, "rows_per_shard": 20,
                           "batch_size": 32, **over})


def assert_exactly_once(out, scifact_dir, n=DOCS):
    import json

    from lexray.encode.shards import load_manifest

    m = load_manifest(out)
    assert m.status == "complete" and m.totals.docs == n
    ids = [i for p in sorted(out.glob("part-*.parquet")) for i in pq.read_table(p, columns=["doc_id"])["doc_id"]
           .to_pylist()]
    want = [json.loads(line)["_id"] for line, _ in zip(open(scifact_dir / "corpus.jsonl"), range(n))]
    assert sorted(ids) == sorted(want) and len(ids) == len(set(ids))  # every document exactly once
    return m


@pytest.mark.timeout(240)
def test_encode_actors_on_both_nodes_every_shard_once(cluster, placement, splade_tiny_dir, scifact_dir, tmp_path):
    from lexray.encode.pipeline import encode_corpus

    with placement:
        m = encode_corpus(splade_tiny_dir, scifact_dir, tmp_path / "shards", encode_cfg(), max_docs=DOCS,
                          show_progress=False)
    assert placement.nodes_running("ShardEncoder") == {"node_a", "node_b"}, placement.seen
    assert m.totals.shards == DOCS // 20 and m.totals.shards_encoded == DOCS // 20
    assert_exactly_once(tmp_path / "shards", scifact_dir)
