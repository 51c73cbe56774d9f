"""Vocabulary Transfer (VT): migrate a pretrained model (``model``, the source) to a target vocabulary (``vt``),
then save it as a normal lexray encoder that jobs/train_splade.py and jobs/evaluate.py take as
``model.name_or_path`` (../shared/papers/vocabulary-transfer-vt.txt §4.2; docs/vocab-transfer.md).

    python jobs/migrate_vocab.py --config jobs/configs/vt-smollm2-scifact.yaml
    python jobs/migrate_vocab.py --config jobs/configs/vt-smollm2-scifact.yaml --set vt.init=subtoken \\
        --set vt.adapt.enabled=false --set out_dir=outputs/vt-subtoken-direct

Writes into ``out_dir`` (default ``outputs/<name>``): ``vt_report.json`` (alignment, initialization, head, PDA,
MLM-head norms, APC, timings), ``init/`` (after initialization), ``train/`` (the Ray Train adaptation run;
re-running resumes it), ``model/`` (the migrated encoder) and ``config.resolved.yaml``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from lexray.config import add_config_args, load_config, save_config  # noqa: E402
from lexray.paths import REPO_ROOT, default_output_dir  # noqa: E402
from lexray.vocab.migrate import migrate  # noqa: E402

DEFAULT_RECIPE = REPO_ROOT / "jobs" / "configs" / "vt-smollm2-scifact.yaml"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(ap)
    ap.add_argument("--local", action="store_true", help="run the adaptation in this process instead of Ray Train")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = load_config(args.config or DEFAULT_RECIPE, args.overrides)
    out = (default_output_dir() / cfg.name) if not cfg.out_dir else cfg.out_dir
    save_config(cfg, out)
    report = migrate(cfg, out, local=args.local)
    a = report["alignment"]
    print(json.dumps({"overlap": a["overlap"], "new": a["new"], "overlap_fraction": round(a["overlap_fraction"], 4),
                      "init": report["init"], "apc": report["apc"], "timings_s": report["timings_s"]}, indent=1))
    print(f"migrated encoder: {report['model_dir']}  (use --set model.name_or_path={report['model_dir']})")
    return report


if __name__ == "__main__":
    main()
