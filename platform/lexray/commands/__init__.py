"""Job logic behind ``lexray <command>`` and ``python jobs/<job>.py``: each module has ``main(argv) -> result``.

The job files in ``jobs/`` are thin wrappers around these functions, so ``ray job submit -- python jobs/x.py``,
``python jobs/x.py`` and ``lexray x`` run the same code.
"""
