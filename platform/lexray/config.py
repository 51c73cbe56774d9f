"""Typed configuration: one pydantic model per concern, and :func:`load_config` (recipe + ``--set`` overrides).

Why one module for the schema: every knob of every job lives here, validated once. Unknown keys and wrong types
are errors that name the dotted key and the file they came from (pydantic's ``extra="forbid"``). The resolved
configuration is written beside every output with :func:`save_config` so a run can be reproduced from its output
folder. Reading YAML recipes (``include:``) and parsing ``--set`` overrides is :mod:`lexray.recipes`' concern; its
public names are importable from here too.

Seeds: each seed is named for what it draws — ``train.seed`` (training: initialization, batch order, sampled
negatives), ``data.mining_seed`` (BM25 hard-negative mining), ``tune.dev_seed`` (the dev split), ``vt.seed``
(Vocabulary Transfer's random rows), ``model.random_init.seed`` (a random backbone). The former top-level ``seed``
only ever seeded mining; it is still read, as ``data.mining_seed``, with a warning.

The sections of the paper methods (APC, Vocabulary Transfer, CAI, LexSemBridge's dense track, the BM25 hybrid,
distillation) live
in :mod:`lexray.config_methods`; they are importable from here too.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from lexray.config_methods import (
    ApcConfig,
    CaiConfig,
    CaiExpandConfig,
    CaiMlmConfig,
    DenseConfig,
    DistillConfig,
    HybridConfig,
    Section,
    TeacherConfig,
    TransferConfig,
    VTAdaptConfig,
    VTConfig,
)
from lexray.recipes import (
    ConfigError,
    add_config_args,
    deep_merge,
    format_errors,
    parse_overrides,
    read_yaml,
    save_config,
    set_dotted,
)

__all__ = ["ApcConfig", "CaiConfig", "CaiExpandConfig", "CaiMlmConfig", "ConfigError", "DenseConfig", "HybridConfig",
           "DistillConfig", "TeacherConfig", "TransferConfig", "VTAdaptConfig", "VTConfig", "LexrayConfig", "ModelConfig", "add_config_args", "apply_overrides", "load_config",
           "parse_overrides", "read_yaml", "save_config"]

log = logging.getLogger(__name__)


class RandomInitConfig(Section):
    """A random-init backbone built from a config instead of loaded weights (tests, CPU defaults, GPU smoke
    runs of architectures whose weights cannot be fetched)."""

    architecture: Literal["llama", "qwen2", "qwen3", "mistral", "bert"] = "llama"
    tokenizer: str = Field(..., description="tokenizer location (hub id or local path); sets |V|")
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int | None = None
    max_position_embeddings: int = 512
    tie_word_embeddings: bool = True
    embedding_anisotropy: float = Field(
        0.0, ge=0.0, description="add one shared random direction to every input-embedding row, with this norm "
        "relative to the rows' mean norm (trained LMs' embeddings share such a direction; see "
        "lexray.models.backbones.build_random_backbone)")
    seed: int = 0


class ModelConfig(Section):
    """The sparse encoder: backbone, pooling and the tokenization contract (see ``lexray.models``).

    The section may name no model (``name_or_path`` and ``random_init`` both None): commands that load none, such
    as ``lexray index``, need none. Whatever loads a model checks for one with :meth:`require_source`.
    """

    name_or_path: str | None = Field(None, description="hub id, local directory, .gguf file or "
                                     "pkg:<module>/<file> (a file inside an installed package) of the backbone")
    num_layers: int | None = Field(None, ge=1, description="keep only the first N pretrained transformer layers "
                                   "(CPU recipes; a departure from the papers, documented where used)")
    random_init: RandomInitConfig | None = None
    kind: Literal["auto", "mlm", "decoder"] = "auto"
    # None = keep what the checkpoint's lexray_encoder.json says (or the EncoderSettings default).
    query_max_length: int | None = None
    doc_max_length: int | None = None
    query_prefix: str | None = None
    doc_prefix: str | None = None
    special_tokens: Literal["auto", "include", "exclude"] = Field(
        "auto", description="whether special-token positions (BOS/CLS/SEP/EOS) enter the max-pooling; "
        "auto = include for MLM encoders, exclude for decoders (BOS attention sink)")
    inference_free_queries: bool | None = None
    query_idf_path: str | None = Field(None, description="JSON {token_id: idf} for inference-free queries")
    query_top_k: int | None = None
    doc_top_k: int | None = None
    mlm_head_rescale: float = Field(1.0, gt=0, description="alpha in W <- W/alpha (MLM-head rescaling, "
                                    "arXiv:2606.18811 §3.2)")
    apc: ApcConfig = Field(default_factory=ApcConfig, description="output-bias shift applied when the encoder is "
                           "built (after mlm_head_rescale); off unless apc.shift or apc.target_rate is set")
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    trust_remote_code: bool = False
    chunk_size: int | None = Field(None, ge=1, description="sequences per (chunk, L, |V|) logits block")
    head_impl: Literal["auto", "fused", "unfused"] | None = Field(
        None, description="head execution (lexray.models.settings.EncoderSettings.head_impl); None keeps the "
        "model's own (auto: fused on CPU, unfused on GPU)")
    dense: DenseConfig | None = Field(None, description="set: a dense bi-encoder (LexSemBridge track) instead "
                                      "of the SPLADE encoder")
    output_vocab: str | None = Field(
        None, description="BEIR folder: restrict the output vocabulary to the token ids that occur in its corpus "
        "(documents tokenized as for encoding, at doc_max_length); 'full': all of |V|, also for a checkpoint whose "
        "lexray_encoder.json restricts it; None = what the checkpoint says (else the full |V|) "
        "(lexray.models.encoder.collection_output_ids; encode.output_vocab chooses per collection)")

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if self.name_or_path is not None and self.random_init is not None:
            raise ValueError("set at most one of model.name_or_path and model.random_init")
        return self

    def with_output_vocab(self, choice: str, dataset: str) -> ModelConfig:
        """This model encoding the collection ``dataset`` with ``encode.output_vocab`` = ``choice``: ``model``
        (unchanged: the recipe's ``output_vocab`` or the checkpoint's saved ``output_ids``), ``collection`` (the
        token ids of ``dataset``'s corpus, recomputed) or ``full`` (all of |V|)."""
        if choice == "model":
            return self
        return self.model_copy(update={"output_vocab": dataset if choice == "collection" else "full"})

    def require_source(self, source: str = "configuration") -> ModelConfig:
        """``self`` if it names a model (``name_or_path`` or ``random_init``); call before loading one.

        Raises:
            ConfigError: neither is set; the message names ``model.name_or_path`` and ``source`` (a recipe path).
        """
        if self.name_or_path is None and self.random_init is None:
            raise ConfigError(f"{source}: model.name_or_path is not set (nor model.random_init), and this command "
                              f"loads a model: set it in the recipe or with --set model.name_or_path=<hub id, "
                              f"folder or .gguf file>")
        return self


class DataConfig(Section):
    """A BEIR-layout collection (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)."""

    dataset: str = "shared:datasets/scifact"
    split: str = Field("test", description="qrels split evaluated")
    train_split: str = Field("train", description="split whose queries feed training (hard-negative mining)")
    on_error: Literal["fail", "skip"] = "fail"
    max_docs: int | None = Field(None, description="only the first N documents (smoke runs)")
    mining_seed: int = Field(42, description="seed of BM25 hard-negative mining's sampling (lexray.data.mining); "
                             "apart from train.seed, so a study of the training seed trains on the same negatives")
    mining_pool: int | None = Field(None, ge=1, description="BM25 negatives mined per query (default: the largest "
                                    "phase num_negatives); a larger pool lets each epoch sample another "
                                    "num_negatives of them (lexray.data.hardneg), so later epochs see new negatives")


class LoraConfig(Section):
    enabled: bool = False
    train_output_bias: bool = Field(False, description="also train the vocabulary projection's bias (|V| "
                                    "parameters, one per term) as a full parameter beside the adapters")
    output_bias_lr: float | None = Field(None, gt=0, description="learning rate of that bias (strategy ddp; fsdp and "
                                         "deepspeed build their own parameter groups and use the phase lr); None = "
                                         "the phase lr")
    r: int = Field(32, ge=1)
    alpha: int = Field(64, ge=1)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])


class FlopsConfig(Section):
    """FLOPS regularizer (Paria et al. 2020, arXiv:2004.05665) weights and warmup (LACONIC, arXiv:2601.01684
    §2.2)."""

    lambda_q: float = Field(1e-3, ge=0, description="λ_Q; negative would reward dense queries")
    lambda_d: float = Field(1e-3, ge=0, description="λ_D; negative would reward dense documents")
    warmup_steps: int = Field(0, ge=0)
    schedule: Literal["quadratic", "exponential", "linear", "constant"] = "quadratic"
    kind: Literal["flops", "l1"] = "flops"
    unbiased: bool = Field(False, description="FLOPS U-statistic without the Var/n bias (lexray.losses.flops)")


class PhaseConfig(Section):
    """One training phase (LACONIC, arXiv:2601.01684 §2.2: pre-finetuning, then hard-negative finetuning)."""

    name: str = "finetune"
    data: Literal["title_abstract_pairs", "hard_negatives", "pairs_file"] = "hard_negatives"
    data_path: str | None = None
    corpus: str | None = Field(None, description="BEIR folder resolving hard-negative doc ids (default data.dataset)")
    loss: Literal["infonce", "margin_mse"] = "infonce"
    epochs: float = Field(1.0, gt=0)
    max_steps: int | None = Field(None, ge=1)
    global_batch_size: int = Field(32, ge=1)
    grad_accum: int = Field(1, ge=1)
    num_negatives: int = Field(15, ge=0)
    in_batch_negatives: bool = True
    query_max_length: int | None = None
    doc_max_length: int | None = None
    lr: float = Field(2e-5, gt=0)
    bridge_lr: float | None = Field(None, gt=0, description="dense track: learning rate of the LexSemBridge "
                                    "(alignment layer W, LLR's U, b; strategy ddp); None = the phase lr")
    weight_decay: float = Field(0.01, ge=0)
    warmup_ratio: float = Field(0.05, ge=0, le=1)
    temperature: float = Field(1.0, gt=0)
    flops: FlopsConfig = Field(default_factory=FlopsConfig)
    lora: LoraConfig = Field(default_factory=LoraConfig)
    max_train_examples: int | None = Field(None, ge=1, description="train on the first N examples only (smoke "
                                           "runs); mined hard negatives are then mined for N queries only")
    distill: DistillConfig = Field(default_factory=DistillConfig)

    @model_validator(mode="after")
    def _distill_needs_negatives(self) -> PhaseConfig:
        if self.distill.loss == "none":
            return self
        if self.loss != "infonce":
            raise ValueError(f"distill.loss '{self.distill.loss}' mixes with loss 'infonce' (this phase has "
                             f"'{self.loss}')")
        if self.data != "hard_negatives" or self.num_negatives < 1:
            raise ValueError("distill needs data 'hard_negatives' and num_negatives >= 1 (the teacher scores a "
                             "query's positive and its negatives)")
        return self

    @property
    def needs_teacher(self) -> bool:
        """Whether the phase reads teacher scores (MarginMSE as the loss, or a distillation term)."""
        return self.loss == "margin_mse" or self.distill.loss != "none"


class TrainConfig(Section):
    """Ray Train settings shared by all phases."""

    strategy: Literal["ddp", "fsdp", "deepspeed"] = "ddp"
    storage_path: str | None = Field(None, description="Ray Train storage: a local folder, a shared mount or a "
                                     "URI (s3://…, gs://…); default <out_dir>/train")
    deepspeed_config: str | None = None
    num_workers: int = 1
    use_gpu: bool = False
    cpus_per_worker: float = 1.0
    bf16: bool = False
    gradient_checkpointing: bool = False
    gather_negatives: bool = True
    checkpoint_every: int = 100
    log_every: int = 10
    max_failures: int = 0
    collapse_min_active: float = 1.0
    collapse_max_fraction: float = 0.5
    collapse_patience: int = 20
    max_grad_norm: float | None = Field(1.0, description="gradient clipping (None = off)")
    num_checkpoints_to_keep: int = Field(2, ge=1)
    tensorboard: bool = True
    seed: int = 42
    phases: list[PhaseConfig] = Field(default_factory=lambda: [PhaseConfig()])
    teacher: TeacherConfig = Field(default_factory=TeacherConfig)


class EncodeConfig(Section):
    """Ray Data corpus encoding into Parquet sparse shards (``lexray.encode``, docs/indexing.md)."""

    batch_size: int = Field(32, ge=1, description="documents per forward pass (length-sorted within a shard)")
    num_actors: int = Field(2, ge=1, description="encoder replicas in the Ray Data actor pool")
    cpus_per_actor: float = Field(0.5, gt=0, description="Ray CPU reservation per actor; fractional so the read "
                                  "task still gets a CPU (two 1-CPU actors on 2 CPUs hang silently)")
    gpus_per_actor: float = Field(0.0, ge=0, description="> 0: actors run on CUDA")
    torch_threads: int | None = Field(None, ge=1, description="intra-op threads per actor; None = "
                                      "max(1, ceil(cpus_per_actor)) — one per reserved CPU, at least one")
    reader_cpus: float = Field(0.25, gt=0, description="Ray CPU reservation of the corpus read task")
    rows_per_shard: int | None = Field(
        None, ge=1, description="documents per Parquet shard (also the unit of work handed to one actor, and of "
        "resume). None = auto (lexray.encode.plan.auto_rows_per_shard): ceil(N / 32) for a corpus of N "
        "documents, clamped to [128, 1,000], so a small corpus is cut fine enough that no actor waits long on "
        "another's last shard (SciFact: 32 shards of 162 rows instead of five of 1,000 and one of 183) and a "
        "large one keeps 1,000-row shards; a folder being resumed keeps the value it was made with. Row groups "
        "inside a shard are sized by postings, so large corpora lose nothing")
    doc_top_k: int | None = Field(None, ge=1, description="keep the k largest weights per document; None = the "
                                  "encoder settings' doc_top_k (None there = keep all)")
    threshold: float = Field(0.0, ge=0, description="keep weights strictly greater than this")
    sort_by_length: bool = Field(True, description="length-sorted batches within a shard (less padding)")
    batching: Literal["length_sorted", "exact_length"] = Field(
        "length_sorted", description="exact_length: batch only documents of the same token length (no padding), "
        "so a document's weights do not depend on its batch neighbours and incremental re-encoding is "
        "bit-identical to a full one (jobs/reencode.py's default; docs/indexing.md)")
    backend: Literal["ray", "local"] = Field("ray", description="local = in-process, no Ray (tiny inputs, tests)")
    overwrite: bool = Field(False, description="replace an out_dir made by a different model/settings/corpus "
                            "instead of refusing")
    output_vocab: Literal["model", "collection", "full"] = Field(
        "model", description="the terms the head scores for the collection being encoded (queries and documents): "
        "model = what the model says (model.output_vocab, or the output_ids its lexray_encoder.json carries); "
        "collection = the token ids of this collection's corpus, recomputed (a checkpoint restricted to its "
        "training collection can then produce this collection's words); full = all of |V|")


class IndexConfig(Section):
    """DuckDB merge of shards into an inverted index."""

    quant_bits: int = 8
    memory_limit: str = "2GB"
    lucene_tokens: Literal["vocab", "id"] = Field(
        "vocab", description="terms of Lucene impact indexes: the tokenizer's token strings (Anserini's SPLADE "
        "convention: Pyserini's --impact --encoder can search the index) or decimal term ids")
    keep_lucene_collection: bool = Field(
        False, description="keep the JsonVectorCollection export (lucene.collection/ beside lucene/)")
    threads: int | None = None
    temp_directory: str | None = None
    doc_weighting: Literal["none", "idf", "sqrt_idf"] = Field(
        "none", description="CAI document weighting (arXiv:2211.03988 §3.2.2, Eq. 6-7): idf = log(N / N_t), 1 where "
        "N_t = 0 (the paper's); sqrt_idf = its square root (CAI's public code's default). Applied at search time "
        "on the query side, which equals weighting documents (lexray.index.weighting)")
    idf_source: Literal["tokens", "postings"] = Field(
        "tokens", description="N_t of doc_weighting: tokens = documents whose text contains token t (the paper's; "
        "tokenized with the encoder's tokenizer, untruncated); postings = the term's posting count in the index")


class SeismicConfig(Section):
    """Seismic (pyseismic-lsr) approximate search, ``eval.backend: seismic`` (see lexray.index.seismic)."""

    n_postings: int = 3500
    centroid_fraction: float = 0.1
    summary_energy: float = 0.4
    query_cut: int = 20
    heap_factor: float = 0.8
    threads: int | None = None


class EvalConfig(Section):
    """Retrieval and evaluation. ``backend: seismic`` searches with Seismic (approximate) and also exactly, to
    report its recall@10 against the exact top-10."""

    top_k: int = 1000
    query_batch_size: int = 256
    backend: Literal["exact", "lucene", "both", "seismic"] = "exact"
    seismic: SeismicConfig = Field(default_factory=SeismicConfig)
    metrics: list[str] = Field(default_factory=lambda: ["nDCG@10", "MRR@10", "R@100", "R@1000"])
    cache: bool = Field(True, description="the training jobs' zero-shot row: reuse a cached evaluation of the same "
                        "model, settings, collection and code (lexray.eval.cache); false = evaluate again")
    cache_dir: str | None = Field(None, description="folder of cached evaluations; None = outputs/cache/eval")
    dense_ann: Literal["none", "faiss"] = Field("none", description="dense models (model.dense): also search with "
                                                "faiss HNSW (faiss-cpu) and report its recall@10 against the exact "
                                                "top-10; its metrics become the headline")
    transfer: list[TransferConfig] = Field(
        default_factory=list, description="collections the training jobs also evaluate the trained model on "
        "after training (out of domain; lexray.workflows.evaluate_transfer); empty = none")

    @model_validator(mode="after")
    def _depth_covers_cut_offs(self) -> EvalConfig:
        """A run of ``top_k`` documents cannot score a metric cut at a deeper rank (issue 24: ``eval.top_k=1``
        reported R@100 = 0.889)."""
        import re

        if self.top_k < 1:
            raise ValueError(f"eval.top_k must be >= 1, got {self.top_k}")
        cuts = [(m, int(k.group(1))) for m in self.metrics if (k := re.search(r"@(\d+)$", m.strip()))]
        deeper = [m for m, k in cuts if k > self.top_k]
        if deeper:
            raise ValueError(f"eval.top_k={self.top_k} is below the cut-off of eval.metrics {', '.join(deeper)}: "
                             f"set eval.top_k >= {max(k for _, k in cuts)} or drop those metrics")
        return self

    @model_validator(mode="after")
    def _transfer_names_unique(self) -> EvalConfig:
        labels = [t.label for t in self.transfer]
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise ValueError(f"eval.transfer: two entries are named {', '.join(dup)} (each writes "
                             f"eval/transfer/<name>/): give them distinct 'name's")
        return self


class StoreConfig(Section):
    """Versioned collection store and scheduled re-encoding (``lexray.store``, jobs/reencode.py)."""

    keep_versions: int = Field(3, ge=1, description="published index versions kept (current included); older "
                               "ones and the shards only they use are deleted")
    validate_queries: int = Field(20, ge=0, description="queries (of data.split, first N in file order) whose "
                                  "top-k on the new version must equal an exact scoring of the live shards")
    validate_k: int = Field(100, ge=1, description="k of that check")


class TuneConfig(Section):
    """A hyper-parameter search's data and cadence (``jobs/tune.py``, :mod:`lexray.tune`, docs/tuning.md). What
    is searched, the objective and the scheduler live in the search space file (``tune_spaces/*.yaml``)."""

    dev_queries: int = Field(100, ge=1, description="queries of data.train_split carved off as the dev split "
                             "(lexray.data.splits): never trained on, never mined")
    dev_seed: int = Field(0, description="seed of the dev split rule")
    dev_depth: int = Field(10, ge=1, description="BM25 candidates per dev query; with the dev positives they form "
                           "the dev corpus each trial ranks")
    eval_every: int = Field(10, ge=1, description="optimizer steps between dev evaluations of a trial; each is "
                            "one Tune result (ASHA's time unit is the step)")
    eval_batch_size: int = Field(32, ge=1, description="texts per forward pass in the dev evaluation")
    flops_budgets: list[float] | None = Field(None, description="FLOPS budgets of the catalogue (one recipe "
                                              "each: the best dev nDCG@10 within it); None = one per Pareto point")
    test_entries: int = Field(2, ge=0, description="catalogue entries (best dev nDCG@10 first) evaluated once on "
                              "data.split at the end")
    cpus_per_trial: float | None = Field(None, gt=0, description="CPUs one trial holds; None = train.num_workers "
                                         "× train.cpus_per_worker")
    max_failures: int = Field(0, ge=0, description="times Ray Tune retries a failed trial (its trainable process "
                              "killed, its node lost, or its trainer out of train.max_failures); the retry resumes "
                              "the trial's trainer from its latest checkpoint. 0 (default): a failed trial is "
                              "recorded as failed at once; a trial that fails by itself (collapse guard, a "
                              "rejected value) would fail again on every retry. A killed training worker inside a "
                              "trial is train.max_failures' job")


class LexrayConfig(Section):
    """Root of a recipe."""

    name: str = "run"
    out_dir: str | None = None
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    encode: EncodeConfig = Field(default_factory=EncodeConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    hybrid: HybridConfig = Field(default_factory=HybridConfig)
    vt: VTConfig = Field(default_factory=VTConfig)
    cai: CaiConfig = Field(default_factory=CaiConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    tune: TuneConfig = Field(default_factory=TuneConfig)

    @model_validator(mode="before")
    @classmethod
    def _deprecated_seed(cls, data: Any) -> Any:
        """Read the former top-level ``seed`` (it seeded only hard-negative mining) as ``data.mining_seed``."""
        if not isinstance(data, dict) or "seed" not in data:
            return data
        data = dict(data)
        seed = data.pop("seed")
        section = dict(data.get("data") or {})
        if "mining_seed" in section and section["mining_seed"] != seed:
            raise ValueError(f"'seed' ({seed!r}) is the deprecated name of data.mining_seed "
                             f"({section['mining_seed']!r}): set only data.mining_seed")
        log.warning("config key 'seed' is deprecated: it seeds hard-negative mining only; read as "
                    "data.mining_seed=%r (set that key instead; train.seed seeds training)", seed)
        section["mining_seed"] = seed
        data["data"] = section
        return data


def load_config(path: str | Path | None = None, overrides: list[str] | None = None,
                base: dict[str, Any] | None = None, require_model: bool = True) -> LexrayConfig:
    """Build a :class:`LexrayConfig` from ``base`` (an embedded default), a YAML recipe and ``--set`` overrides.

    ``require_model``: the caller loads a model, so the result must name one (:meth:`ModelConfig.require_source`);
    False for commands that use no model (``lexray index``).

    Raises:
        ConfigError: unknown key, wrong type or malformed YAML; the message names the file (or ``--set``) and
            the dotted key. With ``require_model``, no ``model.name_or_path`` (nor ``model.random_init``).
    """
    data: dict[str, Any] = json.loads(json.dumps(base)) if base else {}
    source = "<embedded default>"
    if path is not None:
        data = deep_merge(data, read_yaml(path))
        source = str(path)
    try:
        cfg = LexrayConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_errors(e, source)) from None
    cfg = apply_overrides(cfg, parse_overrides(overrides))
    if require_model:
        cfg.model.require_source(source if not overrides else f"{source} with --set overrides")
    return cfg


_RENAMED = {"seed": "data.mining_seed"}  # deprecated key -> its name now (LexrayConfig._deprecated_seed for recipes)


def apply_overrides(cfg: LexrayConfig, pairs: list[tuple[str, Any]], source: str = "--set overrides"
                    ) -> LexrayConfig:
    """``cfg`` with dotted keys set to values (``[("train.phases.0.lr", 1e-4)]``), validated again.

    Raises:
        ConfigError: unknown key, a key through a non-section, or an invalid value; names ``source`` and the key.
    """
    if not pairs:
        return cfg
    dumped = cfg.model_dump(mode="json")
    for key, value in pairs:
        if key in _RENAMED:
            log.warning("config key '%s' is deprecated: set %s instead", key, _RENAMED[key])
            key = _RENAMED[key]
        set_dotted(dumped, key, value, f"{source}: {key}" if source != "--set overrides" else f"--set {key}")
    try:
        return LexrayConfig.model_validate(dumped)
    except ValidationError as e:
        raise ConfigError(format_errors(e, source)) from None


