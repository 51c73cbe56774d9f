"""Vocabulary Transfer (VT, arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt): migrate a pretrained model to a
sparse-friendly target vocabulary. One concern per module: ``alignment`` (O and N′ across tokenizer conventions),
``sparsemax``, ``init`` (Semantic-Init eq. 7–9 and the ablation baselines), ``head`` (tied/untied heads, PDA
eq. 10), ``masking`` (Overlap-Aware Masking Curriculum), ``adapt`` (embedding-only MLM on Ray Train), ``apc``
(Activation Potential Calibration) and ``migrate`` (the pipeline behind ``jobs/migrate_vocab.py``)."""
