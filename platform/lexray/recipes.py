"""Recipe files and overrides: YAML with ``include:``, dotted ``--set key=value`` overrides, the resolved file.

Why apart from :mod:`lexray.config`: this is the text side of configuration (files, command-line strings, error
messages naming them); :mod:`lexray.config` is the typed schema that validates the result. Recipes may
``include:`` other recipes (paths relative to the including file); later keys win, then ``--set`` overrides win.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

__all__ = ["ConfigError", "add_config_args", "deep_merge", "format_errors", "parse_overrides", "read_yaml",
           "save_config", "set_dotted"]


class ConfigError(ValueError):
    """A recipe or override is invalid; the message names the file and the dotted key."""


def deep_merge(base: dict, over: dict) -> dict:
    """``base`` with ``over`` merged in: nested mappings merge key by key, anything else in ``over`` wins."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a recipe, resolving ``include:`` (a path or list of paths relative to this file)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: recipe not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    includes = data.pop("include", None) or []
    if isinstance(includes, str):
        includes = [includes]
    merged: dict[str, Any] = {}
    for inc in includes:
        merged = deep_merge(merged, read_yaml(path.parent / inc))
    return deep_merge(merged, data)


def set_dotted(d: dict, dotted: str, value: Any, source: str) -> None:
    """Set ``d[k1][k2]...`` for ``dotted`` = ``"k1.k2..."`` (integer parts index lists), creating sections.

    Raises:
        ConfigError: a part goes through a non-section, or a list index is invalid (``source`` names the origin).
    """
    keys = dotted.split(".")
    cur = d
    for k in keys[:-1]:
        if isinstance(cur, list):
            try:
                cur = cur[int(k)]
            except (ValueError, IndexError):
                raise ConfigError(f"{source}: '{dotted}': '{k}' is not a valid list index") from None
            continue
        nxt = cur.setdefault(k, {})
        if nxt is None:  # an optional section that is off (model.dense, model.random_init): --set turns it on
            nxt = cur[k] = {}
        if not isinstance(nxt, dict | list):
            raise ConfigError(f"{source}: '{dotted}': '{k}' is not a section")
        cur = nxt
    last = keys[-1]
    if isinstance(cur, list):
        try:
            cur[int(last)] = value
        except (ValueError, IndexError):
            raise ConfigError(f"{source}: '{dotted}': '{last}' is not a valid list index") from None
    else:
        cur[last] = value


def parse_overrides(overrides: list[str] | None) -> list[tuple[str, Any]]:
    """Parse ``key.sub=value`` strings; values are YAML scalars/lists (``1e-4``, ``true``, ``[a, b]``)."""
    out = []
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            value = raw
        out.append((key.strip(), value))
    return out


def format_errors(err: ValidationError, source: str) -> str:
    """A pydantic validation error as lines naming ``source`` and each dotted key ("unknown key" for extras)."""
    lines = [f"{source}: invalid configuration:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"  {loc}: {msg} (got {e.get('input')!r})" if e["type"] != "missing" else f"  {loc}: {msg}")
    return "\n".join(lines)


def save_config(cfg: BaseModel, out_dir: str | Path, name: str = "config.resolved.yaml") -> Path:
    """Write the resolved configuration beside an output (YAML); returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    return path


def add_config_args(parser) -> None:
    """Add the standard ``--config`` and ``--set`` arguments to an argparse parser."""
    parser.add_argument("--config", type=Path, default=None, help="YAML recipe (jobs/configs/*.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set train.phases.0.lr=1e-4 (repeatable)")
