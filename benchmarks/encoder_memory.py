"""Peak extra RSS of one encode step: textbook full-logits SPLADE vs lexray's chunked, pool-before-activation path.

Each configuration runs in a fresh subprocess (ru_maxrss is a high-water mark). Writes JSON with the baseline
(full (B, L, |V|) logits → ReLU → log1p → mask → max) and each chunk size, so the ratio is measured in one run.

    .venv/bin/python benchmarks/encoder_memory.py --out outputs/benchmarks/encoder_memory.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, resource, sys, torch
from lexray.models import SparseEncoder
mode, chunk, model, B, L = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
enc = SparseEncoder.from_pretrained(model, chunk_size=chunk, doc_max_length=L)
batch = enc.tokenize(["word " * (L + 10)] * B)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.inference_mode():
    if mode == "full":
        logits = enc.backbone(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        r = torch.log1p(torch.relu(logits)).masked_fill(~batch["pool_mask"].unsqueeze(-1), 0).amax(1)
    else:
        r = enc(**batch)
print(json.dumps({"extra_peak_MB": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024}))
"""


def main() -> None:
    from lexray.paths import shared_path

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(shared_path("models", "splade-tiny")))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--out", type=Path, default=Path("outputs/benchmarks/encoder_memory.json"))
    args = ap.parse_args()
    results = []
    for mode, chunk in [("full", args.batch), ("chunked", 16), ("chunked", 8), ("chunked", 4)]:
        out = subprocess.run([sys.executable, "-c", CHILD, mode, str(chunk), args.model, str(args.batch),
                              str(args.length)], capture_output=True, text=True, check=True).stdout
        row = {"mode": mode, "chunk_size": chunk, **json.loads(out.strip().splitlines()[-1])}
        results.append(row)
        print(row)
    base = results[0]["extra_peak_MB"]
    for r in results:
        r["ratio_vs_full"] = r["extra_peak_MB"] / base
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"batch": args.batch, "length": args.length, "model": args.model,
                                    "results": results}, indent=2))


if __name__ == "__main__":
    main()
