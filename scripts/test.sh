#!/usr/bin/env bash
# The README's test command: idempotent set-up, then the whole suite in two pytest calls side by side:
#   - the main call: every test but those below (one shared Ray session, a timeout on every Ray test);
#   - the second call: the multi-node tests (tests/cluster: a 3-node Ray cluster of their own; marked `cluster`,
#     which the main call deselects), the Tune search end to end (tests/tune/test_search.py: `jobs/tune.py` run
#     twice in its own process with its own Ray) and three test files without Ray (below). None touches the main
#     call's Ray session. The search moved there on 2026-11-27 to even out the two calls' CPU work (measured
#     alone: ~1,380 and ~700 core-seconds; the search ~210), so that both end together instead of the main call
#     running its last ~340 s alone on a quarter-idle machine (docs/operations.md, CI time).
# Extra arguments go to the main pytest call.
#
# Why side by side: both calls leave a quarter of the 2 cores idle on average (Ray process start-ups, fault
# injection waits, polls; vmstat over a quiet run, docs/operations.md), and each Ray instance is its own (the
# multi-node tests never attach to the main call's session, nor the reverse). The multi-node call's output is
# printed after the main call's, and the command fails if either failed. Tried once before and reverted (one run
# in three failed a hygiene test whose 30-s grace for a failed job's Ray shutdown ran out under the doubled load);
# the hygiene tests now wait up to 90 s and name any process left (docs/operations.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
# The two calls below share the 2 cores, so a process's OpenMP team often has one thread descheduled; libgomp's
# default then spins the others at every barrier for up to ~300,000 iterations, CPU the other call needed (the
# likely mechanism, not isolated: the pytest processes themselves run one intra-op thread, tests/conftest.py, and
# which processes' teams spun was not identified). PASSIVE makes a waiting thread sleep at once. Measured
# 2026-11-27 on fresh clones of 5bbeaee, quiet, one run each: 1,070 -> 994 s, and 761 -> 725 s with the
# multi-node and fault tests left out; CPU time of the command's own processes -10 % in both pairs
# (docs/operations.md, CI time). Inherited by every process the suite starts, Ray's included. lexray itself sets
# no OpenMP policy: on cores of its own, a spinning team is faster.
export OMP_WAIT_POLICY=PASSIVE
cluster_log=$(mktemp "${TMPDIR:-/tmp}/lexray-cluster-tests.XXXXXX")
# The search first: tests/cluster/conftest.py puts Ray Train's default 2-s poll back for the rest of its session
# (the main call's 0.5 s, tests/conftest.py, is what the search's few-step trials were written against).
# -m "": no marker filter (pyproject's addopts deselect `cluster`).
# Three test files without Ray even the two calls out: tests/models/test_gguf.py (~40 core-seconds: the real SmolLM2
# GGUF converted once), tests/models/test_onnx_export.py (~30: exports checked against onnxruntime) and
# tests/vocab/test_expand.py (~26: vocabulary expansion on the real BPE tokenizer). Measured 2026-11-27: with the
# GGUF tests moved, the main call ended ~80 s after the second (26aa01c); with the ONNX tests too, ~46 s (528e11c).
beside=(tests/tune/test_search.py tests/models/test_gguf.py tests/models/test_onnx_export.py
        tests/vocab/test_expand.py tests/cluster)
.venv/bin/python -m pytest -q -p no:cacheprovider -m "" "${beside[@]}" >"$cluster_log" 2>&1 &
cluster_pid=$!
# a Ctrl-C or kill of this script must not leave the second call running (a failed main call waits for it)
trap 'kill "$cluster_pid" 2>/dev/null || true' INT TERM
main_rc=0
.venv/bin/python -m pytest -q -p no:cacheprovider "${beside[@]/#/--ignore=}" "$@" || main_rc=$?
cluster_rc=0
wait "$cluster_pid" || cluster_rc=$?
echo "================ second call (pytest ${beside[*]}, run beside the main call) ================"
cat "$cluster_log"
rm -f "$cluster_log"
echo "main call: exit $main_rc; second call: exit $cluster_rc"
[ "$main_rc" -eq 0 ] && [ "$cluster_rc" -eq 0 ]
