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
