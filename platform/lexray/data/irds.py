"""ir_datasets collections (``irds:<id>``, e.g. ``irds:beir/scifact/test``) as BEIR folders.

Why a BEIR folder: every reader of lexray takes a BEIR folder (:mod:`lexray.data.beir`, the one BEIR reader, with
its validation and read/skip report :mod:`lexray.data.report`). An ``irds:`` location is exported once, through
the ``ir_datasets`` library (MacAvaney et al., "Simplified Data Wrangling with ir_datasets", SIGIR 2021), into
``corpus.jsonl`` / ``queries.jsonl`` / ``qrels/<split>.tsv``, and from then on read by the same code as a BEIR
folder: the same checks (duplicate ids, empty texts, unknown documents in the qrels…) with line numbers of the
exported files, the same ``data.on_error`` fail|skip and the same report. Nothing is dropped on export: every
document, query and judgement ir_datasets yields is written as it is.

Where: ``<ir_datasets home>/lexray-beir/<id with / → __>/`` (the home is ir_datasets' own: ``IR_DATASETS_HOME``,
else ``~/.ir_datasets``), so the export lives beside the ir_datasets cache it was made from, and another home
gives another export. Published atomically (:func:`lexray.fsio.publish_folder`; ``export.json`` last, with the
counts); delete the folder to export again.

Split: the qrels are written as ``qrels/<split>.tsv`` with ``<split>`` the id's last component when it names a
split (``train``, ``dev``, ``test``, ``validation``, ``valid``), else ``test``; give the same ``data.split``.

Documents: ``title`` is the record's ``title`` field when it has one, ``text`` its ``text`` field (else
ir_datasets' ``default_text()``). Queries: ``text`` (else ``default_text()``). Qrels: ``relevance`` (int).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from lexray.fsio import publish_folder

log = logging.getLogger(__name__)

__all__ = ["IRDS_PREFIX", "IrdsError", "irds_beir_folder", "irds_split"]

IRDS_PREFIX = "irds:"
SPLITS = ("train", "dev", "test", "validation", "valid")
EXPORT_FILE = "export.json"


class IrdsError(ValueError):
    """An ``irds:`` location ir_datasets does not know, or one without documents; the message names it."""


def irds_split(dataset_id: str) -> str:
    """The qrels split name an ``irds:`` id's export uses (module docstring)."""
    last = dataset_id.rstrip("/").rsplit("/", 1)[-1]
    return last if last in SPLITS else "test"


def irds_beir_folder(location: str) -> Path:
    """The BEIR folder of ``irds:<id>``, exported on first use (module docstring).

    Args:
        location: ``irds:<ir_datasets id>``, e.g. ``irds:beir/scifact/test``.

    Returns:
        the folder (``corpus.jsonl``, ``queries.jsonl`` when the dataset has queries, ``qrels/<split>.tsv`` when
        it has qrels, ``export.json`` with the id, the counts and the split).

    Raises:
        IrdsError: not an ``irds:`` location, an id ir_datasets does not know (the message says where to look),
            a dataset without documents. ImportError: ir_datasets is not installed. Downloads ir_datasets cannot
            make raise its own errors (point ``IR_DATASETS_HOME`` at a prepared cache: docs/datasets.md).
    """
    if not str(location).startswith(IRDS_PREFIX):
        raise IrdsError(f"{location!r} is not an ir_datasets location (irds:<id>, e.g. irds:beir/scifact/test)")
    dataset_id = str(location)[len(IRDS_PREFIX):].strip("/")
    try:
        import ir_datasets
    except ImportError:
        raise ImportError(f"data.dataset {location}: irds: ids need the ir_datasets library "
                          "(pip install 'lexray[irds]')") from None

    try:
        ds = ir_datasets.load(dataset_id)
    except KeyError:
        raise IrdsError(f"data.dataset {location}: ir_datasets has no dataset {dataset_id!r} (ids: "
                        "https://ir-datasets.com, or ir_datasets.registry)") from None
    if not ds.has_docs():
        raise IrdsError(f"data.dataset {location}: {dataset_id!r} has no documents; give an id with documents, "
                        "queries and qrels (e.g. irds:beir/scifact/test)")
    folder = ir_datasets.util.home_path() / "lexray-beir" / dataset_id.replace("/", "__")
    return publish_folder(folder, lambda work: _export(ds, dataset_id, work), EXPORT_FILE)


def _export(ds, dataset_id: str, work: Path) -> None:
    """Write the dataset's documents, queries and qrels into ``work`` in BEIR layout, ``export.json`` last."""
    from tqdm.auto import tqdm

    counts = {"docs": 0, "queries": 0, "qrels": 0}
    with open(work / "corpus.jsonl", "w", encoding="utf-8") as f:
        for doc in tqdm(ds.docs_iter(), total=ds.docs_count(), unit="doc", desc=f"export {dataset_id}"):
            rec = {"_id": doc.doc_id, "title": getattr(doc, "title", "") or "",
                   "text": doc.text if hasattr(doc, "text") else doc.default_text()}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            counts["docs"] += 1
    if ds.has_queries():
        with open(work / "queries.jsonl", "w", encoding="utf-8") as f:
            for q in ds.queries_iter():
                text = q.text if hasattr(q, "text") else q.default_text()
                f.write(json.dumps({"_id": q.query_id, "text": text}, ensure_ascii=False) + "\n")
                counts["queries"] += 1
    split = irds_split(dataset_id)
    if ds.has_qrels():
        (work / "qrels").mkdir()
        with open(work / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for qr in ds.qrels_iter():
                f.write(f"{qr.query_id}\t{qr.doc_id}\t{int(qr.relevance)}\n")
                counts["qrels"] += 1
    log.info("exported %s: %s", dataset_id, counts)
    (work / EXPORT_FILE).write_text(json.dumps({"id": dataset_id, "split": split, **counts}, indent=2) + "\n")
