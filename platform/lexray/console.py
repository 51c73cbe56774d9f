"""What the console shows: lexray's own progress and results at the default level, everything with ``--verbose``.

One place for the output the user cannot act on, silenced at its cause where lexray controls the cause and
filtered only where a library cannot be told otherwise (each such filter names the one message it drops and why):

- weight-loading progress bars, Ray's token-auth notice, Ray Data's execution-plan INFO lines and its "Progress
  bars disabled" notice (lexray turns Ray Data's bars off on purpose and shows its own), Ray Train's per-report
  and per-checkpoint INFO lines: logger levels and switches; Ray Train's controller and set-up INFO lines: its
  public log level (:func:`ray_train_logging_config`, for ``RunConfig``);
- Ray's ``core_worker.cc … has constructor arguments in the object store and max_restarts > 0`` ERROR line
  (:data:`RAY_RESTART_NOTICE`): a filter, see there;
- DeepSpeed's "Setting accelerator to CPU" warning and peft's use of a deprecated transformers property (a
  FutureWarning): filters, see :func:`quiet_libraries`.

The choice reaches the Ray worker processes through :data:`VERBOSE_ENV` (set by :func:`quiet_console` in the
driver; local workers inherit the driver's environment and :func:`lexray.ray_utils.init_ray` passes it to a
cluster's); the worker side applies it in :func:`quiet_worker`, which lexray's worker entry points call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import warnings

VERBOSE_ENV = "LEXRAY_VERBOSE"
"""``"1"`` in a process started under ``lexray --verbose``: how the driver's choice reaches its Ray workers (set by
:func:`quiet_console`, read by :func:`quiet_worker`). Plumbing between lexray's own processes, not a setting."""

RAY_RESTART_NOTICE = re.compile(
    r"\[[^\[\]\n]*\] core_worker\.cc:\d+: Actor with class name: '[^'\n]*' and ID: '[0-9a-f]*' has constructor "
    r"arguments in the object store and max_restarts > 0\.[^\n]*\n?")
"""Ray's core worker logs this at ERROR, once per process, when it creates a restartable actor whose constructor
arguments are object references (ray-project/ray#53727). Both actors that trigger it in lexray's runs are made by
Ray with Ray's own arguments, so lexray cannot pass smaller ones:

- Ray Data's ``MapWorker`` (the ShardEncoder actor pool): Ray Data always ``ray.put``s the map transformer and
  the DataContext and passes their references, and defaults to ``max_restarts=-1``. Turning restarts off
  (``max_restarts=0``) would silence it but lose the actor fault tolerance a long encode on a cluster relies on.
- Ray Train's ``PreemptionWatcher`` (made by the TrainController actor): its arguments are the worker actors'
  handles, which count as references.

The references stay alive for the actors' whole lives (the driver's operator and the controller hold them), so
the restart the line warns about would work. The line is written by C++ code, directly to the process's stderr:
in the driver (Ray Data actors) :func:`filter_native_stderr` drops it, from the controller it arrives through
Ray's log streaming and :func:`filter_ray_worker_logs` drops it."""

_QUIET = {"console": False, "native_stderr": False}


def quiet_console(verbose: bool = False) -> None:
    """Silence output the user cannot act on, in this process (the driver) and, through the environment, in the
    Ray workers it starts. Real warnings and errors still show. ``verbose=True`` leaves every library at its
    default, here and in the workers."""
    if verbose:
        os.environ[VERBOSE_ENV] = "1"
        _QUIET["console"] = False
        return
    os.environ.pop(VERBOSE_ENV, None)
    _QUIET["console"] = True
    filter_native_stderr()  # before any library caches sys.stderr (transformers' handler, below)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # inherited by local Ray workers too
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    for name, level in (("ray._private.authentication.authentication_token_setup", logging.ERROR),
                        ("ray.data", logging.WARNING), ("ray.data._internal", logging.WARNING),
                        ("ray.data._internal.progress", logging.ERROR)):
        logging.getLogger(name).setLevel(level)
    quiet_libraries()


def quiet_worker() -> bool:
    """The worker side of :func:`quiet_console`, called at the start of a Ray worker's entry point (a Ray Train
    ``train_func``, an encoder actor's constructor): :func:`quiet_libraries` unless the driver ran with
    ``--verbose``. Returns whether it quieted."""
    if os.environ.get(VERBOSE_ENV) == "1":
        return False
    quiet_libraries()
    return True


def quiet_ray_train_reports() -> None:
    """:func:`quiet_worker` plus Ray Train's own INFO lines inside a training worker: V2 logs every
    ``ray.train.report`` ("Reporting training result …" with the whole metrics dict, once per rank and report,
    under a logger named after its module *file*) and every persisted checkpoint ("Checkpoint successfully
    created at …"), which bury lexray's one console line per logged step. Both loggers go to WARNING; a Ray
    without the modules is left alone. Called inside each Ray Train worker (lexray.train.loop)."""
    if not quiet_worker():
        return
    try:
        from ray.train.v2._internal.execution import context, storage
    except ImportError:
        return
    logging.getLogger(context.__file__).setLevel(logging.WARNING)
    logging.getLogger(storage.__name__).setLevel(logging.WARNING)


def ray_train_logging_config():
    """``RunConfig(logging_config=...)`` for a quiet console: Ray Train's own ``ray.train.*`` INFO lines on the
    console ("Requesting resources", "Attempting to start training worker group", "Started training worker group"
    and its rank table from the controller; "Setting up process group", "Checkpoint successfully created" from
    the workers) go to WARNING; Ray Train's log files keep every level. ``None`` (Ray's default, INFO) when
    :func:`quiet_console` did not quiet this process (``--verbose``, or lexray used as a library) or when this Ray
    has no ``ray.train.LoggingConfig``."""
    if not _QUIET["console"]:
        return None
    try:
        from ray.train import LoggingConfig
    except ImportError:
        return None
    return LoggingConfig(log_level="WARNING")


class _DropMessage(logging.Filter):
    """Drops the records of one logger whose message starts with one known text."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


DEEPSPEED_CPU_FALLBACK = "Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it."
"""DeepSpeed's WARNING when its accelerator probe finds none. lexray imports deepspeed only for
``train.strategy: deepspeed``, but transformers imports it wherever it is installed: ``save_pretrained`` unwraps
the model through accelerate's ``extract_model_from_parallel``, which runs ``from deepspeed import
DeepSpeedEngine`` (so every merged phase save in a training worker prints it). DeepSpeed's CPU fallback is the
right choice on a CPU machine; setting ``DS_ACCELERATOR`` instead would override DeepSpeed's own probe of ten
accelerator kinds (and be wrong for a GPU worker of a cluster whose driver has none)."""

GRADIENT_CHECKPOINTING_DEPRECATION = r"`is_gradient_checkpointing` is deprecated"
"""transformers' FutureWarning for its deprecated ``is_gradient_checkpointing`` property, which peft's
``PeftModel.__init__`` reads on every ``get_peft_model`` (every LoRA phase, in every worker). lexray does not
read the property; the fix belongs to peft."""


def quiet_libraries() -> None:
    """In this process: drop exactly :data:`DEEPSPEED_CPU_FALLBACK` (logger ``DeepSpeed``) and the FutureWarning
    :data:`GRADIENT_CHECKPOINTING_DEPRECATION` raised in ``transformers.modeling_utils``. Idempotent."""
    warnings.filterwarnings("ignore", message=GRADIENT_CHECKPOINTING_DEPRECATION, category=FutureWarning,
                            module=r"transformers\.modeling_utils")
    ds = logging.getLogger("DeepSpeed")  # the same object deepspeed's LoggerFactory configures later
    if not any(isinstance(f, _DropMessage) and f.prefix == DEEPSPEED_CPU_FALLBACK for f in ds.filters):
        ds.addFilter(_DropMessage(DEEPSPEED_CPU_FALLBACK))


def drop_ray_restart_notice(lines: list[str]) -> list[str]:
    """``lines`` without those that are :data:`RAY_RESTART_NOTICE`."""
    return [line for line in lines if not RAY_RESTART_NOTICE.search(line)]


def filter_ray_worker_logs() -> None:
    """Drop :data:`RAY_RESTART_NOTICE` from the worker output Ray streams to this driver (it comes from the
    TrainController process, a Ray-internal actor that runs no lexray code). Call after ``ray.init``
    (lexray.ray_utils.init_ray does); a no-op unless :func:`quiet_console` quieted this process, or when this
    Ray streams worker logs differently (then the line shows)."""
    if not _QUIET["console"]:
        return
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:
        return
    handlers = getattr(dispatcher, "handlers", None)
    if not isinstance(handlers, list):
        return
    for name, handler in list(handlers):
        if name != "ray_print_logs" or getattr(handler, "lexray_filtered", False):
            continue

        def filtered(data, _print=handler):
            lines = data.get("lines") if isinstance(data, dict) else None
            if lines:
                kept = drop_ray_restart_notice(lines)
                if not kept:
                    return
                if len(kept) != len(lines):
                    data = {**data, "lines": kept}
            _print(data)

        filtered.lexray_filtered = True
        dispatcher.remove_handler(name)
        dispatcher.add_handler(name, filtered)


_FILTER_PROCESS = r"""
import os, re, sys
notice = re.compile(sys.argv[1].encode())
while True:
    chunk = os.read(0, 1 << 16)
    if not chunk:
        break
    chunk = notice.sub(b"", chunk)
    while chunk:
        chunk = chunk[os.write(1, chunk):]
"""


@contextlib.contextmanager
def native_stdout_to_stderr():
    """Send what native code prints to descriptor 1 to descriptor 2 for the duration (process-wide, every thread):
    pyseismic-lsr's Rust code prints its build log ("Building the index...", the configuration, "Saving ...")
    to standard output, where it went into `lexray search --format trec > run.trec`. Python's ``sys.stdout`` is
    flushed first, so nothing printed before changes place."""
    try:
        sys.stdout.flush()
    except (AttributeError, OSError, ValueError):
        pass
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def filter_native_stderr() -> None:
    """Drop :data:`RAY_RESTART_NOTICE` from what native code (Ray's C++ core worker) writes to this process's
    file descriptor 2. Python's ``sys.stderr`` moves to a duplicate of the original stream, so Python output is
    untouched (same terminal, same isatty, no filter in the way of a traceback or a faulthandler dump); only
    writes to descriptor 2 itself go through a small filter process, which passes every other byte on at once
    (tqdm's carriage returns included) and outlives this process until the last writer closes. No-op when
    ``sys.stderr`` is not descriptor 2 (pytest's capture, an embedding application) or when already done."""
    if _QUIET["native_stderr"]:
        return
    try:
        if sys.stderr is None or sys.stderr.fileno() != 2:
            return
    except (AttributeError, OSError, ValueError):
        return
    import atexit
    import subprocess

    sys.stderr.flush()
    real = os.dup(2)
    read_end, write_end = os.pipe()
    try:
        child = subprocess.Popen([sys.executable, "-c", _FILTER_PROCESS, RAY_RESTART_NOTICE.pattern],
                                 stdin=read_end, stdout=real, close_fds=True, start_new_session=True)
    except OSError:
        for fd in (real, read_end, write_end):
            os.close(fd)
        return
    os.close(read_end)
    encoding, errors = sys.stderr.encoding, sys.stderr.errors
    sys.stderr = open(os.dup(real), "w", encoding=encoding, errors=errors, buffering=1)  # noqa: SIM115
    os.dup2(write_end, 2)
    os.close(write_end)
    _QUIET["native_stderr"] = True

    def restore() -> None:  # at exit: descriptor 2 back, the filter drains what is left and ends
        try:
            sys.stderr.flush()
            os.dup2(real, 2)
            child.wait(timeout=1)
        except Exception:  # noqa: BLE001 - never fail an exit over the console
            pass

    atexit.register(restore)
