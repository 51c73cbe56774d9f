"""``lexray model-card``: rewrite a saved model's README.md card for the Hugging Face Hub, optionally push it.

    lexray model-card --model outputs/<job>/train/<job>/checkpoint_*/model [--out /tmp/card] \\
        [--metrics outputs/<job>/eval/trained/metrics.json] [--license apache-2.0] [--name my-model]
    lexray model-card --model DIR --push-to-hub my-org/my-model [--private]
    lexray model-card --model DIR --push-to-hub my-org/my-model --hub-dir /tmp/hub    # dry run, local folder

The card is rendered from what the model folder records (``lexray_card.json``: base model, recipe, metrics;
``config.json``): ``base_model`` becomes the upstream Hub id, datasets become Hub dataset ids, the evaluation goes
into the ``model-index`` metadata (docs/models.md, "Model cards"). ``--out`` writes README.md and
lexray_card.json there instead of into the model folder. ``--push-to-hub`` uploads the model folder with the new
card as one commit (huggingface_hub; token from ``huggingface-cli login`` or HF_TOKEN); with ``--hub-dir`` the
same commit is written into ``DIR/<org>/<name>/`` instead of the Hub.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lexray.commands.common import setup_logging


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray model-card", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a lexray model folder")
    ap.add_argument("--out", help="write README.md + lexray_card.json here (default: the model folder)")
    ap.add_argument("--metrics", action="append", default=[], metavar="METRICS_JSON",
                    help="add the records of an evaluation's metrics.json (repeatable)")
    ap.add_argument("--name", help="model name (the card's title and model-index name)")
    ap.add_argument("--license", help="licence id for the card (default: the base model's recorded licence)")
    ap.add_argument("--push-to-hub", metavar="REPO_ID", help="upload the folder with the new card (org/name)")
    ap.add_argument("--private", action="store_true", help="with --push-to-hub: create a private repository")
    ap.add_argument("--hub-dir", help="with --push-to-hub: write the commit into this local folder instead")
    return ap


def main(argv: list[str] | None = None) -> dict:
    """Write the card (and push it); returns ``{"card": path, "pushed": url or None}``. A missing folder, a bad
    metrics file or a malformed repository id fail before anything is written."""
    args = build_parser().parse_args(argv)
    setup_logging()
    from lexray.models.card import regenerate_card
    from lexray.models.hub import LocalHub, is_hub_id, push_to_hub

    model = Path(args.model)
    if not model.is_dir():
        raise FileNotFoundError(f"--model {model}: no such folder")
    if args.push_to_hub and not is_hub_id(args.push_to_hub):
        raise ValueError(f"--push-to-hub {args.push_to_hub!r}: a Hub repository id is 'org/name'")
    if args.hub_dir and not args.push_to_hub:
        raise ValueError("--hub-dir is the local target of --push-to-hub; give --push-to-hub REPO_ID too")
    records = []
    for path in args.metrics:
        try:
            rec = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"--metrics {path}: {e}") from None
        records += rec if isinstance(rec, list) else [rec]
    card = regenerate_card(model, args.out, metrics=records, name=args.name, license=args.license)
    print(f"model card: {card}")
    url = None
    if args.push_to_hub:
        api = LocalHub(args.hub_dir) if args.hub_dir else None
        url = push_to_hub(model, args.push_to_hub, api=api, private=args.private, card_dir=card.parent)
        print(f"pushed {model} -> {args.push_to_hub}: {url}")
    return {"card": str(card), "pushed": url}
