"""Shard-size policy: the auto size, the corpus row count it takes, and the one resolution of the shard size."""

from __future__ import annotations


def test_auto_rows_per_shard_cuts_about_32_shards_within_its_bounds(scifact_dir):
    from lexray.encode.plan import auto_rows_per_shard, count_corpus_rows

    assert count_corpus_rows(scifact_dir / "corpus.jsonl") == 5183
    assert count_corpus_rows(scifact_dir / "corpus.jsonl", max_docs=300) == 300
    assert auto_rows_per_shard(5183) == 162  # SciFact: 32 shards, not five of 1,000 and one of 183
    assert auto_rows_per_shard(300) == 128  # the floor
    assert auto_rows_per_shard(0) == 128
    assert auto_rows_per_shard(8_841_823) == 1_000  # the cap (MS MARCO passages)


def test_counting_rows_ignores_blank_lines_and_reads_a_last_line_without_newline(tmp_path):
    from lexray.encode.plan import count_corpus_rows

    f = tmp_path / "corpus.jsonl"
    f.write_bytes(b'{"_id": "a"}\n\n   \n{"_id": "b"}\n{"_id": "c"}')
    assert count_corpus_rows(f) == 3
    assert count_corpus_rows(f, max_docs=2) == 2


def test_the_shard_size_is_configured_else_kept_from_the_folder_else_auto():
    from lexray.encode.plan import resolve_rows_per_shard

    def never():
        raise AssertionError("the corpus was counted although the size was known")

    assert resolve_rows_per_shard(50, never, previous=300) == 50  # configured wins
    assert resolve_rows_per_shard(None, never, previous=300) == 300  # a resumed folder keeps its layout
    assert resolve_rows_per_shard(None, lambda: 5183) == 162  # auto, counted lazily
    assert resolve_rows_per_shard(None, 5183, previous=None) == 162  # the store passes the count itself
