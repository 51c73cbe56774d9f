"""``lexray migrate-vocab``: Vocabulary Transfer (VT, arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt
§4.2) — migrate a pretrained model (``model``, the source) to a target vocabulary (``vt``), then save it as a normal
lexray encoder that ``lexray train-splade`` and ``lexray evaluate`` take as ``model.name_or_path``
(docs/vocab-transfer.md).

    lexray migrate-vocab --config jobs/configs/vt-smollm2-scifact.yaml
    lexray migrate-vocab --config jobs/configs/vt-smollm2-scifact.yaml --set vt.init=subtoken \\
        --set vt.adapt.enabled=false --set out_dir=outputs/vt-subtoken-direct

Writes into ``out_dir`` (default ``outputs/<name>``): ``vt_report.json`` (alignment, initialization, head, PDA,
MLM-head norms, APC, timings), ``init/`` (after initialization), ``train/`` (the Ray Train adaptation run;
re-running resumes it), ``model/`` (the migrated encoder) and ``config.resolved.yaml``.
"""

from __future__ import annotations

import argparse
import json
import os

from lexray.commands.common import setup_logging
from lexray.config import add_config_args, load_config, save_config
from lexray.paths import REPO_ROOT, default_output_dir

DEFAULT_RECIPE = REPO_ROOT / "jobs" / "configs" / "vt-smollm2-scifact.yaml"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray migrate-vocab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(ap)
    ap.add_argument("--local", action="store_true", help="run the adaptation in this process instead of Ray Train")
    return ap


def main(argv: list[str] | None = None) -> dict:
    """Migrate the recipe's model (default recipe vt-smollm2-scifact); returns the VT report
    (:func:`lexray.vocab.migrate.migrate`). A bad recipe or ``--set`` raises ConfigError before any work."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    setup_logging()
    cfg = load_config(args.config or DEFAULT_RECIPE, args.overrides)
    from lexray.vocab.migrate import migrate  # torch: after the recipe is known to be valid

    out = (default_output_dir() / cfg.name) if not cfg.out_dir else cfg.out_dir
    save_config(cfg, out)
    report = migrate(cfg, out, local=args.local)
    a = report["alignment"]
    print(json.dumps({"overlap": a["overlap"], "new": a["new"], "overlap_fraction": round(a["overlap_fraction"], 4),
                      "init": report["init"], "apc": report["apc"], "timings_s": report["timings_s"]}, indent=1))
    print(f"migrated encoder: {report['model_dir']}  (use --set model.name_or_path={report['model_dir']})")
    return report
