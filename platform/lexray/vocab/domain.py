"""CAI's AdaLM step end to end (Iida & Okazaki, AACL 2022, arXiv:2211.03988,
../shared/papers/cai-vocabulary-idf-domain-adaptation.txt §3.2.1): vocabulary expansion on the domain corpus
(:mod:`lexray.vocab.expand`, Algorithm 1, mean-of-sub-words rows), then continual MLM pre-training on the same
corpus (:class:`ContinualMLMPhase`: BERT's 15 % masking with 80/10/10, every parameter trained) on Ray Train,
through the one phase runner (:func:`lexray.train.runner.run_phase`, via :mod:`lexray.vocab.adapt`'s
:class:`~lexray.vocab.adapt.MaskedLMPhase`, the step functions VT's adaptation uses too).

Used by ``lexray adapt-domain`` (:mod:`lexray.commands.adapt_domain`, ``jobs/adapt_domain.py``). The output
``<out>/model`` is a normal lexray / Hugging Face MLM folder (with sentence-transformers' files) that
``lexray evaluate --model`` and ``jobs/train_splade.py`` take as ``model.name_or_path``; ``adapt_report.json``
holds |V0|, |V_final|, the added tokens with their corpus counts, the iterations, the MLM loss curve and timings.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import Counter
from pathlib import Path

import torch

from lexray.vocab.adapt import MaskedLMPhase, freeze_for_adaptation, resolve_objective
from lexray.vocab.masking import token_weights

log = logging.getLogger(__name__)

REPORT_FILE = "adapt_report.json"


def corpus_texts(cai, on_error: str = "fail", report=None) -> list[str]:
    """The domain corpus of ``cai`` (:class:`lexray.config.CaiConfig`): a BEIR folder's documents (title +
    text, :mod:`lexray.data.beir`) or a JSONL file's ``text_field`` (with ``title_field`` before it), first
    ``max_docs``.

    Raises:
        lexray.data.report.DataError: a bad line or a missing / non-string / empty text field under
            ``on_error="fail"`` (file, line, field); skipped rows are counted in ``report`` otherwise.
        FileNotFoundError: ``cai.corpus`` does not exist (the message names the key).
    """
    from lexray.data.beir import iter_corpus
    from lexray.data.jsonl import iter_jsonl
    from lexray.data.report import DataError, ReadReport
    from lexray.paths import resolve_local

    report = report if report is not None else ReadReport()
    path = resolve_local(cai.corpus)
    if path is None or not path.exists():
        raise FileNotFoundError(f"cai.corpus: {cai.corpus} not found (a BEIR folder or a .jsonl file)")
    if path.is_dir():
        return [d.full_text for d in iter_corpus(path, on_error=on_error, report=report, max_docs=cai.max_docs)]
    texts: list[str] = []
    for line, rec in iter_jsonl(path, report, on_error):
        parts = []
        for name in (cai.title_field, cai.text_field):
            if name is None:
                continue
            v = rec.get(name)
            if v is None and name == cai.title_field:
                continue
            if not isinstance(v, str):
                report.problem(DataError(path, line, name, "bad_field", f"expected a string, got {v!r:.40}"),
                               on_error)
                break
            parts.append(v.strip())
        else:
            text = " ".join(p for p in parts if p)
            if not text:
                report.problem(DataError(path, line, cai.text_field, "empty_text", "empty text"), on_error)
                continue
            texts.append(text)
            report.kept[path.name] += 1
            if cai.max_docs is not None and len(texts) >= cai.max_docs:
                break
    return texts


class ContinualMLMPhase(MaskedLMPhase):
    """CAI's continual pre-training (§3.2.1, "Continual Pretraining"): uniform masking ω (every non-special
    token alike, so each position is masked with probability ``cai.mlm.mask_rate`` = 15 %, then 80/10/10), every
    parameter trained unless ``cai.mlm.trainable: embeddings``; masked-token prediction for MLM encoders (masked
    next-token prediction for a decoder, lexray.vocab.adapt)."""

    name = "cai-mlm"
    out_name = "cai-mlm"

    @staticmethod
    def section(cfg):
        return cfg.cai.mlm

    def prepare(self, enc, init_dir: str) -> tuple[torch.Tensor, str]:
        omega = token_weights(torch.zeros(len(enc.tokenizer), dtype=torch.bool), 1.0, enc.tokenizer.all_special_ids)
        objective = resolve_objective("auto", enc.settings.kind)
        if self.ac.trainable == "embeddings":
            freeze_for_adaptation(enc.backbone, True)
        n = sum(p.numel() for p in enc.backbone.parameters() if p.requires_grad)
        if self.rank == 0:
            print(f"[lexray] cai-mlm: objective {objective}, {self.ac.trainable} parameters train ({n:,})",
                  flush=True)
        return omega, objective

    def load_texts(self, cfg) -> list[str]:
        return corpus_texts(cfg.cai, cfg.data.on_error)


def check_inputs(cfg) -> list[str]:
    """What ``lexray adapt-domain`` refuses before any work; returns the corpus texts.

    Raises:
        lexray.config.ConfigError: no model, or nothing to do (both ``cai.expand.enabled`` and
            ``cai.mlm.enabled`` false).
        lexray.models.backbones.UnsupportedModelError: the model has no MLM / LM head (names
            ``model.name_or_path``).
        ValueError: an empty corpus (names ``cai.corpus``); DataError / FileNotFoundError from
            :func:`corpus_texts`.
    """
    from lexray.config import ConfigError

    cfg.model.require_source()
    if not cfg.cai.expand.enabled and not cfg.cai.mlm.enabled:
        raise ConfigError("cai.expand.enabled and cai.mlm.enabled are both false: nothing to do")
    if cfg.model.name_or_path is not None:
        from transformers import AutoConfig

        from lexray.models.backbones import UnsupportedModelError, resolve_model_dir

        local = resolve_model_dir(cfg.model.name_or_path)
        conf = AutoConfig.from_pretrained(str(local or cfg.model.name_or_path),
                                          trust_remote_code=cfg.model.trust_remote_code)
        archs = conf.architectures or []
        if not any(a.endswith(("ForMaskedLM", "ForCausalLM")) for a in archs):
            raise UnsupportedModelError(
                f"model.name_or_path: {cfg.model.name_or_path} ({', '.join(archs) or conf.model_type}) has no MLM "
                "head; continual MLM pre-training and the new vocabulary rows need one (use the *ForMaskedLM "
                "checkpoint)")
    texts = corpus_texts(cfg.cai, cfg.data.on_error)
    if not texts:
        raise ValueError(f"cai.corpus: {cfg.cai.corpus} holds no documents with text"
                         + (f" (cai.max_docs={cfg.cai.max_docs})" if cfg.cai.max_docs else ""))
    return texts


def expand_encoder(cfg, texts: list[str], report: dict):
    """Load ``cfg.model`` (no head rescale, no APC), expand its vocabulary on ``texts`` and install the new rows;
    returns the encoder. Fills ``report`` (vocabulary, added tokens, iterations, timings)."""
    from lexray.models import load_encoder
    from lexray.vocab.expand import (
        expand_vocabulary,
        init_new_rows,
        self_tokenization_failures,
        subword_pieces,
    )

    t0 = time.perf_counter()
    enc = load_encoder(cfg.model.model_copy(update={"mlm_head_rescale": 1.0, "apc": type(cfg.model.apc)()}))
    report["timings_s"]["load"] = time.perf_counter() - t0
    report["v0"] = len(enc.tokenizer)
    ex = cfg.cai.expand
    if not ex.enabled:
        report.update(v_final=report["v0"], added=[], iterations=[])
        return enc
    t0 = time.perf_counter()
    exp = expand_vocabulary(enc.tokenizer, texts, ex.delta_v, ex.max_iterations, ex.min_frequency,
                            progress=lambda line: print(line, flush=True))
    report["timings_s"]["expand"] = time.perf_counter() - t0
    bad = self_tokenization_failures(exp.tokenizer, exp.words, exp.ids)
    if bad:
        raise RuntimeError(f"{len(bad)} added tokens do not tokenize to themselves, e.g. {bad[:3]}")
    t0 = time.perf_counter()
    pieces = subword_pieces(enc.tokenizer, exp.words)
    report["init"] = init_new_rows(enc.backbone, exp.ids, pieces)
    enc.tokenizer = exp.tokenizer
    report["timings_s"]["init"] = time.perf_counter() - t0
    final = Counter()
    for e in exp.tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False):
        final.update(e.ids)
    report.update(v_final=len(exp.tokenizer), convention=exp.convention, stopped_by=exp.stopped_by,
                  iterations=exp.iterations, self_tokenization_failures=0,
                  added=[{"token": w, "id": i, "count": c, "count_final": final[i], "pieces":
                          enc.tokenizer.convert_ids_to_tokens(p)}
                         for w, i, c, p in zip(exp.words, exp.ids, exp.counts, pieces, strict=True)])
    return enc


def adapt_domain(cfg, out_dir: str | Path, local: bool = False) -> dict:
    """Run CAI's AdaLM step into ``out_dir``; returns the report (also ``out_dir/adapt_report.json``).

    Folders: ``expanded/`` (after the expansion, before training), ``train/`` (the Ray Train run, resumable),
    ``model/`` (the adapted model). ``local=True`` trains in this process instead of on Ray (tests).
    """
    from lexray.models import SparseEncoder
    from lexray.train.metrics import read_metrics
    from lexray.vocab.adapt import mlm_local, run_mlm

    t_all = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"paper": "cai-vocabulary-idf-domain-adaptation.txt §3.2.1 (arXiv:2211.03988)",
                    "model": cfg.model.name_or_path or "random_init", "corpus": cfg.cai.corpus,
                    "config": cfg.cai.model_dump(mode="json"), "timings_s": {}}
    t0 = time.perf_counter()
    texts = check_inputs(cfg)
    report["documents"] = len(texts)
    report["timings_s"]["read"] = time.perf_counter() - t0
    enc = expand_encoder(cfg, texts, report)
    init_dir = out / "expanded"
    if init_dir.exists():
        shutil.rmtree(init_dir)
    enc.save_pretrained(init_dir)
    del enc
    cur, curve = init_dir, []
    if cfg.cai.mlm.enabled:
        t0 = time.perf_counter()
        if local:
            run_dir = out / "train" / "local"
            cur = mlm_local(cfg, ContinualMLMPhase, init_dir, run_dir)
        else:
            run_dir = out / "train" / "cai-mlm" / "lexray"
            cur = run_mlm(cfg, ContinualMLMPhase, init_dir, out / "train", "cai-mlm")
        report["timings_s"]["mlm"] = time.perf_counter() - t0
        curve = [{"step": int(m["step"]), "loss": m["loss"]} for m in read_metrics(run_dir) if "loss" in m]
    report["mlm_loss"] = curve
    model_dir = out / "model"
    if model_dir.exists():
        shutil.rmtree(model_dir)
    SparseEncoder.from_pretrained(cur, dtype=cfg.model.dtype).save_pretrained(model_dir)
    report["model_dir"] = str(model_dir)
    report["timings_s"]["total"] = time.perf_counter() - t_all
    (out / REPORT_FILE).write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return report
