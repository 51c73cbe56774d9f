"""The ``lexray`` console command: one subcommand per job, dispatched from a table.

    lexray evaluate --model ../shared/models/splade-tiny --dataset ../shared/datasets/scifact \\
        --dataset ../shared/datasets/cranfield --out outputs/eval
    lexray train-laconic --config jobs/configs/laconic-1b.yaml
    lexray <command> --help

Adding a command is one row of :data:`COMMANDS`: ``(name, "module:function", job file, help)``. The function
takes the argument list and returns a result (the jobs' ``main(argv)``). Commands whose module is not in this
build yet run ``jobs/<job file>`` from the source checkout when it exists (``python jobs/x.py`` and
``ray job submit -- python jobs/x.py`` keep working either way: the job files call the same functions).

Errors: a failing command prints one line, ``lexray <command>: error: <message>``, and exits with status 1;
``--debug`` (anywhere on the command line) shows the traceback instead. Ctrl-C exits with 130.
``--verbose`` (anywhere) keeps every library's own console output (lexray.console).
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple

from lexray.console import quiet_console


class Command(NamedTuple):
    name: str
    target: str  # "module:function" taking argv (list[str]) and returning the result
    job_file: str  # jobs/<file>: the script form of the command (fallback while the module is not built)
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("train-laconic", "lexray.commands.train:train_laconic", "train_laconic.py",
            "LACONIC two-phase curriculum on a decoder LLM, then evaluation"),
    Command("train-splade", "lexray.commands.train:train_splade", "train_splade.py",
            "fine-tune an MLM SPLADE encoder; zero-shot vs fine-tuned"),
    Command("evaluate", "lexray.commands.evaluate:main", "evaluate.py",
            "model or BM25 on one or more BEIR collections -> metrics table, metrics.json, per-query metrics"),
    Command("encode", "lexray.commands.encode:main", "encode_corpus.py", "corpus -> Parquet sparse shards (Ray Data)"),
    Command("index", "lexray.commands.index:main", "build_index.py", "shards -> inverted index (DuckDB)"),
    Command("tune", "lexray.commands.tune:main", "tune.py", "hyper-parameter search (Ray Tune)"),
    Command("reencode", "lexray.commands.reencode:main", "reencode.py", "re-encode a corpus with a new checkpoint"),
    Command("migrate-vocab", "lexray.commands.migrate_vocab:main", "migrate_vocab.py",
            "move an index or model to another vocabulary"),
    Command("vt-ablation", "lexray.commands.vt_ablation:main", "vt_ablation.py",
            "VT Table 3 at SciFact scale: every row (migration + the same short SPLADE training) -> table.md"),
    Command("pyserini", "lexray.index.lucene.pyserini_cli:main", "",
            "run a Pyserini module with lexray's Java set-up (e.g. pyserini.search.lucene --impact ...)"),
)
BY_NAME = {c.name: c for c in COMMANDS}


class CommandUnavailable(RuntimeError):
    pass


def resolve(cmd: Command):
    """The callable of a command: its module function, else its job file's ``main`` from the checkout."""
    module, func = cmd.target.split(":")
    try:
        return getattr(importlib.import_module(module), func)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name):
            raise  # a dependency of the module is missing: report that, not "unavailable"
    from lexray.paths import REPO_ROOT

    job = REPO_ROOT / "jobs" / cmd.job_file if cmd.job_file else None
    if job is None or not job.is_file():
        raise CommandUnavailable(f"'{cmd.name}' is not available in this build ({module} is missing"
                                 + (f" and jobs/{cmd.job_file} does not exist)" if cmd.job_file else ")"))
    import runpy

    ns = runpy.run_path(str(job), run_name="lexray_job")
    if "main" not in ns:
        raise CommandUnavailable(f"jobs/{cmd.job_file} has no main(argv) function")
    return ns["main"]


def _usage() -> str:
    width = max(len(c.name) for c in COMMANDS)
    lines = ["usage: lexray [--debug] [--verbose] <command> [args]   (lexray <command> --help for its options)", "",
             "commands:"]
    lines += [f"  {c.name:<{width}}  {c.help}" for c in COMMANDS]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    verbose = "--verbose" in argv
    argv = [a for a in argv if a not in ("--debug", "--verbose")]
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    cmd = BY_NAME.get(name)
    if cmd is None:
        print(f"lexray: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    quiet_console(verbose=verbose)
    try:
        fn = resolve(cmd)
        fn(rest)
    except SystemExit as e:  # argparse --help / usage errors
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:
        print(f"lexray {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - one clear line; the traceback with --debug
        if debug:
            raise
        msg = " ".join(str(e).split()) or type(e).__name__
        print(f"lexray {name}: error: {msg} ({type(e).__name__}; --debug shows the traceback)", file=sys.stderr)
        return 1
    return 0


def run_as_script(name: str) -> int:
    """``python jobs/<job>.py args`` = ``lexray <name> args`` (same one-line errors and ``--debug``)."""
    return main([name, *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
