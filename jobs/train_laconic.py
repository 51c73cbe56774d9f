"""LACONIC (arXiv:2601.01684, ../shared/papers/laconic.txt §2): a decoder LLM made bidirectional, trained as a SPLADE
encoder with the two-phase curriculum — weakly supervised pre-finetuning with in-batch negatives, then
hard-negative finetuning (LoRA merged between phases) — then encoded, indexed and evaluated, beside the untrained
backbone's zero-shot score (``--no-zero-shot`` skips it; it is cached across runs, ``--no-cache`` evaluates it
again: docs/operations.md).

    python jobs/train_laconic.py                # embedded CPU default: SmolLM2-135M (jobs/configs/laconic-smollm2-cpu.yaml)
    python jobs/train_laconic.py --config jobs/configs/laconic-tiny.yaml   # the 7-minute random-init pipeline check
    python jobs/train_laconic.py --config jobs/configs/laconic-1b.yaml
    ray job submit --working-dir . -- python jobs/train_laconic.py

The same as ``lexray train-laconic`` (lexray.commands.train).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
