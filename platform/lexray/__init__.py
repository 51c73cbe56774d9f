"""lexray: train and batch-index learned sparse retrievers (SPLADE, LACONIC) on Ray."""

import os as _os

# Before anything imports Ray: without this Ray binds the machine's external interface even when told
# 127.0.0.1 (../shared/notes/environment.md). A platform default, not user configuration.
_os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

__version__ = "0.1.0"
