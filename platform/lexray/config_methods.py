"""The configuration sections of the paper methods, beside :mod:`lexray.config` (which holds the rest of the
schema and :func:`lexray.config.load_config`, and re-exports every name here):

- APC (Vocabulary Transfer, arXiv:2607.00004 §4.2.3) and VT itself (``vt:``);
- CAI's domain adaptation (arXiv:2211.03988 §3.2: vocabulary expansion, continual MLM; ``cai:``) and its BM25
  hybrid (§3.3; ``hybrid:``);
- LexSemBridge's dense track (arXiv:2508.17858; ``model.dense``);
- distillation from a teacher's scores (arXiv:2205.04733; ``train.phases[].distill``, ``train.teacher``);
- out-of-domain evaluation rows of the training jobs (LACONIC issue 28; ``eval.transfer``).

Same rules as every section: unknown keys are errors (``extra="forbid"``), values are validated on assignment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Section(BaseModel):
    """Base of every configuration section: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


class ApcConfig(Section):
    """Activation Potential Calibration (Vocabulary Transfer, arXiv:2607.00004, vocabulary-transfer-vt.txt §4.2.3):
    shift the output bias, b ← b − c, once when the encoder is built (``lexray.vocab.apc``). Set ``shift`` (c
    itself) or ``target_rate`` (the fraction of |V| with a positive SPLADE weight, averaged over ``probe_docs``
    documents of ``probe_dataset``; c is found by bisection) — not both. A head without a bias (Llama) gets one
    (lexray.models.head.ensure_output_bias)."""

    shift: float | None = Field(None, description="c in b <- b - c")
    target_rate: float | None = Field(None, gt=0, lt=1, description="target activation rate in (0, 1); c by "
                                      "bisection on the probe documents")
    probe_dataset: str = Field("shared:datasets/scifact", description="BEIR folder whose corpus gives the probe")
    probe_docs: int = Field(64, ge=1, description="first N documents of the probe corpus")
    probe_max_length: int | None = Field(None, ge=1, description="None = the encoder's doc_max_length")
    tolerance: float = Field(0.001, gt=0, description="bisection stops when |rate - target| <= tolerance")
    per_term: bool = Field(False, description="first centre every term: b_v <- b_v - mean over the probe documents "
                           "of term v's max logit, then the scalar shift (lexray.vocab.apc.apply_apc; an extension "
                           "of APC for LM heads whose logits carry a per-term frequency prior)")

    @model_validator(mode="after")
    def _one(self) -> ApcConfig:
        if self.shift is not None and self.target_rate is not None:
            raise ValueError("set at most one of apc.shift and apc.target_rate")
        return self

    @property
    def enabled(self) -> bool:
        return self.shift is not None or self.target_rate is not None


class DenseConfig(Section):
    """A dense bi-encoder and its LexSemBridge (``lexray.models.dense``, ``lexray.models.bridge``; LexSemBridge,
    arXiv:2508.17858, ../shared/papers/lexsembridge.txt §3.4-3.5). Setting ``model.dense`` makes every command
    that loads ``model`` load a dense encoder (Parquet dense shards, exact / faiss search, ``train-dense``).

    None = what the model folder's ``lexray_dense.json`` (or sentence-transformers pooling files) says, else the
    default in brackets. docs/lexsembridge.md has the paper-vs-code options."""

    pooling: Literal["mean", "cls"] | None = Field(None, description="[mean] over attention-mask positions, or "
                                                   "the first ([CLS]) position")
    similarity: Literal["cosine", "dot"] | None = Field(None, description="[cosine] (vectors L2-normalised; the "
                                                        "paper's Eq. 2) or the raw dot product")
    bridge: Literal["none", "slr", "llr", "clr"] | None = Field(None, description="[none] lexical representation "
                                                                "of the bridge: SLR (Eq. 5), LLR (Eq. 6), CLR "
                                                                "(Eq. 7; needs an MLM head)")
    bridge_side: Literal["query", "passage", "both"] | None = Field(None, description="[query] the side(s) the "
                                                                    "bridge modulates (paper Table 5)")
    lexical_only: bool | None = Field(None, description="[false] the bridge's q_lex alone, without the dense "
                                      "vector (paper Table 6)")
    llr_form: Literal["paper", "token_weight"] | None = Field(
        None, description="[paper] Eq. 6: log(1+ReLU(h U + b)) over |V|, max-pooled over positions; "
        "token_weight = the authors' code: one d->1 weight per input token scattered into |V|")
    clr_form: Literal["paper", "logits"] | None = Field(
        None, description="[paper] Eq. 7: log(1 + softmax(MLM-head(h_[CLS]))); logits = the authors' code: "
        "log1p(ReLU(logits))")
    bridge_init: Literal["default", "zero", "embedding"] | None = Field(
        None, description="[default] torch's Linear init of the alignment layer W; zero = W = 0, so q_lex starts "
        "uniform (1/d) and a cosine model's ranking starts equal to the backbone's; embedding = W's column of term "
        "t starts as t's input embedding / rms(E) (a departure, docs/lexsembridge.md)")
    bridge_init_scale: float | None = Field(None, gt=0, description="[1.0] the factor of bridge_init=embedding")
    bridge_w_norm: Literal["none", "l1"] | None = Field(
        None, description="[none] Eq. 8 as written; l1 = w / ||w||_1 before the alignment layer (a departure: the "
        "scale of W·w then no longer depends on the lexical vector, docs/lexsembridge.md)")
    bridge_align: Literal["full", "tied"] | None = Field(
        None, description="[full] Eq. 8's alignment layer W (d x |V|); tied = W = A E^T through the model's input "
        "embeddings with a learned d x d_h matrix A that starts at 0 (a departure, docs/lexsembridge.md)")
    shard_dtype: Literal["float32", "float16"] = Field("float32", description="element type of the dense shards' "
                                                       "embedding column")


class HybridConfig(Section):
    """Fusion of the sparse run with BM25 (``lexray evaluate --hybrid bm25``; CAI arXiv:2211.03988 §3.3, Eq. 8-9;
    lexray.index.fusion, ranx's formulas)."""

    method: Literal["sum", "minmax", "zscore", "rrf"] = Field(
        "sum", description="sum = the paper's BM25 + sparse over the union of both lists (missing = 0); minmax / "
        "zscore = min-max / zero-mean unit-variance normalization per query first (ranx's min-max / zmuv); rrf = "
        "reciprocal rank fusion")
    weight: float | None = Field(None, ge=0, le=1, description="α, the sparse run's share: (1-α)·BM25 + α·sparse; "
                                 "None = 0.5 (ranks as the paper's plain sum); not allowed with rrf")
    depth: int | None = Field(None, ge=1, description="each list is cut to this many documents before fusing "
                              "(None = eval.top_k; CAI's code used 100)")
    rrf_k: int = Field(60, ge=1, description="k of RRF's 1/(k + rank)")

    @model_validator(mode="after")
    def _rrf_unweighted(self) -> HybridConfig:
        if self.method == "rrf" and self.weight is not None:
            raise ValueError("hybrid.weight: rrf is unweighted; leave hybrid.weight unset with "
                             "hybrid.method=rrf")
        return self


class VTAdaptConfig(Section):
    """VT adaptation (Vocabulary Transfer, arXiv:2607.00004 §4.2.3, §5.3): embedding-only MLM, every transformer
    weight frozen, Overlap-Aware Masking Curriculum, AdamW with a cosine schedule and linear warm-up, run by Ray
    Train with ``train.strategy``."""

    enabled: bool = True
    objective: Literal["auto", "mlm", "mntp"] = Field(
        "auto", description="mlm = predict the masked token at its own position; mntp = LLM2Vec masked next-token "
        "prediction (predict token i from position i-1); auto = mntp for decoders, mlm for MLM encoders "
        "(lexray.vocab.adapt explains why)")
    dataset: str | None = Field(None, description="BEIR folder whose corpus is the MLM text (None = data.dataset)")
    max_docs: int | None = Field(None, ge=1)
    max_steps: int = Field(100, ge=1)
    lr: float = 3e-4
    weight_decay: float = 0.0
    warmup_steps: int = Field(10, ge=0)
    global_batch_size: int = Field(16, ge=1)
    grad_accum: int = Field(1, ge=1)
    max_length: int = Field(128, ge=8)
    mask_rate: float = Field(0.3, gt=0, lt=1)
    new_token_weight: float = Field(2.0, gt=0, description="lambda: masking weight of new tokens (overlap = 1)")
    train_output_head: bool = Field(True, description="also train an untied output projection and the head bias "
                                    "(tied heads train with the input embeddings either way)")


class VTConfig(Section):
    """Vocabulary Transfer (arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt §4.2): ``model`` is the
    source; the job ``jobs/migrate_vocab.py`` writes a lexray encoder over ``target_tokenizer``."""

    target_tokenizer: str = Field("shared:models/splade-tiny", description="V′: tokenizer location")
    target_table: str | None = Field("shared:models/splade-tiny", description="model whose input embeddings are "
                                     "Ẽ (Semantic-Init affinities, eq. 7)")
    target_bias: str | None = Field("shared:models/splade-tiny", description="MLM model whose output bias is "
                                    "b_tgt (PDA, eq. 10); None = no PDA")
    init: Literal["semantic", "rand_all", "rand_new", "mean", "subtoken"] = "semantic"
    top_k: int = Field(64, ge=1, description="first sparsemax candidates per new token (exact either way: rows "
                       "with a larger support are redone with more; see vocab/sparsemax.py)")
    pda: bool = Field(True, description="Prior-Aware Distribution Alignment of the output bias (eq. 10)")
    pda_scale: float | None = Field(None, ge=0, description="sigma of the source bias range; None = std of the "
                                    "source bias (0 for a bias-less source: PDA then gives b' = mu = 0)")
    apc: ApcConfig = Field(default_factory=lambda: ApcConfig(shift=5.0),
                           description="APC applied after adaptation and saved with the migrated model")
    adapt: VTAdaptConfig = Field(default_factory=VTAdaptConfig)
    seed: int = 0


class CaiExpandConfig(Section):
    """CAI's vocabulary expansion (arXiv:2211.03988 §3.2.1, Algorithm 1; lexray.vocab.expand)."""

    enabled: bool = True
    delta_v: int = Field(3000, gt=0, description="ΔV: the target size grows by this per iteration (the paper: "
                         "3,000); the loop stops when an iteration adds fewer than ΔV words")
    max_iterations: int | None = Field(None, ge=1, description="cap on the iterations (None = Algorithm 1's "
                                       "criterion only; not in the paper)")
    min_frequency: int = Field(2, ge=1, description="minimum pair frequency of the domain tokenizer's trainer")


class CaiMlmConfig(Section):
    """CAI's continual MLM pre-training on the domain corpus (arXiv:2211.03988 §3.2.1: BERT's 15 % masking,
    80/10/10), a :class:`lexray.vocab.domain.ContinualMLMPhase` on Ray Train with ``train.strategy``; AdamW,
    linear warm-up then cosine decay."""

    enabled: bool = True
    trainable: Literal["all", "embeddings"] = Field("all", description="all parameters (the paper), or only the "
                                                    "input embeddings and output head/bias (as VT's adaptation)")
    max_steps: int = Field(100, ge=1)
    lr: float = Field(5e-5, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    warmup_steps: int = Field(10, ge=0)
    global_batch_size: int = Field(32, ge=1)
    grad_accum: int = Field(1, ge=1)
    max_length: int = Field(128, ge=8)
    mask_rate: float = Field(0.15, gt=0, lt=1, description="fraction of non-special positions masked")


class CaiConfig(Section):
    """CAI's AdaLM step (arXiv:2211.03988 §3.2.1): vocabulary expansion, then continual MLM pre-training on a
    domain corpus, run by ``lexray adapt-domain`` (jobs/adapt_domain.py, docs/cai.md). ``model`` is the model
    adapted (an MLM encoder; a decoder trains with masked next-token prediction)."""

    corpus: str = Field("shared:datasets/scifact", description="the domain corpus: a BEIR folder (title + text "
                        "of corpus.jsonl) or a .jsonl file with one record per line")
    text_field: str = Field("text", description="JSONL corpus: the field holding the text")
    title_field: str | None = Field(None, description="JSONL corpus: an optional field prepended to the text")
    max_docs: int | None = Field(None, ge=1, description="only the first N documents")
    expand: CaiExpandConfig = Field(default_factory=CaiExpandConfig)
    mlm: CaiMlmConfig = Field(default_factory=CaiMlmConfig)


class DistillConfig(Section):
    """Distillation from a teacher's scores, mixed into the phase's InfoNCE: ``L_rank = InfoNCE + weight ·
    L_distill`` over each query's positive and its hard negatives (Formal et al. 2022, "From distillation to hard
    negative sampling", arXiv:2205.04733: MarginMSE, arXiv:2010.02666, and KL-Div, ``lexray.losses.kl_div``). The
    teacher's scores come with the hard-negative groups (``positive_scores``/``negative_scores``), computed once
    from ``train.teacher`` (``lexray.train.teacher``)."""

    loss: Literal["none", "kl", "margin_mse"] = "none"
    weight: float = Field(1.0, ge=0, description="weight of the distillation term beside InfoNCE")
    temperature: float = Field(1.0, gt=0, description="kl: the student's scores are divided by this (the paper: 1)")
    teacher_temperature: float = Field(1.0, gt=0, description="kl: the teacher's scores are divided by this")


class TeacherConfig(Section):
    """The retriever whose scores a distilling phase matches (``lexray.train.teacher``): computed once per
    teacher, settings, collection and mined negatives, and cached beside the negatives."""

    kind: Literal["none", "bm25", "sparse"] = Field(
        "none", description="bm25: Lucene BM25 (Anserini's BEIR flat set-up); sparse: a lexray sparse model "
        "(teacher.model), exact dot products of its query and document vectors")
    model: str | None = Field(None, description="kind sparse: the teacher model's location (hub id, folder, "
                              "shared:<rel>)")
    k1: float = Field(0.9, gt=0, description="kind bm25")
    b: float = Field(0.4, ge=0, le=1, description="kind bm25")
    depth: int = Field(1000, ge=1, description="kind bm25: ranks searched per query; a candidate below it gets "
                       "the score at rank depth (an upper bound of its own), counted in the report")
    batch_size: int = Field(32, ge=1, description="kind sparse: texts per forward pass")

    @model_validator(mode="after")
    def _model_for_sparse(self) -> TeacherConfig:
        if self.kind == "sparse" and not self.model:
            raise ValueError("train.teacher.kind 'sparse' needs train.teacher.model")
        return self


class TransferConfig(Section):
    """One collection the training jobs also evaluate the trained model on, after training (``eval.transfer``):
    out of domain, since the model never trained on it. Same evaluation pipeline as the in-domain row; results in
    ``<out>/eval/transfer/<name>/``, a row of the job's table and of its ``metrics.json`` (lexray.workflows)."""

    dataset: str = Field(..., description="BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), e.g. "
                         "shared:datasets/cranfield")
    name: str | None = Field(None, description="the folder (eval/transfer/<name>) and the row's name; None = the "
                             "dataset folder's name")
    split: str = Field("test", description="qrels split evaluated")
    on_error: Literal["fail", "skip"] = Field("fail", description="bad corpus rows (as data.on_error): Cranfield "
                                              "has two empty documents and needs skip; skipped rows are counted in "
                                              "the row's efficiency (encode_docs_skipped)")
    output_vocab: Literal["model", "collection", "full"] = Field(
        "collection", description="encode.output_vocab for this collection: collection (default) = the token ids "
        "of its own corpus, so words absent from the training collection can be terms; model = the checkpoint's "
        "saved output_ids (the training collection's vocabulary, model.output_vocab); full = all of |V|")
    max_docs: int | None = Field(None, ge=1, description="only the first N documents (smoke runs); None = all "
                                 "(data.max_docs does not apply here)")
    zero_shot: bool = Field(False, description="also evaluate the starting model on this collection, through the "
                            "evaluation cache (eval.cache), when the job evaluates zero-shot")

    @model_validator(mode="after")
    def _folder_name(self) -> TransferConfig:
        import re

        if self.name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", self.name):
            raise ValueError(f"name {self.name!r} must be a folder name (letters, digits, '.', '_', '-')")
        return self

    @property
    def label(self) -> str:
        """``name``, else the dataset folder's name (``shared:datasets/cranfield`` -> ``cranfield``)."""
        return self.name or Path(self.dataset.split(":", 1)[-1].rstrip("/")).name
