"""lexray: train and batch-index learned sparse retrievers (SPLADE, LACONIC) on Ray."""

import os as _os

# Before anything imports Ray: without this Ray binds the machine's external interface even when told
# 127.0.0.1 (../shared/notes/environment.md). A platform default, not user configuration.
_os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# lexray drivers host Ray and the in-process JVM of Pyserini/Anserini (BM25 mining, impact search) together.
# The JVM raises SIGSEGV on purpose (implicit null checks in compiled code) and handles it itself; Ray's C++
# failure handler, installed by a ray.init() that comes after the JVM started, catches those first and kills
# the process (docs/bugs-and-fixes.md). Ray's documented switch for "using Java libraries"; read when Ray is
# first imported.
_os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")

__version__ = "0.1.0"


# The search API, imported on first use so that `import lexray` stays light (no torch, numba or pyarrow).
__all__ = ["Hit", "Index", "load_encoder", "open_index"]
_LAZY = {"Hit", "Index", "MatchedTerm", "load_encoder", "open_index"}


def __getattr__(name: str):
    if name in _LAZY:
        from lexray.search import api

        return getattr(api, name)
    raise AttributeError(f"module 'lexray' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
