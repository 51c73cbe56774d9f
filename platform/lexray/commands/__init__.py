"""Job logic behind ``lexray <command>`` and ``python jobs/<job>.py``: each module has ``main(argv) -> result``.

:data:`lexray.cli.COMMANDS` maps each command name and job file to its function, and every file in ``jobs/`` is
the same wrapper (``raise SystemExit(run_job(__file__))``), so ``ray job submit -- python jobs/x.py``,
``python jobs/x.py`` and ``lexray x`` run the same code. Heavy imports (torch, the encoder) wait until the
arguments and the early checks have passed, so ``--help`` and user errors answer at once.
"""
