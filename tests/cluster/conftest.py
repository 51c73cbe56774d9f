"""A real multi-node Ray cluster on one machine for the ``cluster`` tests (``ray.cluster_utils.Cluster``).

A head with no CPUs (the driver, Ray Train's controller and Tune's trainables, which hold no CPU, stay there)
and two worker nodes of 1 CPU each, tagged ``{"node_a": 1}`` / ``{"node_b": 1}``: a Ray Data encoder actor or a
Ray Train worker holding 0.75 CPU fits on a worker node once, so two of them are forced onto different nodes, and
work pinned with a node resource lands on that node. Each node has its own raylet and object store, so shards,
payloads and gradients cross object stores as on a real cluster.

Why a separate pytest run (``-m cluster``, second call of ``scripts/test.sh``): a process holds one Ray
connection, and the main suite's ``ray_session`` is a single-node instance. The main run deselects these tests
(``addopts`` in pyproject.toml); ``tests/cluster`` must not use ``ray_session``.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

NODE_CPUS = 1
NODES = ("node_a", "node_b")
HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
"""The GCS declares a node dead after 3 failed health checks 1 s apart (Ray's defaults: 5, 3 s apart; the 10-s
timeout of one check is kept, so a slow but live raylet on a loaded machine is not declared dead). A removed node's
raylet refuses the check at once, so it is known dead in ~3 s instead of ~15 s: before that, Ray could place a
restarted Ray Train worker group on it (a ``ControllerError`` that Ray Train does not retry) and Ray Data could send
it work."""


class LocalCluster:
    """The running cluster: ``nodes[name]`` the Ray node of each tagged worker node; ``replace(name)`` removes that
    node (its raylet, object store and workers die, as on a pre-empted machine) and starts a fresh one with the
    same tag and CPUs (what an autoscaler does)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.nodes = {}

    def add(self, name: str):
        self.nodes[name] = self.cluster.add_node(num_cpus=NODE_CPUS, resources={name: 1},
                                                 object_store_memory=100 * 1024 * 1024)
        return self.nodes[name]

    def remove(self, name: str) -> None:
        self.cluster.remove_node(self.nodes.pop(name), allow_graceful=False)

    def replace(self, name: str) -> None:
        self.remove(name)
        self.add(name)
        self.cluster.wait_for_nodes()

    def raylet_pids(self) -> dict[int, str]:
        """``{raylet pid: node name}`` of the live worker nodes (each Ray worker process is a raylet's child)."""
        return {n.all_processes["raylet"][0].process.pid: name for name, n in self.nodes.items()}

    def node_ids(self) -> dict[str, str]:
        return {n.node_id: name for name, n in self.nodes.items()}


def pytest_collection_modifyitems(config, items):
    """The tests that use the 3-node cluster run last, in their files' order; the others (the hygiene tests, ``ray
    job submit``, and what ``scripts/test.sh`` runs before this folder) keep theirs, first. Why: the cluster is
    started for its first test and stopped at the end of the session, and idle it costs ~6 core-seconds a minute
    (3 raylets, their agents, the GCS's 1-s health checks: measured 2026-11-27). Alphabetically the encode test
    (test_faults.py) came first and the cluster then idled through ~4 minutes of tests that start Rays of their
    own."""
    users = [i for i in items if "cluster" in getattr(i, "fixturenames", ())]
    if users:
        taken = set(map(id, users))
        items[:] = [i for i in items if id(i) not in taken] + users


@pytest.fixture(scope="session", autouse=True)
def _ray_train_default_poll():
    """tests/conftest.py shortens Ray Train's controller poll to 0.5 s for the few-step fits of the main call. The
    multi-node fault tests kill workers on 1-CPU nodes: with the short poll the retried-trial test failed once
    ("A worker health check failed", 2026-11-26), so these tests (only: an autouse fixture of this folder, so the
    main call, which deselects them, keeps its setting) run with Ray's default (2 s)."""
    saved = os.environ.pop("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", None)
    yield
    if saved is not None:
        os.environ["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] = saved


@pytest.fixture(scope="session")
def ray_cluster():
    """Head (0 CPUs) + ``node_a`` + ``node_b`` (1 CPU each); the test process is the driver."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray
    from ray.cluster_utils import Cluster

    # Ray gives each raylet 30 s (hard-coded) to register; on a loaded machine a start can miss it ("The current
    # node timed out during startup", as lexray.ray_utils.init_ray knows): start the whole cluster again
    for attempt in range(3):
        cluster = None
        try:
            cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 0, "include_dashboard": False, "node_ip_address": "127.0.0.1",
                "object_store_memory": 100 * 1024 * 1024, "_system_config": HEALTH_CHECKS})
            lc = LocalCluster(cluster)
            for name in NODES:
                lc.add(name)
            cluster.wait_for_nodes()
            break
        except Exception:  # noqa: BLE001 - Ray raises bare Exceptions for these
            if cluster is not None:
                cluster.shutdown()
            if attempt == 2:
                raise
    ray.init(address=cluster.address, logging_level="WARNING")
    yield lc
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture
def cluster(ray_cluster):
    """The session cluster, put back to two live worker nodes after the test (a fault test replaces nodes)."""
    yield ray_cluster
    for name in NODES:
        if name not in ray_cluster.nodes:
            ray_cluster.add(name)
    ray_cluster.cluster.wait_for_nodes()


def children_titles(pid: int) -> list[tuple[int, str]]:
    """``[(pid, title)]`` of the direct children of ``pid``, from ``/proc/<pid>/task/*/children`` and each child's
    ``/proc/<child>/cmdline`` (the title is its first word, as Ray sets it: ``ray::RayTrainWorker``...).

    Why not ``psutil.process_iter``: it reads every process's status on the machine, ~10 ms of CPU per scan with 70
    processes (measured 2026-11-27), more with a 3-node cluster's; at 5 scans a second, 5 % of a core or more for
    the length of each multi-node test. A raylet's children are a few files."""
    kids: list[tuple[int, str]] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
        for child in pids:
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    title = f.read().split(b"\0", 1)[0].decode(errors="replace")
            except OSError:
                continue
            kids.append((child, title))
    return kids


class PlacementWatcher:
    """Samples the worker nodes' processes every 0.2 s while active: ``seen[node name]`` = the ``ray::`` process
    titles (actors and tasks, not idle workers) running under that node's raylet. Placement is read from the
    operating system, so it needs no State API and no change to the code under test."""

    def __init__(self, lc: LocalCluster):
        self.lc = lc
        self.seen: dict[str, set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            for raylet, node in self.lc.raylet_pids().items():
                for _, title in children_titles(raylet):
                    if title.startswith("ray::") and "IDLE" not in title:
                        self.seen.setdefault(node, set()).add(title)
            time.sleep(0.2)

    def nodes_running(self, needle: str) -> set[str]:
        """The nodes where a title containing ``needle`` was seen (safe to call while the watcher runs)."""
        return {node for node, titles in list(self.seen.items()) if any(needle in t for t in list(titles))}

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture
def placement(cluster):
    """A :class:`PlacementWatcher` of the cluster (use as a context manager around the work)."""
    return PlacementWatcher(cluster)
