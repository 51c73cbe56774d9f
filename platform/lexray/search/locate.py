"""What a folder given to ``lexray search`` / :func:`lexray.open_index` is, and what it records.

Accepted layouts (checked in this order):

* a **collection store** (``lexray reencode``): ``STORE/current`` is resolved once
  (:func:`lexray.store.resolve_current`); the version's ``index/`` is searched, and its ``config.resolved.yaml``
  (written by the version since issue 27) names the model and the corpus;
* an **evaluated output folder** (``lexray evaluate --out DIR``, or one of a training job's ``eval/<name>/``):
  ``DIR/index/`` with ``DIR/config.resolved.yaml`` (``model`` = the encoder evaluate used for the queries,
  ``data.dataset`` = the corpus) and ``DIR/lucene/`` when evaluate ran the Lucene backend;
* a **training job's output** (``outputs/laconic-smollm2-cpu``): its ``eval/trained/`` (else its only ``eval/*``
  folder) as above;
* a **bare index folder** (``lexray index``): ``stats.json`` names the shards folder, whose ``manifest.json``
  records the model and the corpus; an index that is the ``index/`` of an evaluated folder is that folder;
  a **pruned index** (``lexray prune``: ``stats.json`` ``prune.source_index``) records what its source records
  (model, corpus, configuration), never the source's Lucene index (that one is of the unpruned postings).

An evaluate run over several collections (``DIR/<collection>/``) is refused with the folders to choose from.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lexray.config import LexrayConfig, ModelConfig

__all__ = ["IndexLocation", "locate_index"]

CONFIG_FILE = "config.resolved.yaml"


@dataclass(frozen=True)
class IndexLocation:
    """Where an index is and what made it.

    index_dir: the index folder (``stats.json``, postings); kind: the layout found; folder: the folder the
    location was read from (the version folder of a store); model: the recorded encoder (None: nothing recorded,
    the caller must name one); dataset: the recorded BEIR folder (None: no fields can be shown); config: the whole
    recorded configuration (None for a bare index); lucene_dir: a Lucene impact index of the same shards, if any.
    """

    index_dir: Path
    kind: Literal["store", "evaluate", "training", "index"]
    folder: Path
    model: ModelConfig | None
    dataset: str | None
    config: LexrayConfig | None = None
    lucene_dir: Path | None = None


def _read_config(path: Path) -> LexrayConfig:
    from lexray.config import load_config

    return load_config(path, require_model=False)


def _has_model(m: ModelConfig) -> bool:
    return m.name_or_path is not None or m.random_init is not None


def _evaluated(folder: Path, kind: Literal["store", "evaluate", "training"]) -> IndexLocation:
    cfg_path = folder / CONFIG_FILE
    cfg = _read_config(cfg_path) if cfg_path.is_file() else None
    lucene = folder / "lucene"
    return IndexLocation(index_dir=folder / "index", kind=kind, folder=folder,
                         model=cfg.model if cfg is not None and _has_model(cfg.model) else None,
                         dataset=cfg.data.dataset if cfg is not None else None, config=cfg,
                         lucene_dir=lucene if lucene.is_dir() else None)


def _bare_index(index: Path) -> IndexLocation:
    if index.name == "index" and (index.parent / CONFIG_FILE).is_file():
        return _evaluated(index.parent, "evaluate")
    stats = json.loads((index / "stats.json").read_text())
    source = (stats.get("prune") or {}).get("source_index")
    if isinstance(source, str) and Path(source).resolve() != index.resolve() and (Path(source) / "stats.json").is_file():
        src = locate_index(source)
        return IndexLocation(index_dir=index, kind="index", folder=index, model=src.model, dataset=src.dataset,
                             config=src.config)
    model, dataset = None, None
    # build_index records its input under settings.shards_dir: the shard folder or its manifest.json
    shards = (stats.get("settings") or {}).get("shards_dir")
    manifest = None
    if isinstance(shards, str):
        manifest = Path(shards) if Path(shards).name == "manifest.json" else Path(shards) / "manifest.json"
    if manifest is not None and manifest.is_file():
        man = json.loads(manifest.read_text())
        rec = (man.get("model") or {}).get("config") or {}
        if rec:
            model = ModelConfig.model_validate(rec)
            model = model if _has_model(model) else None
        dataset = (man.get("dataset") or {}).get("path")
    return IndexLocation(index_dir=index, kind="index", folder=index, model=model, dataset=dataset)


def locate_index(path: str | os.PathLike) -> IndexLocation:
    """Find the index under ``path`` and what it records (module docstring for the layouts).

    Raises:
        FileNotFoundError: ``path`` does not exist, or holds none of the layouts (the message lists them), or a
            store has no published version.
        ValueError: ``path`` holds several evaluated collections or training evaluations (the message lists the
            folders to choose from).
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"--index {p}: no such folder")
    if (p / "current").is_symlink() or (p / "current").exists():
        from lexray.store import resolve_current

        version = resolve_current(p)
        return _evaluated(version, "store")
    if (p / "index" / "stats.json").is_file():
        return _evaluated(p, "evaluate")
    if (p / "stats.json").is_file():
        return _bare_index(p)
    evals = sorted(d for d in (p / "eval").glob("*") if (d / "index" / "stats.json").is_file()) \
        if (p / "eval").is_dir() else []
    if evals:
        chosen = next((d for d in evals if d.name == "trained"), evals[0] if len(evals) == 1 else None)
        if chosen is None:
            raise ValueError(f"--index {p}: several evaluations ({', '.join(str(d) for d in evals)}); give one")
        return _evaluated(chosen, "training")
    several = sorted(d for d in p.glob("*") if (d / "index" / "stats.json").is_file())
    if several:
        raise ValueError(f"--index {p}: an evaluation of several collections; give one of "
                         f"{', '.join(str(d) for d in several)}")
    raise FileNotFoundError(
        f"--index {p}: no index found. Expected an evaluated output folder (index/ + {CONFIG_FILE}: lexray evaluate "
        f"--out, or a training job's output with eval/trained/), a collection store (current -> versions/...) or "
        f"an index folder (stats.json: lexray index)")
