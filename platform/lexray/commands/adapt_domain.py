"""``lexray adapt-domain``: CAI's AdaLM step (arXiv:2211.03988,
../shared/papers/cai-vocabulary-idf-domain-adaptation.txt §3.2.1) — vocabulary expansion on a domain corpus
(Algorithm 1), then continual MLM pre-training on it, on Ray Train (docs/cai.md).

    lexray adapt-domain                                            # splade-tiny on the SciFact corpus
    lexray adapt-domain --set cai.corpus=my_corpus.jsonl --set cai.text_field=body
    lexray adapt-domain --set cai.mlm.enabled=false                # vocabulary expansion only

Writes into ``out_dir`` (default ``outputs/<name>``): ``adapt_report.json`` (|V0|, |V_final|, the added tokens
with their corpus counts, the iterations, the MLM loss curve, timings), ``expanded/``, ``train/`` (the Ray Train
run; re-running resumes it), ``model/`` (the adapted model) and ``config.resolved.yaml``. Refused before any work:
an unknown key, ΔV ≤ 0 (``cai.expand.delta_v``), an empty corpus (``cai.corpus``), a model without an MLM head
(``model.name_or_path``).
"""

from __future__ import annotations

import json

from lexray.commands.common import print_outputs, recipe_run
from lexray.paths import REPO_ROOT

DEFAULT_RECIPE = REPO_ROOT / "jobs" / "configs" / "cai-splade-tiny-scifact.yaml"


def main(argv: list[str] | None = None) -> dict:
    """Adapt the recipe's model (default recipe cai-splade-tiny-scifact); returns the report
    (:func:`lexray.vocab.domain.adapt_domain`). A bad recipe or ``--set`` raises ConfigError before any work."""
    args, cfg, out = recipe_run(argv, "lexray adapt-domain", __doc__, DEFAULT_RECIPE,
                                "run the MLM phase in this process instead of Ray Train")
    from lexray.vocab.domain import adapt_domain  # torch: after the recipe is known to be valid

    report = adapt_domain(cfg, out, local=args.local)
    added = report["added"]
    loss = report["mlm_loss"]
    print(json.dumps({"documents": report["documents"], "v0": report["v0"], "v_final": report["v_final"],
                      "added": len(added), "iterations": len(report["iterations"]),
                      "stopped_by": report.get("stopped_by"),
                      "most_frequent_added": [[a["token"], a["count"]] for a in added[:15]],
                      "mlm_loss_first_last": [loss[0]["loss"], loss[-1]["loss"]] if loss else None,
                      "timings_s": {k: round(v, 1) for k, v in report["timings_s"].items()}}, indent=1,
                     ensure_ascii=False))
    print(f"adapted model: {report['model_dir']}  (use --set model.name_or_path={report['model_dir']})")
    print_outputs(out)
    return report
