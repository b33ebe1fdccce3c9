"""The JVM listener's jar: compiled on first use from the source in the package, then cached.

The jar is built against the jars of the Spark that ``spark-submit`` will run (``$SPARK_HOME/jars``,
else the ``jars/`` beside the ``bin/spark-submit`` in use), with ``javac --release 8``, into
``$SPARKRECOVER_CACHE`` (default ``$XDG_CACHE_HOME/sparkrecover``, else ``~/.cache/sparkrecover``),
under a name keyed by the source's digest and the Spark version. Compiling on first use rather than
at package build time keeps the install light: a wheel build never needs a copy of Spark, and the
class always matches the Spark it runs in.

No JDK, or ``SPARKRECOVER_NO_JVM_LISTENER=1``: no jar, and the driver falls back to the Py4J
listener. Nothing here imports pyspark.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
from dataclasses import dataclass

from sparkrecover import jvm

CACHE_ENV = "SPARKRECOVER_CACHE"
DISABLE_ENV = "SPARKRECOVER_NO_JVM_LISTENER"
JAVAC_OPTIONS = ("--release", "8", "-encoding", "UTF-8", "-nowarn", "-Xlint:-options")
_SPARK_CORE = re.compile(r"^spark-core_(\d+\.\d+)-(.+)\.jar$")


@dataclass(frozen=True)
class ListenerJar:
    """The jar to register, or why there is none (``path`` None, ``reason`` says why)."""

    path: str | None
    reason: str | None = None
    compiled: bool = False  # built by this call (the first use for this Spark and source)
    spark_version: str | None = None  # ``<spark version>-scala<binary version>`` it was built for


def cache_dir() -> str:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return os.path.abspath(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sparkrecover")


def spark_jars_dir(spark_submit: str) -> str | None:
    """Where the jars of the Spark behind this spark-submit are, found the way the script finds
    its Spark: $SPARK_HOME when set, else the folder above its bin/, else (pip's copy of the
    script in a virtualenv's bin/, which runs find_spark_home.py) the installed pyspark."""
    homes = [
        os.environ.get("SPARK_HOME") or "",
        os.path.dirname(os.path.dirname(os.path.realpath(spark_submit))),
        _pyspark_home(),
    ]
    for home in homes:
        candidate = os.path.join(home, "jars") if home else ""
        if candidate and glob.glob(os.path.join(candidate, "spark-core_*.jar")):
            return candidate
    return None


def _pyspark_home() -> str:
    import importlib.util

    try:
        spec = importlib.util.find_spec("pyspark")  # locates the package without importing it
    except (ImportError, ValueError):
        return ""
    return os.path.dirname(spec.origin) if spec and spec.origin else ""


def spark_version(jars_dir: str) -> str | None:
    """``<spark version>-scala<binary version>`` from the name of spark-core's jar."""
    for path in sorted(glob.glob(os.path.join(jars_dir, "spark-core_*.jar"))):
        match = _SPARK_CORE.match(os.path.basename(path))
        if match:
            return f"{match[2]}-scala{match[1]}"
    return None


def cache_key(source: bytes, version: str) -> str:
    digest = hashlib.sha256(source)
    digest.update(b"\0" + version.encode() + b"\0" + " ".join(JAVAC_OPTIONS).encode())
    return digest.hexdigest()[:16]


def find_javac() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "javac")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("javac")


@dataclass(frozen=True)
class _Cached:
    """Where this spark-submit's jar is cached, or why there is none to look for (``problem``)."""

    problem: ListenerJar | None = None
    jars_dir: str = ""
    version: str = ""
    jar: str = ""
    failed: str = ""  # beside the jar: why this source did not compile against this Spark


def _cached(spark_submit: str) -> _Cached:
    if os.environ.get(DISABLE_ENV, "").strip() not in ("", "0"):
        return _Cached(ListenerJar(None, f"the JVM listener is turned off by {DISABLE_ENV}"))
    jars_dir = spark_jars_dir(spark_submit)
    version = spark_version(jars_dir) if jars_dir else None
    if jars_dir is None or version is None:
        return _Cached(
            ListenerJar(
                None, f"no Spark jars found for {spark_submit} (looked in $SPARK_HOME/jars and beside bin/spark-submit)"
            )
        )
    source = b"".join(_read(path) for path in jvm.sources())
    name = os.path.join(cache_dir(), f"sparkrecover-listener-{version}-{cache_key(source, version)}")
    return _Cached(None, jars_dir, version, name + ".jar", name + ".failed")


def built_jar(spark_submit: str) -> ListenerJar | None:
    """The cached jar for this spark-submit's Spark, or why there cannot be one; None when it is
    simply not built yet. Compiles nothing (``sparkrecover doctor`` asks)."""
    return _lookup(_cached(spark_submit))


def _lookup(cached: _Cached) -> ListenerJar | None:
    if cached.problem is not None:
        return cached.problem
    if os.path.isfile(cached.jar):
        return ListenerJar(cached.jar, spark_version=cached.version)
    if os.path.isfile(cached.failed):
        # This source does not compile against this Spark: say why without paying for javac again.
        with open(cached.failed, encoding="utf-8", errors="replace") as handle:
            return ListenerJar(None, handle.read().strip())
    return None


def ensure_jar(spark_submit: str) -> ListenerJar:
    """The cached jar for this spark-submit's Spark, compiling it first if needed."""
    cached = _cached(spark_submit)
    found = _lookup(cached)
    if found is not None:
        return found
    jars_dir, version, jar, failed = cached.jars_dir, cached.version, cached.jar, cached.failed
    folder = os.path.dirname(jar)
    javac = find_javac()
    if javac is None:
        return ListenerJar(None, "no Java compiler (javac) found: install a JDK or set JAVA_HOME")
    try:
        os.makedirs(folder, exist_ok=True)
        problem = _compile(javac, jars_dir, jar)
    except OSError as error:
        return ListenerJar(None, f"could not build the listener jar in {folder}: {error}")
    if problem is not None:
        _write_quietly(failed, problem)
        return ListenerJar(None, problem)
    return ListenerJar(jar, compiled=True, spark_version=version)


def _compile(javac: str, jars_dir: str, jar: str) -> str | None:
    """Compile into a scratch folder and move the jar into place whole, so concurrent first uses
    never see half a jar. Returns what went wrong, or None."""
    import subprocess
    import tempfile
    import zipfile

    with tempfile.TemporaryDirectory(prefix="sparkrecover-javac-", dir=os.path.dirname(jar)) as scratch:
        classes = os.path.join(scratch, "classes")
        os.makedirs(classes)
        command = [javac, *JAVAC_OPTIONS, "-cp", os.path.join(jars_dir, "*"), "-d", classes, *jvm.sources()]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"javac could not run: {error}"
        if done.returncode != 0:
            output = (done.stderr or done.stdout).strip().splitlines()
            return f"javac failed against {jars_dir}: " + " | ".join(output[:6])[:1500]
        built = os.path.join(scratch, "listener.jar")
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: sparkrecover\n\n")
            for folder, _, names in os.walk(classes):
                for file_name in sorted(names):
                    path = os.path.join(folder, file_name)
                    archive.write(path, os.path.relpath(path, classes).replace(os.sep, "/"))
        os.replace(built, jar)
    return None


def _read(path: str) -> bytes:
    # The path inside the package, not the file name alone: a class moved to another Java
    # package is another class, and no jar cached before the move may stand in for it.
    with open(path, "rb") as handle:
        return os.path.relpath(path, jvm.FOLDER).replace(os.sep, "/").encode() + b"\0" + handle.read()


def _write_quietly(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    except OSError:
        pass
