"""End-to-end workflows behind the training jobs: prepare data → train (Ray Train) → encode, index, evaluate.

Why here and not in ``jobs/``: the jobs stay thin (parse config → call this → print), and the same sequence is
reused by ``jobs/train_laconic.py``, ``jobs/train_splade.py`` and tests.

Output folder (``cfg.out_dir``, default ``outputs/<cfg.name>``)::

    config.resolved.yaml
    hardneg/<dataset>.<split>.bm25.jsonl     BM25-mined hard negatives (when a phase needs them and has none)
    hardneg/<...>.teacher-<kind>-<key>.jsonl the same groups with a distillation teacher's scores (train.teacher)
    bm25-index/                              the Lucene BM25 index used for mining
    train/<name>/                            Ray Train storage: checkpoints, result files, lexray/ (metrics.jsonl,
                                             TensorBoard, merged phase encoders)
    eval/zero-shot/, eval/trained/           evaluation folders (lexray.eval.pipeline); the zero-shot one holds
                                             copies of a cached evaluation (lexray.eval.cache, eval.cache)
    eval/transfer/<name>/                    the trained model on each eval.transfer collection (out of domain)
    eval/transfer/<name>/zero-shot/          the starting model on it (an entry's zero_shot; through the cache)
    metrics.json, metrics.md                 the final table: one row per evaluated model on data.dataset, then
                                             one per transfer evaluation (its record carries "transfer")
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

from lexray.config import ApcConfig, ConfigError, DenseConfig, LexrayConfig, save_config
from lexray.paths import default_output_dir

log = logging.getLogger(__name__)


def output_dir(cfg: LexrayConfig) -> Path:
    """``cfg.out_dir`` or ``outputs/<cfg.name>`` (absolute)."""
    return Path(cfg.out_dir).resolve() if cfg.out_dir else (default_output_dir() / cfg.name).resolve()


def bm25_index(dataset: Path, out: Path, on_error: str = "fail") -> Path:
    """``out/bm25-index``: the dataset's Lucene BM25 index, built on first use and reused after (mining, a Tune
    search's dev set). Raises what :func:`lexray.index.lucene.build_bm25_index` raises."""
    from lexray.data.beir import iter_id_text
    from lexray.index.lucene import ensure_bm25_index

    return ensure_bm25_index(lambda: iter_id_text(dataset, on_error=on_error), out / "bm25-index")


def prepare_hard_negatives(cfg: LexrayConfig, out: Path, exclude_query_ids: Collection[str] | None = None,
                           tag: str = "") -> LexrayConfig:
    """Mine BM25 hard negatives for every ``hard_negatives`` phase that has no ``data_path``.

    Negatives come from ``cfg.data.dataset``'s ``cfg.data.train_split`` queries, BM25 (Anserini defaults) over
    the same corpus, ``data.mining_pool`` (default: the largest ``num_negatives``) per query (see
    :mod:`lexray.data.mining` for the rank window); each epoch samples a phase's ``num_negatives`` of them. The file
    is reused when it already exists. Returns a config whose phases point at the mined file. When every such
    phase reads only its first ``max_train_examples`` groups (a smoke run), only the largest of those counts is
    mined: the same groups as the head of a full file (per-query randomness), in a file named ``.first<N>``.
    ``exclude_query_ids`` (a dev split) are neither mined nor trained on; ``tag`` names such a file apart.

    A phase that distills (``phase.distill``, or loss ``margin_mse``) points at the same groups scored by
    ``train.teacher`` (:func:`lexray.train.teacher.teacher_scores_cached`: computed once, cached beside the mined
    file, keyed by teacher, settings, collection and negatives).

    Raises:
        ConfigError: a phase that needs teacher scores, with mined negatives and ``train.teacher.kind: none``.
    """
    needs = [i for i, p in enumerate(cfg.train.phases) if p.data == "hard_negatives" and p.data_path is None]
    if not needs:
        return cfg
    from lexray.data.beir import resolve_dataset_dir
    from lexray.data.mining import mine_bm25_negatives, write_groups_jsonl

    dataset = resolve_dataset_dir(cfg.data.dataset)
    n_neg = max(cfg.train.phases[i].num_negatives for i in needs)
    if cfg.data.mining_pool is not None:
        if cfg.data.mining_pool < n_neg:
            raise ConfigError(f"data.mining_pool {cfg.data.mining_pool} is below a phase's num_negatives {n_neg}")
        n_neg = cfg.data.mining_pool
    limits = [cfg.train.phases[i].max_train_examples for i in needs]
    max_groups = None if None in limits else max(limits)
    first = "" if max_groups is None else f".first{max_groups}"
    path = out / "hardneg" / f"{dataset.name}.{cfg.data.train_split}{tag}.bm25.n{n_neg}{first}.jsonl"
    if not path.is_file():
        index_dir = bm25_index(dataset, out, cfg.data.on_error)
        groups, report = mine_bm25_negatives(dataset, index_dir, split=cfg.data.train_split,
                                             num_negatives=n_neg, seed=cfg.data.mining_seed,
                                             exclude_query_ids=exclude_query_ids, max_groups=max_groups)
        n = write_groups_jsonl(groups, path)
        print(f"mined BM25 hard negatives: {n} groups -> {path}\n{report.summary()}")
    scored = _teacher_scored(cfg, [i for i in needs if cfg.train.phases[i].needs_teacher], path, dataset, out)
    phases = [p.model_copy(update={"data_path": str(scored if p.needs_teacher else path)}) if i in needs else p
              for i, p in enumerate(cfg.train.phases)]
    return cfg.model_copy(update={"train": cfg.train.model_copy(update={"phases": phases})})


def _teacher_scored(cfg: LexrayConfig, phases: list[int], negatives: Path, dataset: Path, out: Path) -> Path | None:
    """The mined ``negatives`` with ``train.teacher``'s scores when a phase in ``phases`` needs them."""
    if not phases:
        return None
    if cfg.train.teacher.kind == "none":
        raise ConfigError(f"train.phases.{phases[0]} needs teacher scores (distill.loss or loss margin_mse) and its "
                          f"negatives are mined: set train.teacher.kind (bm25 or sparse), or give the phase a "
                          f"data_path whose groups carry positive_scores and negative_scores")
    from lexray.train.teacher import teacher_scores_cached

    return teacher_scores_cached(negatives, dataset, cfg.train.teacher, bm25_index=out / "bm25-index")[0]


def trained_model_config(cfg: LexrayConfig, model_dir: Path) -> LexrayConfig:
    """The config whose model is the trained checkpoint (its ``lexray_encoder.json`` carries the contract)."""
    model = cfg.model.model_copy(update={
        "name_or_path": str(model_dir), "random_init": None, "mlm_head_rescale": 1.0,
        # the rescale and APC's bias shift are already in the trained weights: applying them again would shift twice
        "apc": ApcConfig(),
        # settings travel in the checkpoint; do not re-apply recipe overrides on top of them
        "query_max_length": None, "doc_max_length": None, "query_prefix": None, "doc_prefix": None,
        "inference_free_queries": None, "chunk_size": cfg.model.chunk_size,
        # a dense model's pooling, similarity and bridge travel in its lexray_dense.json likewise
        "dense": DenseConfig(shard_dtype=cfg.model.dense.shard_dtype) if cfg.model.dense is not None else None})
    return cfg.model_copy(update={"model": model})


def train_and_evaluate(cfg: LexrayConfig, evaluate: bool = True, zero_shot: bool = False) -> dict:
    """Run the recipe: mine negatives if needed, train every phase on Ray Train, then evaluate.

    Args:
        cfg: resolved configuration.
        evaluate: encode the corpus with the trained model, index, search and evaluate on ``cfg.data.split``.
        zero_shot: also evaluate the starting model first (same pipeline), so the table shows the gain.

    Returns:
        ``{"train": TrainResult, "rows": [metrics.json records], "out_dir": Path}``.

    Raises:
        ConfigError: ``cfg.model`` names no model (``model.name_or_path``).
    """
    from lexray.eval.pipeline import evaluate_dense, evaluate_sparse
    from lexray.eval.report import write_markdown
    from lexray.train.loop import run_training

    cfg.model.require_source()
    if evaluate:
        check_transfer(cfg)  # before hours of training, not after
    out = output_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    cfg = cfg.model_copy(update={"out_dir": str(out)})
    save_config(cfg, out)
    rows = []
    evaluate_model = evaluate_dense if cfg.model.dense is not None else evaluate_sparse
    if zero_shot:
        zero_shot_eval = evaluate_model
        if cfg.model.dense is None and cfg.eval.cache:
            # cached by model, settings, collection and code (eval.cache): a rerun pays nothing
            from lexray.eval.cache import cached_evaluate_sparse as zero_shot_eval
        rows.append(zero_shot_eval(cfg, out / "eval" / "zero-shot",
                                   retriever_name=f"{_model_label(cfg)} (zero-shot)"))
    cfg = prepare_hard_negatives(cfg, out)
    save_config(cfg, out)
    result = run_training(cfg, storage_path=cfg.train.storage_path or out / "train")
    print(f"trained model: {result.model_dir}")
    card = result.model_dir is not None and cfg.model.dense is None  # model cards: sparse encoders only
    if card:
        _card(cfg, result.model_dir)
    if evaluate and result.model_dir is not None:
        ecfg = trained_model_config(cfg, result.model_dir)
        rows.append(evaluate_model(ecfg, out / "eval" / "trained", retriever_name=f"{cfg.name} (trained)"))
        _eval_to_tensorboard(cfg, result, rows, zero_shot)
        if card:
            from lexray.models.card import update_model_card

            update_model_card(result.model_dir, metrics=[rows[-1]])
        rows += evaluate_transfer(cfg, ecfg, out, zero_shot=zero_shot)
    if rows:
        import json

        (out / "metrics.json").write_text(json.dumps(rows if len(rows) > 1 else rows[0], indent=2) + "\n")
        title = f"{cfg.name}: {cfg.data.dataset} {cfg.data.split}"
        if cfg.eval.transfer and evaluate:
            title += " (then out of domain: " + ", ".join(t.label for t in cfg.eval.transfer) + ")"
        write_markdown(out / "metrics.md", rows, title=title, efficiency=("avg_query_nnz", "index_avg_nnz_per_doc"))
    return {"train": result, "rows": rows, "out_dir": out}


def check_transfer(cfg: LexrayConfig) -> None:
    """Each ``eval.transfer`` collection exists with its split's queries and qrels.

    Raises:
        ConfigError: names the entry's key (``eval.transfer.<i>.dataset`` or ``.split``) and what is missing.
    """
    from lexray.config import ConfigError
    from lexray.data.beir import resolve_dataset_dir

    for i, t in enumerate(cfg.eval.transfer):
        try:
            d = resolve_dataset_dir(t.dataset)
        except (FileNotFoundError, ValueError) as e:
            raise ConfigError(f"eval.transfer.{i}.dataset: {t.dataset!r}: {e}") from None
        missing = [f for f in ("corpus.jsonl", "queries.jsonl") if not (d / f).is_file()]
        if missing:
            raise ConfigError(f"eval.transfer.{i}.dataset: {d} is not a BEIR folder (no {', '.join(missing)})")
        if not (d / "qrels" / f"{t.split}.tsv").is_file():
            raise ConfigError(f"eval.transfer.{i}.split: {d} has no qrels/{t.split}.tsv")


def transfer_config(cfg: LexrayConfig, t) -> LexrayConfig:
    """``cfg`` evaluating on the transfer entry ``t`` (:class:`lexray.config.TransferConfig`): its collection,
    split, on_error, max_docs and output vocabulary (``encode.output_vocab``)."""
    data = cfg.data.model_copy(update={"dataset": t.dataset, "split": t.split, "on_error": t.on_error,
                                       "max_docs": t.max_docs})
    encode = cfg.encode.model_copy(update={"output_vocab": t.output_vocab})
    return cfg.model_copy(update={"data": data, "encode": encode})


def evaluate_transfer(cfg: LexrayConfig, trained_cfg: LexrayConfig, out: Path, zero_shot: bool = False) -> list[dict]:
    """Evaluate the trained model (``trained_cfg``, :func:`trained_model_config`) on every ``eval.transfer``
    collection, through the same pipeline as the in-domain row, into ``out/eval/transfer/<name>/``; with
    ``zero_shot`` and an entry's ``zero_shot``, the starting model (``cfg``) too, into ``<name>/zero-shot/``
    (through the evaluation cache when ``eval.cache``).

    Returns:
        one metrics.json record per evaluation, each with ``"transfer"``: the entry's name, dataset, split,
        output_vocab, on_error, max_docs and ``skipped_docs`` (corpus rows skipped under on_error=skip).
    """
    from lexray.eval.pipeline import evaluate_dense, evaluate_sparse

    rows = []
    dense = cfg.model.dense is not None
    for t in cfg.eval.transfer:
        d = out / "eval" / "transfer" / t.label
        runs = []
        if zero_shot and t.zero_shot:
            zero_shot_eval = evaluate_dense if dense else evaluate_sparse
            if not dense and cfg.eval.cache:
                from lexray.eval.cache import cached_evaluate_sparse as zero_shot_eval
            runs.append((zero_shot_eval, transfer_config(cfg, t), d / "zero-shot", f"{_model_label(cfg)} (zero-shot)"))
        runs.append((evaluate_dense if dense else evaluate_sparse, transfer_config(trained_cfg, t), d,
                     f"{cfg.name} (trained)"))
        for fn, tcfg, folder, label in runs:
            print(f"[lexray] out of domain: {label} on {t.dataset} {t.split} (encode.output_vocab={t.output_vocab}, "
                  f"data.on_error={t.on_error})", flush=True)
            rec = fn(tcfg, folder, retriever_name=label)
            skipped = rec.get("efficiency", {}).get("encode_docs_skipped")
            if skipped:
                print(f"[lexray] {t.label}: {skipped} documents skipped "
                      f"({rec['efficiency'].get('encode_skipped_by_reason')})", flush=True)
            rows.append({**rec, "transfer": {**t.model_dump(mode="json"), "name": t.label,
                                             "skipped_docs": skipped, "folder": str(folder)}})
    return rows


def _eval_to_tensorboard(cfg: LexrayConfig, result, rows: list[dict], zero_shot: bool) -> None:
    """The evaluation rows (zero-shot first when run, then trained) into the training run's TensorBoard."""
    if not cfg.train.tensorboard or result.run_dir is None:
        return
    from lexray.train.metrics import write_eval_scalars

    labels = (["eval-zero-shot"] if zero_shot else []) + ["eval-trained"]
    for label, rec in zip(labels, rows, strict=True):
        write_eval_scalars(result.run_dir, rec, label)


def _card(cfg: LexrayConfig, model_dir: Path) -> None:
    """Record base model, training data and recipe in the trained model's README.md card."""
    from lexray.models.card import update_model_card

    data = [cfg.data.dataset + f" ({cfg.data.train_split} split)"]
    data += [f"{p.name}: {p.data}" + (f" ({p.data_path})" if p.data_path else "") for p in cfg.train.phases]
    update_model_card(model_dir, name=cfg.name, base_model=_model_label(cfg) if cfg.model.name_or_path is None
                      else str(cfg.model.name_or_path), training_data=data, recipe=cfg.model_dump(mode="json"))


def _model_label(cfg: LexrayConfig) -> str:
    """A short display name of the starting model: its folder or file name, or the random-init architecture."""
    if cfg.model.name_or_path:
        return Path(str(cfg.model.name_or_path)).name
    return f"random-init {cfg.model.random_init.architecture}"
