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

import json

from lexray.commands.common import recipe_run
from lexray.paths import REPO_ROOT

DEFAULT_RECIPE = REPO_ROOT / "jobs" / "configs" / "vt-smollm2-scifact.yaml"


def main(argv: list[str] | None = None) -> dict:
    """Migrate the recipe's model (default recipe vt-smollm2-scifact); returns the VT report
    (:func:`lexray.vocab.migrate.migrate`). A bad recipe or ``--set`` raises ConfigError before any work."""
    args, cfg, out = recipe_run(argv, "lexray migrate-vocab", __doc__, DEFAULT_RECIPE,
                                "run the adaptation in this process instead of Ray Train")
    from lexray.vocab.migrate import migrate  # torch: after the recipe is known to be valid

    report = migrate(cfg, out, local=args.local)
    a = report["alignment"]
    print(json.dumps({"overlap": a["overlap"], "new": a["new"], "overlap_fraction": round(a["overlap_fraction"], 4),
                      "init": report["init"], "apc": report["apc"], "timings_s": report["timings_s"]}, indent=1))
    print(f"migrated encoder: {report['model_dir']}  (use --set model.name_or_path={report['model_dir']})")
    return report
