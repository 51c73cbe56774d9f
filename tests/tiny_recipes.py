"""The tiny random-init model and recipe that the training, Tune and multi-node tests share.

``TINY_LLAMA`` is a ``model.random_init`` block: a 2-layer Llama of hidden size 32 over splade-tiny's tokenizer
(|V| = 30,522), so that a training step takes well under a second on one CPU and no weights are loaded.
``tiny_recipe`` builds a whole recipe around it: one hard-negative phase of 4 steps of 4 examples on 50 SciFact
documents, with a Tune block, each part overridable. Importable from any test module (``pythonpath`` in
pyproject.toml); tests that start a job write it to a file with ``yaml.safe_dump``.
"""

from __future__ import annotations

TINY_LLAMA = {"architecture": "llama", "tokenizer": "shared:models/splade-tiny", "hidden_size": 32,
              "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
              "max_position_embeddings": 64}


def tiny_recipe(name: str, *, random_init: dict | None = None, train: dict | None = None,
                phase: dict | None = None, encode: dict | None = None, tune: dict | None = None) -> dict:
    """A recipe (a dict for ``LexrayConfig.model_validate`` or ``yaml.safe_dump``) around :data:`TINY_LLAMA`;
    each keyword's keys replace or add to that part (``phase``: the one phase of ``train.phases``)."""
    return {
        "name": name,
        "model": {"random_init": {**TINY_LLAMA, **(random_init or {})}, "query_max_length": 16,
                  "doc_max_length": 32},
        "data": {"dataset": "shared:datasets/scifact", "max_docs": 50},
        "train": {"num_workers": 1, "cpus_per_worker": 0.9, "log_every": 1, "checkpoint_every": 2, **(train or {}),
                  "phases": [{"name": "ft", "data": "hard_negatives", "max_steps": 4, "global_batch_size": 4,
                              "num_negatives": 1, "lr": 1.0e-4, "query_max_length": 12, "doc_max_length": 24,
                              "max_train_examples": 32, **(phase or {})}]},
        "encode": {"batch_size": 64, "rows_per_shard": 25, "doc_top_k": 64, **(encode or {})},
        "tune": {"dev_queries": 8, "dev_depth": 3, "eval_every": 2, "test_entries": 1, **(tune or {})},
    }
