"""Vocabulary Transfer (VT, arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt §4.2): migrate a
pretrained model (``model``, the source) to a target vocabulary (``vt``), then save it as a normal lexray encoder
that jobs/train_splade.py and jobs/evaluate.py take as ``model.name_or_path`` (docs/vocab-transfer.md).

    python jobs/migrate_vocab.py --config jobs/configs/vt-smollm2-scifact.yaml
    python jobs/migrate_vocab.py --config jobs/configs/vt-smollm2-scifact.yaml --set vt.init=subtoken \\
        --set vt.adapt.enabled=false --set out_dir=outputs/vt-subtoken-direct

Writes into ``out_dir`` (default ``outputs/<name>``): ``vt_report.json`` (alignment, initialization, head, PDA,
MLM-head norms, APC, timings), ``init/`` (after initialization), ``train/`` (the Ray Train adaptation run;
re-running resumes it), ``model/`` (the migrated encoder) and ``config.resolved.yaml``.

The same as ``lexray migrate-vocab`` (lexray.commands.migrate_vocab).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
