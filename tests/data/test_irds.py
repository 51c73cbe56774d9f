"""``irds:<id>`` datasets (lexray.data.irds) against the BEIR folder they come from.

The ir_datasets cache is made here from ../shared/datasets/scifact (ir_datasets' downloads cannot reach their
sources): ``beir/scifact`` reads ``<IR_DATASETS_HOME>/beir/scifact/source.zip`` holding ``scifact/corpus.jsonl``,
``scifact/queries.jsonl`` and ``scifact/qrels/{train,test}.tsv`` (the BEIR zip's layout), so the zip is built from a
slice of SciFact (the first 20 test queries, their relevant documents and 200 others; 10 train queries). The
test points ``IR_DATASETS_HOME`` at it (and imports ir_datasets afresh: it reads its home when imported).

What could fail: the export losing or changing documents, queries or judgements (different metrics), the test
subset's queries not filtered by its qrels, the split name, a bad record escaping the BEIR reader's validation."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from lexray import cli

N_TEST_Q, N_OTHER_DOCS = 20, 200


def _slice(scifact: Path, out: Path, duplicate_doc: bool = False) -> None:
    """A BEIR folder ``out`` holding a small, consistent slice of SciFact."""
    def qrels(split):
        rows = [ln.split("\t") for ln in (scifact / "qrels" / f"{split}.tsv").read_text().splitlines()[1:] if ln]
        return rows

    test = qrels("test")
    test_q = list(dict.fromkeys(r[0] for r in test))[:N_TEST_Q]
    train = qrels("train")
    train_q = list(dict.fromkeys(r[0] for r in train))[:10]
    keep_rows = {"test": [r for r in test if r[0] in test_q], "train": [r for r in train if r[0] in train_q]}
    wanted = {r[1] for rows in keep_rows.values() for r in rows}
    docs = []
    for i, line in enumerate((scifact / "corpus.jsonl").read_text().splitlines()):
        if i < N_OTHER_DOCS or json.loads(line)["_id"] in wanted:
            docs.append(line)
    if duplicate_doc:
        docs.insert(5, docs[3])
    qids = set(test_q) | set(train_q)
    queries = [ln for ln in (scifact / "queries.jsonl").read_text().splitlines() if json.loads(ln)["_id"] in qids]
    (out / "qrels").mkdir(parents=True)
    (out / "corpus.jsonl").write_text("\n".join(docs) + "\n")
    (out / "queries.jsonl").write_text("\n".join(queries) + "\n")
    for split, rows in keep_rows.items():
        (out / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                                    "".join("\t".join(r) + "\n" for r in rows))


def _irds_home(beir: Path, home: Path) -> Path:
    """An ir_datasets home whose beir/scifact source is the zip of ``beir``."""
    (home / "beir" / "scifact").mkdir(parents=True)
    with zipfile.ZipFile(home / "beir" / "scifact" / "source.zip", "w") as z:
        for f in sorted(p for p in beir.rglob("*") if p.is_file()):
            z.write(f, "scifact/" + f.relative_to(beir).as_posix())
    return home


@pytest.fixture
def irds_home(tmp_path):
    """``IR_DATASETS_HOME`` = a fresh folder for this test. ir_datasets reads its home when its modules are
    imported, so they are imported afresh here and dropped again after the test."""
    def drop():
        for name in [m for m in sys.modules if m == "ir_datasets" or m.startswith("ir_datasets.")]:
            del sys.modules[name]

    home = tmp_path / "irds-home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IR_DATASETS_HOME", str(home))
        drop()
        yield home
    drop()


@pytest.mark.timeout(300)
def test_irds_dataset_evaluates_like_its_beir_folder(scifact_dir, tmp_path, irds_home):
    _slice(scifact_dir, tmp_path / "beir")
    _irds_home(tmp_path / "beir", irds_home)
    for dataset, out in ((tmp_path / "beir", "from-folder"), ("irds:beir/scifact/test", "from-irds")):
        assert cli.main(["evaluate", "--retriever", "bm25", "--dataset", str(dataset),
                         "--out", str(tmp_path / out)]) == 0
    a = json.loads((tmp_path / "from-folder" / "metrics.json").read_text())
    b = json.loads((tmp_path / "from-irds" / "metrics.json").read_text())
    assert a["n_queries"] == b["n_queries"] == N_TEST_Q
    assert a["metrics"] == b["metrics"] and a["metrics"]["nDCG@10"] > 0.3
    export = irds_home / "lexray-beir" / "beir__scifact__test"
    rec = json.loads((export / "export.json").read_text())
    n_docs = len((tmp_path / "beir" / "corpus.jsonl").read_text().splitlines())
    assert rec["split"] == "test" and rec["docs"] == n_docs and rec["queries"] == N_TEST_Q  # train ones filtered
    assert sorted(p.name for p in (export / "qrels").iterdir()) == ["test.tsv"]


@pytest.mark.timeout(120)
def test_a_bad_irds_record_meets_the_beir_validation(scifact_dir, tmp_path, irds_home):
    from lexray.data.beir import DataError, ReadReport, iter_corpus
    from lexray.data.irds import IrdsError, irds_beir_folder

    _slice(scifact_dir, tmp_path / "beir", duplicate_doc=True)
    _irds_home(tmp_path / "beir", irds_home)
    # the duplicate is reported by the one BEIR reader, naming the exported file, the line and the reason
    with pytest.raises(DataError, match=r"lexray-beir/beir__scifact__test/corpus.jsonl:6: field '_id': duplicate") as e:
        list(iter_corpus("irds:beir/scifact/test"))
    assert "duplicate" in str(e.value)
    report = ReadReport()
    docs = list(iter_corpus("irds:beir/scifact/test", on_error="skip", report=report))
    assert report.skipped["duplicate_id"] == 1 and len(docs) == len(set(d.doc_id for d in docs))
    assert irds_beir_folder("irds:beir/scifact/test") == irds_home / "lexray-beir" / "beir__scifact__test"
    with pytest.raises(IrdsError, match="ir_datasets has no dataset 'beir/no-such-collection'"):
        irds_beir_folder("irds:beir/no-such-collection")
