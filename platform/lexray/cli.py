"""The ``lexray`` console command: one subcommand per job, dispatched from a table.

    lexray evaluate --model ../shared/models/splade-tiny --dataset ../shared/datasets/scifact \\
        --dataset ../shared/datasets/cranfield --out outputs/eval
    lexray train-laconic --config jobs/configs/laconic-1b.yaml
    lexray <command> --help

Adding a command is one row of :data:`COMMANDS`: ``(name, "module:function", job file, help)``. The function
(in :mod:`lexray.commands`) takes the argument list and returns a result. Every ``jobs/<job file>`` is the same
wrapper, ``raise SystemExit(run_job(__file__))``, so ``python jobs/x.py``, ``ray job submit -- python jobs/x.py``
and ``lexray x`` run the same code with the same errors.

Errors: a failing command prints one line, ``lexray <command>: error: <message>``, and exits with status 1 (or
the ``exit_status`` the exception carries: ``lexray reencode`` exits 3 when another run holds the store); bad
flags are argparse's usage error, status 2. ``--debug`` (anywhere on the command line) shows the traceback
instead. Ctrl-C exits with 130, SIGTERM (``ray job stop``, ``kill``, a scheduler's stop) with 143 after the same
clean-up as Ctrl-C (:class:`Terminated`). ``--verbose`` (anywhere) keeps every library's own console output
(lexray.console).
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple


class Command(NamedTuple):
    name: str
    target: str  # "module:function" taking argv (list[str]) and returning the result
    job_file: str  # jobs/<file>: the script form of the command ("" when it has none)
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("train-laconic", "lexray.commands.train:train_laconic", "train_laconic.py",
            "train a decoder LLM as a LACONIC sparse encoder (two-phase curriculum), then evaluate it beside "
            "its zero-shot score"),
    Command("train-splade", "lexray.commands.train:train_splade", "train_splade.py",
            "fine-tune an MLM SPLADE encoder (InfoNCE or MarginMSE + FLOPS), then evaluate zero-shot vs "
            "fine-tuned"),
    Command("train-dense", "lexray.commands.train_dense:main", "train_dense.py",
            "fine-tune a dense bi-encoder with a LexSemBridge (--bridge none|slr|llr|clr; cosine InfoNCE), then "
            "evaluate zero-shot vs fine-tuned"),
    Command("make-tasks", "lexray.commands.make_tasks:main", "make_tasks.py",
            "LexSemBridge's fine-grained retrieval tasks (Keyword, Part-of-Passage 16/32/64, Query) from a BEIR "
            "collection, as seeded BEIR folders"),
    Command("lsb-ablation", "lexray.commands.lsb_ablation:main", "lsb_ablation.py",
            "LexSemBridge ablation at SciFact scale (Tables 1, 4, 5, 6): train-dense + evaluate per row -> table"),
    Command("evaluate", "lexray.commands.evaluate:main", "evaluate.py",
            "encode, index, search and score a model (or BM25) on one or more BEIR collections -> metrics "
            "table, metrics.json, per-query metrics"),
    Command("search", "lexray.commands.search:main", "search.py",
            "ask an index queries (text, a queries file or stdin) -> ranked doc ids, scores, titles, snippets; "
            "--explain, --format text|json|trec"),
    Command("encode", "lexray.commands.encode:main", "encode_corpus.py",
            "encode a BEIR corpus into Parquet sparse shards with Ray Data (resumable)"),
    Command("index", "lexray.commands.index:main", "build_index.py",
            "merge Parquet sparse shards into an inverted index (DuckDB)"),
    Command("tune", "lexray.commands.tune:main", "tune.py",
            "hyper-parameter search with Ray Tune: trials fine-tune and score on a dev split -> trials table, "
            "Pareto front, recipe catalogue, test scores"),
    Command("reencode", "lexray.commands.reencode:main", "reencode.py",
            "incremental re-encoding of a collection into a versioned store: only new/changed documents, "
            "build, validate, atomic switch; --rollback"),
    Command("prune", "lexray.commands.prune:main", "prune.py",
            "static pruning of an index (per-term and/or per-document top-k) -> a new index with its provenance"),
    Command("verify", "lexray.commands.verify:main", "verify.py",
            "check an index (--index) or a collection store (--store) against the checksums lexray recorded"),
    Command("migrate-vocab", "lexray.commands.migrate_vocab:main", "migrate_vocab.py",
            "migrate a model to another vocabulary (Vocabulary Transfer) -> an encoder the other commands take"),
    Command("vt-ablation", "lexray.commands.vt_ablation:main", "vt_ablation.py",
            "VT Table 3 at SciFact scale: every row (migration + the same short SPLADE training) -> table.md"),
    Command("laconic-curve", "lexray.commands.laconic_curve:main", "laconic_curve.py",
            "the LACONIC compute curve: the main job's recipe over kept layers x training steps -> table.md"),
    Command("adapt-domain", "lexray.commands.adapt_domain:main", "adapt_domain.py",
            "CAI's AdaLM step: expand an MLM's vocabulary on a domain corpus, then continual MLM pre-training "
            "-> an adapted model folder and adapt_report.json"),
    Command("export-onnx", "lexray.commands.export_onnx:main", "",
            "export a sparse encoder to ONNX with the SPLADE pooling inside the graph (+ tokenizer, "
            "lexray_onnx.json), checked against PyTorch with onnxruntime"),
    Command("model-card", "lexray.commands.model_card:main", "",
            "rewrite a saved model's README.md card for the Hugging Face Hub (base model, datasets, "
            "architecture, model-index); --push-to-hub REPO_ID"),
    Command("cai-ablation", "lexray.commands.cai_ablation:main", "cai_ablation.py",
            "CAI Table 1 + Table 3 at SciFact scale and Cranfield: AdaLM, the same short SPLADE training, IDF / "
            "SPLADE-Doc / hybrid rows on a reused index -> table.md"),
    Command("pyserini", "lexray.index.lucene.pyserini_cli:main", "",
            "run a Pyserini module with lexray's Java set-up (e.g. pyserini.search.lucene --impact ...)"),
)
class Terminated(KeyboardInterrupt):
    """SIGTERM received: raised in the main thread, so a job cleans up exactly as on Ctrl-C.

    Why: ``ray job stop`` sends SIGTERM to the driver of a submitted job and SIGKILLs it 3 s later
    (``RAY_JOB_STOP_WAIT_TIME_S``), and Python's default for SIGTERM is to die on the spot: the encoder's lock
    stayed behind naming a dead pid and its manifest said ``running``, so the rerun of the same command was
    refused. As a KeyboardInterrupt, every clean-up path a Ctrl-C takes runs (the manifest says
    ``interrupted`` with its finished shards, locks and temporary files are removed, a Tune search keeps its
    state), and the rerun resumes. A job that starts its own local Ray gets Ray's SIGTERM handler instead,
    which stops that Ray and exits through SystemExit: the same clean-up.
    """


def _raise_terminated(signum, frame):
    raise Terminated(f"terminated by signal {signum} (SIGTERM)")


BY_NAME = {c.name: c for c in COMMANDS}
BY_JOB_FILE = {c.job_file: c for c in COMMANDS if c.job_file}
HELP_FLAGS = ("-h", "--help")


def resolve(cmd: Command) -> Callable[[list[str]], Any]:
    """The function of a command (imports its module)."""
    module, func = cmd.target.split(":")
    return getattr(importlib.import_module(module), func)


def _usage() -> str:
    width = max(len(c.name) for c in COMMANDS)
    lines = ["usage: lexray [--debug] [--verbose] <command> [args]   (lexray <command> --help for its options)", "",
             "commands:"]
    lines += [f"  {c.name:<{width}}  {c.help}" for c in COMMANDS]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run ``lexray [--debug] [--verbose] <command> [args]``; returns the exit status (module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    verbose = "--verbose" in argv
    argv = [a for a in argv if a not in ("--debug", "--verbose")]
    if not argv or argv[0] in HELP_FLAGS:
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    cmd = BY_NAME.get(name)
    if cmd is None:
        print(f"lexray: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    if not any(a in HELP_FLAGS for a in rest):  # --help prints and exits: no need to import transformers
        from lexray.console import quiet_console

        quiet_console(verbose=verbose)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main_thread else None
    try:
        result = resolve(cmd)(rest)
    except SystemExit as e:  # argparse --help / usage errors, or a command's own exit status
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Terminated:
        print(f"lexray {name}: terminated (SIGTERM); rerun the same command to resume", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"lexray {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - one clear line; the traceback with --debug
        if debug:
            raise
        msg = " ".join(str(e).split()) or type(e).__name__
        print(f"lexray {name}: error: {msg} ({type(e).__name__}; --debug shows the traceback)", file=sys.stderr)
        return getattr(e, "exit_status", 1)
    finally:
        if main_thread:  # None: a handler not set from Python; the default is the closest
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    # a command that returns an int (pyserini) returns its exit status; the others return their result
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


def run_job(job_file: str) -> int:
    """``python jobs/<file>.py args`` = ``lexray <command> args``, the command whose job file is ``<file>.py``.

    Raises:
        KeyError: the file is not a job file of :data:`COMMANDS`.
    """
    name = Path(job_file).name
    if name not in BY_JOB_FILE:
        raise KeyError(f"jobs/{name} is not the job file of any command in lexray.cli.COMMANDS")
    return main([BY_JOB_FILE[name].name, *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
