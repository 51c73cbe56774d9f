"""Fine-tune a dense bi-encoder with a LexSemBridge (arXiv:2508.17858; SLR / LLR / CLR, or none) on Ray Train with
cosine InfoNCE (τ = 0.02, in-batch + BM25 hard negatives), and report zero-shot and fine-tuned scores side by side.

    python jobs/train_dense.py                           # splade-tiny's BERT as a dense encoder, SciFact, no bridge
    python jobs/train_dense.py --bridge clr
    python jobs/train_dense.py --bridge llr --set model.dense.llr_form=token_weight

The same as ``lexray train-dense`` (lexray.commands.train_dense; docs/lexsembridge.md).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
