"""What ``sparkrecover doctor`` checks: whether this machine has what a run needs, one finding per
check, each saying what was found or what to fix (docs/commands.md, "doctor").

The checks look, they never launch Spark: Java and javac, the listener's jar, spark-submit, the
pyspark the driver's Python imports (its Python files against its jars: another package, such as
pyspark-client, may have replaced the first), that Python importing sparkrecover, the root
(written and deleted once), and for a root on S3 s3fs and Spark's side of S3.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from sparkrecover.errors import SparkRecoverError
from sparkrecover.launch import launcher, spark_defaults
from sparkrecover.launch.jvm_files import listener_jar
from sparkrecover.rundir import storage

OK, NOTE, PROBLEM = "ok", "note", "problem"
PROBE_SECONDS = 30.0  # a store that does not answer (no network, a wrong endpoint) is a problem, not a hang
_JAR_VERSION = re.compile(r"^spark-core_\d+\.\d+-(.+)\.jar$")


@dataclass(frozen=True)
class Finding:
    check: str
    status: str  # OK, NOTE (worth knowing, nothing to fix) or PROBLEM (what to fix is in detail)
    detail: str

    def document(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status, "detail": self.detail}


@dataclass
class Machine:
    """What the checks found so far, for the checks after them."""

    root: str | None
    spark_submit_given: str | None
    spark_submit: str | None = None
    javac: str | None = None
    driver: dict = field(default_factory=dict)  # what the driver's Python said of itself (_PROBE)


def examine(root: str | None, spark_submit: str | None = None) -> list[Finding]:
    """Every check, in the order a run meets them."""
    machine = Machine(root, spark_submit)
    findings: list[Finding] = []
    for check in CHECKS:
        findings += check(machine)
    return findings


def _java(machine: Machine) -> list[Finding]:
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"$JAVA_HOME/bin/java ({java_home})" if java_home else "java on PATH"
        return [Finding("java", PROBLEM, f"no {where}: Spark needs Java 17 or later: install a JDK or set JAVA_HOME")]
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return [Finding("java", PROBLEM, f"{java} does not run: {error}")]
    said = (done.stderr or done.stdout).strip().splitlines()
    if done.returncode != 0:
        return [Finding("java", PROBLEM, f"{java} -version failed: {said[0] if said else done.returncode}")]
    return [Finding("java", OK, f"{said[0] if said else 'java'} ({java})")]


def _javac(machine: Machine) -> list[Finding]:
    machine.javac = listener_jar.find_javac()
    if machine.javac is None:
        return [
            Finding(
                "javac",
                PROBLEM,
                "not found (a JRE has no javac): install a JDK or set JAVA_HOME to one; without it the listener's "
                "jar cannot be built, so the driver uses the slower Py4J listener, job commits are not fenced "
                "and shuffle map outputs are not kept",
            )
        ]
    return [Finding("javac", OK, machine.javac)]


def _spark_submit(machine: Machine) -> list[Finding]:
    try:
        machine.spark_submit = launcher.find_spark_submit(machine.spark_submit_given)
    except SparkRecoverError as problem:
        return [Finding("spark-submit", PROBLEM, str(problem))]
    jars = listener_jar.spark_jars_dir(machine.spark_submit)
    version = listener_jar.spark_version(jars) if jars else None
    spark = f"Spark {version}" if version else "no Spark jars found beside it or in $SPARK_HOME/jars"
    return [Finding("spark-submit", OK if version else PROBLEM, f"{machine.spark_submit} ({spark})")]


def _listener_jar(machine: Machine) -> list[Finding]:
    if machine.spark_submit is None:
        return [Finding("listener-jar", NOTE, "not checked: no spark-submit to build it for")]
    built = listener_jar.built_jar(machine.spark_submit)
    if built is None:
        if machine.javac is None:
            return [Finding("listener-jar", NOTE, "not built, and cannot be without javac (see javac)")]
        return [
            Finding(
                "listener-jar",
                NOTE,
                f"not built yet: the first submit or spark-submit-args compiles it into {listener_jar.cache_dir()}",
            )
        ]
    if built.path is None:
        disabled = listener_jar.DISABLE_ENV in (built.reason or "")
        return [Finding("listener-jar", NOTE if disabled else PROBLEM, built.reason or "not available")]
    return [Finding("listener-jar", OK, built.path)]


def _class_archive(machine: Machine) -> list[Finding]:
    """The driver JVM's class-data-sharing archive (docs/operations.md, "The driver's class
    archive"), for a driver on a local master with the listener's jar as it is now: made, being
    made, not yet, or why there can be none. Never a problem: without it a driver starts as
    plain spark-submit does."""
    from sparkrecover.launch import spark_argv
    from sparkrecover.launch.jvm_files import class_archive

    if machine.spark_submit is None:
        return [Finding("class-archive", NOTE, "not checked: no spark-submit to start a driver with")]
    if os.environ.get(class_archive.DISABLE_ENV, "").strip() not in ("", "0"):
        return [Finding("class-archive", NOTE, f"turned off ({class_archive.DISABLE_ENV} is set)")]
    built = listener_jar.built_jar(machine.spark_submit)
    parsed = spark_argv.split_submit_args(["--master", "local[2]", "app.py"])
    archive = class_archive.archive_for(machine.spark_submit, parsed, built.path if built else None)
    if archive is None:
        return [
            Finding(
                "class-archive",
                NOTE,
                (
                    "none given: the driver's own class-sharing options (SPARK_SUBMIT_OPTS, "
                    "spark.driver.extraJavaOptions), or no Java or Spark jars found"
                ),
            )
        ]
    why = archive.failed_reason()
    if why is not None:
        return [Finding("class-archive", NOTE, f"none can be made: {why} ({archive.failed})")]
    if archive.usable():
        return [Finding("class-archive", OK, archive.path)]
    if archive.building():
        return [Finding("class-archive", NOTE, f"being made in the background: {archive.path}")]
    return [
        Finding(
            "class-archive",
            NOTE,
            f"not made yet: the first submit, resume or spark-submit-args makes it in the background ({archive.path})",
        )
    ]


# Run by the driver's Python: what it imports, as JSON on stdout. Nothing of it fails as a whole.
_PROBE = """
import json, os, sys
found = {"python": sys.executable, "version": sys.version.split()[0]}
try:
    import pyspark
    found["pyspark"] = os.path.dirname(pyspark.__file__)
    found["pyspark_version"] = pyspark.__version__
except Exception as error:
    found["pyspark_error"] = type(error).__name__ + ": " + str(error)
try:
    import sparkrecover.version
    found["sparkrecover"] = sparkrecover.version.__version__
except Exception as error:
    found["sparkrecover_error"] = type(error).__name__ + ": " + str(error)
print(json.dumps(found))
"""


def driver_python() -> tuple[str, str]:
    """The Python spark-submit gives the driver (in client mode), and what chose it: the variables
    Spark reads, else the Python sparkrecover runs on (which ``submit`` gives it)."""
    for variable in ("PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"):
        if os.environ.get(variable):
            return os.environ[variable], f"${variable}"
    return sys.executable, "the Python sparkrecover runs on"


def _check_driver_python(machine: Machine) -> list[Finding]:
    python, chosen = driver_python()
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120)
        machine.driver = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as error:
        return [Finding("driver-python", PROBLEM, f"{python} ({chosen}) does not run: {error}")]
    if not machine.driver:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return [Finding("driver-python", PROBLEM, f"{python} ({chosen}) does not run: {said}")]
    if "sparkrecover_error" in machine.driver:
        return [
            Finding(
                "driver-python",
                PROBLEM,
                f"{python} ({chosen}) cannot import sparkrecover ({machine.driver['sparkrecover_error']}): install "
                "sparkrecover in that Python, or point the variable at one that has it",
            )
        ]
    return [
        Finding("driver-python", OK, f"{python} ({chosen}): Python {machine.driver['version']}, sparkrecover "
                f"{machine.driver['sparkrecover']}")
    ]  # fmt: skip


def _pyspark(machine: Machine) -> list[Finding]:
    found = machine.driver
    if not found:
        return [Finding("pyspark", NOTE, "not checked: the driver's Python does not run (see driver-python)")]
    if "pyspark_error" in found:
        return [
            Finding(
                "pyspark",
                PROBLEM,
                f"the driver's Python cannot import pyspark ({found['pyspark_error']}): install pyspark in it",
            )
        ]
    folder, version = found["pyspark"], found["pyspark_version"]
    jars, where = os.path.join(folder, "jars"), "its jars"
    if not glob.glob(os.path.join(jars, "spark-core_*.jar")) and os.environ.get("SPARK_HOME"):
        jars, where = os.path.join(os.environ["SPARK_HOME"], "jars"), "the jars of $SPARK_HOME"
    jar_version = _jar_version(jars)
    if jar_version is None:
        return [
            Finding(
                "pyspark",
                PROBLEM,
                f"pyspark {version} at {folder} has no Spark jars (pyspark-client alone is Spark Connect's "
                "client): pip install 'pyspark=={version}', or set SPARK_HOME to a Spark {version}",
            )
        ]
    if jar_version != version:
        return [
            Finding(
                "pyspark",
                PROBLEM,
                f"pyspark at {folder}: its Python files are {version} but {where} are {jar_version} ({jars}): "
                f"another package replaced them (pyspark-client, pyspark-connect: the Airflow Spark provider "
                f"requires pyspark-client); install one version of both: pip install 'pyspark=={version}' "
                f"'pyspark-client=={version}' (or both =={jar_version} where that exists)",
            )
        ]
    return [Finding("pyspark", OK, f"{version} ({folder}), {where} {jar_version}")]


def _jar_version(jars: str) -> str | None:
    for path in sorted(glob.glob(os.path.join(jars, "spark-core_*.jar"))):
        match = _JAR_VERSION.match(os.path.basename(path))
        if match:
            return match[1]
    return None


def _root(machine: Machine) -> list[Finding]:
    try:
        root = storage.resolve_root(machine.root)
    except SparkRecoverError as problem:
        return [Finding("root", PROBLEM, str(problem))]
    machine.root = root
    findings = []
    if storage.scheme_of(root) == "s3":
        findings += _s3(machine, root)
        if findings[0].status == PROBLEM:
            return [*findings, Finding("root", NOTE, f"{root}: not checked without s3fs")]
    failed = _probe(root)
    if failed is not None:
        return [*findings, Finding("root", PROBLEM, f"{root}: cannot write there: {failed}")]
    return [*findings, Finding("root", OK, f"{root}: a file written and deleted")]


def _probe(root: str) -> str | None:
    """Write a file under the root and delete it (a local root missing: made for it, then removed).
    What went wrong, or None."""
    name = f".sparkrecover-doctor-{uuid.uuid4().hex[:12]}"
    if storage.is_local(root):
        made = _missing_folders(root)
        try:
            os.makedirs(root, exist_ok=True)
            path = os.path.join(root, name)
            with open(path, "xb") as handle:
                handle.write(b"doctor\n")
            os.remove(path)
        except OSError as error:
            return error.strerror or str(error)
        finally:
            for folder in made:  # deepest first
                try:
                    os.rmdir(folder)
                except OSError:
                    break
        return None
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            fs, path = storage.filesystem(storage.join(root, name))
            fs.pipe_file(path, b"doctor\n")
            fs.rm(path)
            outcome.append(None)
        except Exception as error:  # any backend's failure is the finding
            outcome.append(f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}")

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(PROBE_SECONDS)
    return outcome[0] if outcome else f"no answer in {PROBE_SECONDS:.0f} s (the network, an endpoint, credentials?)"


def _missing_folders(path: str) -> list[str]:
    made = []
    while path and not os.path.exists(path):
        made.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return made


def _s3(machine: Machine, root: str) -> list[Finding]:
    try:
        import s3fs  # noqa: F401  (the root's backend: the CLI reads and writes the journal through it)
    except ImportError:
        return [
            Finding(
                "s3fs",
                PROBLEM,
                f"not installed, and the root {root} is on S3: pip install s3fs (sparkrecover's [s3] extra), "
                "in this Python and in the driver's",
            )
        ]
    return [Finding("s3fs", OK, "installed"), _s3a(machine)]


def _s3a(machine: Machine) -> Finding:
    """Spark's side of an S3 root: checkpoints and kept map outputs go to s3a://, which needs
    hadoop-aws (pyspark ships none). Told, not failed: it may come on the launch's own line."""
    if machine.spark_submit is None:
        return Finding("s3a", NOTE, "not checked: no spark-submit")
    jars = listener_jar.spark_jars_dir(machine.spark_submit)
    in_jars = bool(jars and glob.glob(os.path.join(jars, "hadoop-aws-*.jar")))
    defaults = spark_defaults.files(None, False, machine.spark_submit)
    settings = spark_defaults.read_all(defaults)
    named = " ".join(
        settings.get(key, "") for key in ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath")
    )
    missing = []
    if not in_jars and "hadoop-aws" not in named:
        hadoop = _hadoop_version(jars)
        missing.append(
            f"Spark has no hadoop-aws (not in {jars or 'its jars'} nor in {defaults[-1]}): give spark-submit "
            f"--packages org.apache.hadoop:hadoop-aws:{hadoop or '<its Hadoop version>'} or --jars"
        )
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and "spark.hadoop.fs.s3a.endpoint" not in settings:
        missing.append(f"$AWS_ENDPOINT_URL is {endpoint}: give Spark --conf spark.hadoop.fs.s3a.endpoint={endpoint}")
    if missing:
        return Finding("s3a", NOTE, "; ".join(missing) + ' (docs/operations.md, "Spark\'s side of S3")')
    return Finding("s3a", OK, "hadoop-aws on Spark's class path" + (", endpoint set" if endpoint else ""))


def _hadoop_version(jars: str | None) -> str | None:
    for path in sorted(glob.glob(os.path.join(jars or "", "hadoop-client-api-*.jar"))):
        return os.path.basename(path)[len("hadoop-client-api-") : -len(".jar")]
    return None


CHECKS: tuple[Callable[[Machine], list[Finding]], ...] = (
    _java,
    _javac,
    _spark_submit,
    _listener_jar,
    _class_archive,
    _check_driver_python,
    _pyspark,
    _root,
)
