"""The VT migration end to end (Vocabulary Transfer, arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt
§4.2): align → initialize E′, head and bias → (adapt) → APC → a normal lexray encoder folder over the target
tokenizer, plus ``vt_report.json``.

Used by ``lexray migrate-vocab`` (:mod:`lexray.commands.migrate_vocab`, ``jobs/migrate_vocab.py``); each step is
its own module (alignment, sparsemax, init, head, masking, adapt, apc). The migrated folder loads with
:meth:`lexray.models.SparseEncoder.from_pretrained` and trains / evaluates with the other commands
(``model.name_or_path=<out>/model``).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from lexray.models.head import mlm_head_norm

log = logging.getLogger(__name__)

REPORT_FILE = "vt_report.json"
ALIGNMENT_FILE = "vt_alignment.json"


def _load_target_tensors(vt):
    """Ẽ (|V′|, d̃) and b_tgt (|V′|,) from ``vt.target_table`` / ``vt.target_bias`` (None where unset)."""
    from lexray.models.backbones import load_backbone
    from lexray.models.head import output_bias

    cache: dict[str, object] = {}

    def model(loc):
        if loc not in cache:
            cache[loc] = load_backbone(loc)[0]
        return cache[loc]

    table = model(vt.target_table).get_input_embeddings().weight.detach().float() if vt.target_table else None
    bias = None
    if vt.target_bias and vt.pda:
        b = output_bias(model(vt.target_bias))
        if b is None:
            raise ValueError(f"vt.target_bias: {vt.target_bias} has no output bias for PDA")
        bias = b.detach().float()
    return table, bias


def build_migrated_encoder(cfg, report: dict):
    """Source encoder (``cfg.model``, without APC and rescale) → migrated :class:`SparseEncoder` (not adapted, no
    APC). Fills ``report`` (alignment, init, head, norms, timings)."""
    from transformers import AutoTokenizer

    from lexray.models import SparseEncoder, load_encoder
    from lexray.models.settings import EncoderSettings
    from lexray.paths import resolve_local
    from lexray.vocab.alignment import align_vocabularies
    from lexray.vocab.head import migrate_backbone
    from lexray.vocab.init import init_embeddings

    vt = cfg.vt
    src_cfg = cfg.model.model_copy(update={"mlm_head_rescale": 1.0, "apc": type(cfg.model.apc)()})
    src = load_encoder(src_cfg)
    report["source"] = {"model": cfg.model.name_or_path or "random_init", "kind": src.settings.kind,
                        "vocab_size": src.vocab_size, "head_norm": mlm_head_norm(src.backbone)}
    loc = resolve_local(vt.target_tokenizer)
    tgt_tok = AutoTokenizer.from_pretrained(str(loc) if loc is not None else vt.target_tokenizer)
    t0 = time.perf_counter()
    al = align_vocabularies(src.tokenizer, tgt_tok)
    report["alignment"] = al.report()
    report["timings_s"] = {"alignment": time.perf_counter() - t0}
    table, b_tgt = _load_target_tensors(vt)
    t0 = time.perf_counter()
    init = init_embeddings(src.backbone.get_input_embeddings().weight, al, vt.init, target_table=table,
                           source_tokenizer=src.tokenizer, top_k=vt.top_k, seed=vt.seed)
    report["timings_s"]["init"] = time.perf_counter() - t0
    report["init"] = init.stats
    backbone = src.backbone
    report["head"] = migrate_backbone(backbone, init, b_tgt=b_tgt, use_pda=vt.pda, pda_scale=vt.pda_scale,
                                      seed=vt.seed)
    for attr, tok_attr in (("pad_token_id", "pad_token_id"), ("bos_token_id", "cls_token_id"),
                           ("eos_token_id", "sep_token_id")):
        val = getattr(tgt_tok, tok_attr, None)
        for c in (backbone.config, getattr(backbone, "generation_config", None)):
            if c is not None and hasattr(c, attr):
                setattr(c, attr, val)
    settings = EncoderSettings(**{**src.settings.model_dump(), "query_idf": None})
    enc = SparseEncoder(backbone, tgt_tok, settings)
    alpha = cfg.model.mlm_head_rescale
    norm = mlm_head_norm(backbone)
    report["migrated"] = {"vocab_size": enc.vocab_size, "head_norm": norm, "mlm_head_rescale": alpha,
                          "head_mean_row_norm_after_rescale": norm["mean_row_norm"] / alpha}
    return enc, al


def save_stage(enc, al, directory: Path) -> Path:
    """Save an encoder plus the alignment the adaptation needs (``vt_alignment.json``: is_new per target id)."""
    enc.save_pretrained(directory)
    (directory / ALIGNMENT_FILE).write_text(json.dumps({"is_new": (al.source_of < 0).astype(int).tolist(),
                                                        "source_of": al.source_of.tolist()}))
    return directory


def migrate(cfg, out_dir: str | Path, local: bool = False) -> dict:
    """Run the whole migration into ``out_dir``; returns the report (also written to ``out_dir/vt_report.json``).

    Folders: ``init/`` (after initialization), ``train/`` (the Ray Train adaptation run, resumable), ``model/``
    (the final encoder: adapted if ``vt.adapt.enabled``, then APC if ``vt.apc`` is set). ``local=True`` runs the
    adaptation in-process instead of on Ray (tests).
    """
    from lexray.models import SparseEncoder
    from lexray.vocab.adapt import adapt_local, run_adaptation
    from lexray.vocab.apc import apply_apc

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"paper": "vocabulary-transfer-vt.txt §4.2", "config": cfg.vt.model_dump(mode="json")}
    enc, al = build_migrated_encoder(cfg, report)
    init_dir = save_stage(enc, al, out / "init")
    del enc
    cur = init_dir
    if cfg.vt.adapt.enabled:
        t0 = time.perf_counter()
        cur = adapt_local(cfg, init_dir, out / "train" / "local") if local else run_adaptation(
            cfg, init_dir, out / "train")
        report["timings_s"]["adapt"] = time.perf_counter() - t0
    final = SparseEncoder.from_pretrained(cur, dtype=cfg.model.dtype)
    report["apc"] = apply_apc(final, cfg.vt.apc)
    if cfg.vt.apc.enabled and cfg.vt.apc.target_rate is None:  # report the rate a given c gives
        from lexray.vocab.apc import activation_rate, max_logits, probe_texts

        m = max_logits(final, probe_texts(cfg.vt.apc.probe_dataset, cfg.vt.apc.probe_docs),
                       max_length=cfg.vt.apc.probe_max_length)
        report["apc"]["rate_after"] = activation_rate(m)
        report["apc"]["rate_before"] = activation_rate(m, -cfg.vt.apc.shift)
    report["final_head_norm"] = mlm_head_norm(final.backbone)
    model_dir = save_stage(final, al, out / "model")
    report["model_dir"] = str(model_dir)
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2, ensure_ascii=False))
    return report
