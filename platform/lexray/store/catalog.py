"""The catalog of a collection store: one DuckDB file, ``STORE/catalog.duckdb``.

Tables (docs/indexing.md, "Collection stores")::

    shards(file, version, model_fp, rows, sha256, bytes, postings, vocab_size)
        every immutable shard file of ``STORE/shards/`` and the version that wrote it; ``sha256`` is the content
        checksum of its bytes, verified before every index build
    entries(version, doc_id, content_sha256, model_fp, shard, row)
        for each kept version, each live document: the sha256 of the exact text that was encoded
        (``title + " " + text``), the model fingerprint, and where its vector is (shard file, row)
    tombstones(version, shard, row, doc_id)
        rows of the shards a version reads that are dead in it (the document was deleted or re-encoded)
    versions(version, parent, status, created_at, model_fp, docs, added, changed, deleted, encoded)
        ``pending`` (committed, index not yet published), ``published``, or ``rolled_back`` (a pending version
        that read a damaged shard, dropped by lexray.store.integrity; kept so its number is not reused)

Every change of a run is one DuckDB transaction, so a kill leaves the catalog either before or after it.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CATALOG_FILE", "Catalog", "CorpusDiff"]

CATALOG_FILE = "catalog.duckdb"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS shards (file VARCHAR PRIMARY KEY, version INTEGER, model_fp VARCHAR, rows INTEGER,
                                   sha256 VARCHAR, bytes BIGINT, postings BIGINT, vocab_size INTEGER);
CREATE TABLE IF NOT EXISTS entries (version INTEGER, doc_id VARCHAR, content_sha256 VARCHAR, model_fp VARCHAR,
                                    shard VARCHAR, "row" INTEGER, PRIMARY KEY (version, doc_id));
CREATE TABLE IF NOT EXISTS tombstones (version INTEGER, shard VARCHAR, "row" INTEGER, doc_id VARCHAR);
CREATE TABLE IF NOT EXISTS versions (version INTEGER PRIMARY KEY, parent INTEGER, status VARCHAR,
                                     created_at VARCHAR, model_fp VARCHAR, docs INTEGER, added INTEGER,
                                     changed INTEGER, deleted INTEGER, encoded INTEGER);
"""


@dataclass(frozen=True)
class CorpusDiff:
    """The corpus against a version's entries: document counts, the documents to encode and those to drop."""

    added: int
    changed: int
    deleted: int
    todo_ids: frozenset[str] | None  # doc ids to encode; None: all (no base version, or a new model)
    drop_sql: str | None  # SELECT of the base's doc ids not carried over (Catalog.commit_version); None: carry none
    forced: int = 0  # unchanged documents re-encoded because their shard was damaged (lexray.store.integrity)


class Catalog:
    """A connection to ``catalog.duckdb`` (created with its tables when missing). Use as a context manager."""

    def __init__(self, store: str | os.PathLike, read_only: bool = False):
        import duckdb

        self.path = Path(store) / CATALOG_FILE
        if read_only and not self.path.is_file():
            raise FileNotFoundError(f"{self.path} not found: not a lexray collection store")
        self.con = duckdb.connect(str(self.path), read_only=read_only)
        if not read_only:
            self.con.execute(_SCHEMA)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ queries
    def rows(self, sql: str, params=None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def versions(self, status: str | None = None) -> list[dict]:
        cols = ["version", "parent", "status", "created_at", "model_fp", "docs", "added", "changed", "deleted",
                "encoded"]
        where = "WHERE status = ?" if status else ""
        return [dict(zip(cols, r, strict=True)) for r in
                self.rows(f"SELECT {', '.join(cols)} FROM versions {where} ORDER BY version", [status] if status else [])]

    def next_version(self) -> int:
        return int(self.rows("SELECT coalesce(max(version), 0) + 1 FROM versions")[0][0])

    def shard_files(self) -> set[str]:
        return {r[0] for r in self.rows("SELECT file FROM shards")}

    def version_shards(self, version: int) -> list[tuple[str, str, str]]:
        """``(file, sha256, model_fp)`` of the shards holding a live document of ``version``, in read order
        (the writing version, then the file name)."""
        return self.rows("""SELECT s.file, s.sha256, s.model_fp FROM shards s
                            WHERE s.file IN (SELECT DISTINCT shard FROM entries WHERE version = ?)
                            ORDER BY s.version, s.file""", [version])

    def dead_rows(self, version: int) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for shard, row in self.rows('SELECT shard, "row" FROM tombstones WHERE version = ? ORDER BY shard, "row"',
                                    [version]):
            out.setdefault(shard, []).append(int(row))
        return out

    def vocab_size(self, version: int) -> int | None:
        """|V| of the encoder that wrote the shards of ``version``."""
        r = self.rows("SELECT max(vocab_size) FROM shards WHERE file IN "
                      "(SELECT DISTINCT shard FROM entries WHERE version = ?)", [version])
        return int(r[0][0]) if r and r[0][0] is not None else None

    def live_count(self, version: int) -> int:
        return int(self.rows("SELECT count(*) FROM entries WHERE version = ?", [version])[0][0])

    def diff(self, base: int | None, same_model: bool, n_docs: int, forced: frozenset[str] = frozenset()
             ) -> CorpusDiff:
        """Diff the corpus, registered as the view ``corpus_scan`` (doc_id, content_sha256; ``n_docs`` rows),
        against the entries of version ``base``. With no base or another model (``same_model`` false) every
        document is to encode: the base's documents present in the corpus count as changed, the rest deleted.
        ``forced``: doc ids of ``base`` to re-encode although unchanged (their shard was damaged)."""
        if base is None or not same_model:
            n_base = self.live_count(base) if base is not None else 0
            added = n_docs if base is None else int(self.rows(
                "SELECT count(*) FROM corpus_scan c ANTI JOIN (SELECT doc_id FROM entries WHERE version = ?) e "
                "ON e.doc_id = c.doc_id", [base])[0][0])
            changed = n_docs - added
            return CorpusDiff(added, changed, n_base - changed, None, None)
        added = int(self.rows("SELECT count(*) FROM corpus_scan c ANTI JOIN (SELECT doc_id FROM entries WHERE "
                              "version = ?) e ON e.doc_id = c.doc_id", [base])[0][0])
        changed = int(self.rows("SELECT count(*) FROM corpus_scan c JOIN entries e ON e.doc_id = c.doc_id AND "
                                "e.version = ? WHERE e.content_sha256 <> c.content_sha256", [base])[0][0])
        deleted = int(self.rows("SELECT count(*) FROM entries e ANTI JOIN corpus_scan c ON e.doc_id = c.doc_id "
                                "WHERE e.version = ?", [base])[0][0])
        self.con.execute("CREATE OR REPLACE TEMP TABLE forced_ids (doc_id VARCHAR)")
        if forced:
            self.con.executemany("INSERT INTO forced_ids VALUES (?)", [[d] for d in sorted(forced)])
        todo_ids = frozenset(r[0] for r in self.rows(
            "SELECT c.doc_id FROM corpus_scan c LEFT JOIN (SELECT doc_id, content_sha256 FROM entries WHERE "
            "version = ?) e ON e.doc_id = c.doc_id WHERE e.doc_id IS NULL OR e.content_sha256 <> c.content_sha256 "
            "OR c.doc_id IN (SELECT doc_id FROM forced_ids)", [base]))
        n_forced = int(self.rows("SELECT count(*) FROM corpus_scan c JOIN entries e ON e.doc_id = c.doc_id AND "
                                 "e.version = ? AND e.content_sha256 = c.content_sha256 "
                                 "WHERE c.doc_id IN (SELECT doc_id FROM forced_ids)", [base])[0][0])
        drop_sql = ("SELECT e2.doc_id FROM entries e2 LEFT JOIN corpus_scan c2 ON c2.doc_id = e2.doc_id "
                    f"WHERE e2.version = {int(base)} AND (c2.doc_id IS NULL OR c2.content_sha256 <> e2.content_sha256 "
                    "OR e2.doc_id IN (SELECT doc_id FROM forced_ids))")
        return CorpusDiff(added, changed, deleted, todo_ids, drop_sql, n_forced)

    # ------------------------------------------------------------------ writes (one transaction each)
    def commit_version(self, version: int, parent: int | None, model_fp: str, counts: dict, new_shards: list[dict],
                       new_entries, drop_ids_sql: str | None) -> None:
        """Record version ``version`` (status ``pending``) in one transaction.

        Args:
            new_shards: dicts with file, rows, sha256, bytes, postings, vocab_size (written by this run).
            new_entries: a pyarrow table (doc_id, content_sha256, shard, row) of the documents encoded now.
            drop_ids_sql: a SELECT of doc ids of the parent's entries that are not carried over (deleted or
                re-encoded), or None to carry nothing (a new model: everything re-encoded).
        """
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            for s in new_shards:
                con.execute("INSERT INTO shards VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            [s["file"], version, model_fp, s["rows"], s["sha256"], s["bytes"], s["postings"],
                             s["vocab_size"]])
            if parent is not None and drop_ids_sql is not None:
                con.execute(f"""INSERT INTO entries SELECT ?, doc_id, content_sha256, model_fp, shard, "row"
                                FROM entries WHERE version = ? AND doc_id NOT IN ({drop_ids_sql})""",
                            [version, parent])
            con.register("new_entries_view", new_entries)
            con.execute("""INSERT INTO entries SELECT ?, doc_id, content_sha256, ?, shard, "row"
                           FROM new_entries_view""", [version, model_fp])
            con.unregister("new_entries_view")
            # tombstones: rows of the shards this version reads that hold no live document of it
            con.execute("""INSERT INTO tombstones
                           SELECT ?, a.shard, a."row", a.doc_id FROM (
                               SELECT shard, "row", doc_id FROM entries WHERE version < ? AND shard IN
                                   (SELECT DISTINCT shard FROM entries WHERE version = ?)
                               UNION SELECT shard, "row", doc_id FROM tombstones WHERE version < ? AND shard IN
                                   (SELECT DISTINCT shard FROM entries WHERE version = ?)) a
                           ANTI JOIN (SELECT shard, "row" FROM entries WHERE version = ?) l
                               ON l.shard = a.shard AND l."row" = a."row"
                           """, [version, version, version, version, version, version])
            docs = int(con.execute("SELECT count(*) FROM entries WHERE version = ?", [version]).fetchall()[0][0])
            con.execute("INSERT INTO versions VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)",
                        [version, parent, _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), model_fp, docs,
                         counts["added"], counts["changed"], counts["deleted"], counts["encoded"]])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def mark_rolled_back(self, row: dict) -> None:
        """Record a dropped version as ``rolled_back`` (no entries): its number is never reused, since shards
        named after it may sit in ``quarantine/`` (lexray.store.integrity)."""
        self.con.execute("INSERT INTO versions VALUES (?, ?, 'rolled_back', ?, ?, 0, ?, ?, ?, 0)",
                         [row["version"], row["parent"], row["created_at"], row["model_fp"], row["added"],
                          row["changed"], row["deleted"]])

    def set_status(self, version: int, status: str) -> None:
        self.con.execute("UPDATE versions SET status = ? WHERE version = ?", [status, version])

    def drop_versions(self, versions: list[int]) -> list[str]:
        """Forget ``versions`` and the shards no remaining version reads; returns those shard files."""
        if not versions:
            return []
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            ph = ", ".join("?" * len(versions))
            for t in ("entries", "tombstones", "versions"):
                con.execute(f"DELETE FROM {t} WHERE version IN ({ph})", versions)
            gone = [r[0] for r in con.execute(
                "SELECT file FROM shards WHERE file NOT IN (SELECT DISTINCT shard FROM entries)").fetchall()]
            con.execute("DELETE FROM shards WHERE file NOT IN (SELECT DISTINCT shard FROM entries)")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return gone
