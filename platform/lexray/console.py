"""What the console shows: lexray's own progress and results at the default level, everything with ``--verbose``.

One place for the output the user cannot act on (weight-loading progress bars, Ray's token-auth notice, Ray Data's
execution-plan INFO lines, Ray Train's per-report INFO lines), silenced at its cause where lexray controls the
cause and filtered only where a library cannot be told otherwise (each such filter says why).
"""

from __future__ import annotations

import logging
import os


def quiet_console(verbose: bool = False) -> None:
    """Silence output the user cannot act on, in this process and (through the environment) in the local Ray
    workers it starts. Real warnings and errors still show. ``verbose=True`` leaves every library at its default.
    """
    if verbose:
        return
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # inherited by local Ray workers too
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    for name, level in (("ray._private.authentication.authentication_token_setup", logging.ERROR),
                        ("ray.data", logging.WARNING), ("ray.data._internal", logging.WARNING)):
        logging.getLogger(name).setLevel(level)


def quiet_ray_train_reports() -> None:
    """Ray Train V2 logs every ``ray.train.report`` at INFO ("Reporting training result …" with the whole
    metrics dict, once per rank and report) under a logger named after its module file, which buries lexray's
    one console line per logged step. Raise that logger to WARNING; a Ray without the module is left alone.
    Called inside each Ray Train worker."""
    try:
        from ray.train.v2._internal.execution import context
    except ImportError:
        return
    logging.getLogger(context.__file__).setLevel(logging.WARNING)
