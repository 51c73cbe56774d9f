"""Shared pieces of the commands: logging set-up, early validation, the closing lines every job prints."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeVar

R = TypeVar("R")


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")


def select_rows(ap: argparse.ArgumentParser, rows: Sequence[R], spec: str | None) -> list[R]:
    """The rows an ablation command's ``--rows a,b,c`` names, in the order given (all of ``rows`` when ``spec`` is
    empty). Each row has a ``name``. An unknown name is a usage error (``ap.error``: exit status 2) that names
    every unknown one and lists the known rows."""
    if not spec:
        return list(rows)
    known = {r.name: r for r in rows}
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if unknown := [n for n in names if n not in known]:
        ap.error(f"--rows: unknown row(s) {', '.join(unknown)}; rows: {', '.join(known)}")
    return [known[n] for n in names]


def validate_metrics(names: Iterable[str]) -> None:
    """Raise ValueError naming the first metric lexray cannot compute (before any encoding)."""
    from lexray.eval.metrics import parse_metric

    names = list(names)
    if not names:
        raise ValueError("eval.metrics is empty")
    for m in names:
        parse_metric(m)  # raises ValueError with the accepted spellings


def validate_dataset(dataset: str, split: str | None = None) -> Path:
    """Resolve a BEIR folder and check corpus.jsonl, queries.jsonl and qrels/<split>.tsv exist."""
    from lexray.data import beir

    path = beir.resolve_dataset_dir(dataset)
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (path / name).is_file():
            raise FileNotFoundError(f"dataset {dataset}: {path / name} not found (BEIR layout expected)")
    if split is not None and not (path / "qrels" / f"{split}.tsv").is_file():
        have = beir.available_splits(path)
        raise FileNotFoundError(f"dataset {dataset}: no qrels/{split}.tsv (splits: {', '.join(have) or 'none'})")
    return path


def validate_model(model_cfg) -> None:
    """Check the model can be loaded (configuration and tokenizer, not the weights) before any encoding. A ``.gguf``
    source (the LACONIC recipes' SmolLM2) is checked through its converted folder, converting it first if needed.

    Raises:
        lexray.config.ConfigError: no model is named (``model.name_or_path``);
        FileNotFoundError / OSError / ValueError naming the location.
    """
    if model_cfg.require_source().random_init is not None:
        return
    from transformers import AutoConfig, AutoTokenizer

    from lexray.models import st_compat
    from lexray.models.backbones import resolve_model_dir

    where = model_cfg.name_or_path
    local = resolve_model_dir(str(where))  # a .gguf file: its converted folder (converted once, cached), as training
    if local is None and ("/" not in str(where) or str(where).startswith((".", "/", "~"))):
        raise FileNotFoundError(f"model {where}: no such folder (and not a hub id)")
    target = str(local or where)
    if local is not None and st_compat.is_st_folder(local) and not (local / "lexray_encoder.json").is_file():
        target = str(st_compat.read_st_folder(local)[0])
    try:
        AutoConfig.from_pretrained(target, trust_remote_code=model_cfg.trust_remote_code)
        AutoTokenizer.from_pretrained(target, trust_remote_code=model_cfg.trust_remote_code)
    except Exception as e:  # noqa: BLE001 - re-raised with the location
        raise ValueError(f"model {where} cannot be loaded: {' '.join(str(e).split())[:300]}") from None


def print_outputs(out_dir: str | os.PathLike, metrics_json: str | os.PathLike | None = None) -> None:
    """The closing lines: output folder, metrics.json, and the Ray dashboard: its URL when it outlives the job
    (an attached cluster), else that it stops with the job (:func:`lexray.ray_utils.dashboard_closing_line`)."""
    from lexray.ray_utils import dashboard_closing_line

    print(f"output folder: {Path(out_dir).resolve()}")
    if metrics_json is not None:
        print(f"metrics:       {Path(metrics_json).resolve()}")
    line = dashboard_closing_line()
    if line:
        print(line)


def recipe_run(argv: list[str] | None, prog: str, description: str | None, default_recipe: os.PathLike,
               local_help: str):
    """The start every recipe-driven pipeline command shares (``migrate-vocab``, ``adapt-domain``): parse
    ``--config`` / ``--set`` / ``--local``, load and validate the recipe (``default_recipe`` without
    ``--config``), and save ``config.resolved.yaml`` into its output folder (``out_dir``, else
    ``outputs/<name>``). Returns ``(args, cfg, out)``.

    Raises:
        lexray.config.ConfigError: a bad recipe or ``--set`` (before any work); SystemExit: bad flags.
    """
    import argparse

    from lexray.config import add_config_args, load_config, save_config
    from lexray.paths import default_output_dir

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    ap = argparse.ArgumentParser(prog=prog, description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(ap)
    ap.add_argument("--local", action="store_true", help=local_help)
    args = ap.parse_args(argv)
    setup_logging()
    cfg = load_config(args.config or default_recipe, args.overrides)
    out = (default_output_dir() / cfg.name) if not cfg.out_dir else cfg.out_dir
    save_config(cfg, out)
    return args, cfg, out
