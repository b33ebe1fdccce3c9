"""The driver JVM's class-data-sharing archive (docs/operations.md, "The driver's class archive").

Most of a Spark driver's start is its JVM loading, parsing and verifying the same few thousand
classes of Spark's jars. A dynamic CDS archive (``-XX:ArchiveClassesAtExit``, JDK 13 and newer)
holds them already parsed; a driver given it (``-XX:SharedArchiveFile``) maps them from one file.
One archive is made per Java, Spark installation, driver class path and listener jar (the key),
beside the listener's jar, by a warm-up run in the background after the first driver that had none
(dumping at the exit of the user's own driver doubled its CPU:
docs/decisions/0045-driver-class-archive.md). Only a whole archive is used: it is written under a
temporary name, renamed into place, and its size and time are recorded beside it; a file that
differs (a truncated archive crashes the JVM that maps it) is made again. Each driver that
``submit`` or ``resume`` starts writes the JVM's verdict on the archive
(``-Xlog:cds+dynamic=warning``) beside it; an archive the JVM refused is made again, once.

Nothing here imports pyspark; the warm-up application is ``sparkrecover/demo/warmup.py``.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

from sparkrecover.launch import spark_argv

DISABLE_ENV = "SPARKRECOVER_NO_CLASS_ARCHIVE"
FOLDER = "class-archives"
FORMAT = "1"  # part of the key: a change of what goes into an archive makes new ones
# The JVM's CDS messages never reach the driver's output ...
QUIET = "-Xlog:cds=off,cds+dynamic=off"
# ... except the one that says the archive was refused, which goes to a file beside it.
REFUSED = "Unable to use shared archive"
DUMPED = "driver.jsa"  # what the warm-up's JVM writes at exit, in the build's own folder
BUILD_SECONDS = 1800  # a build older than this is taken for dead (its lock is stale)
WARMUP_APP = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "demo", "warmup.py"
)
# Java options that say the user chose class-data sharing themselves: theirs wins.
_USERS_OWN = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare", "SharedClassListFile", "AutoCreateSharedArchive")
# Characters a path cannot hold inside -Xlog's and Spark's option strings.
_UNSAFE = (":", ",", "=", " ", "\t", '"', "'")


@dataclass(frozen=True)
class ClassArchive:
    """One archive's files: ``path`` the archive, and beside it what says it is whole
    (``.json``), the JVM's verdict of the last driver that mapped it (``.log``), a build under
    way (``.building``), a refusal already seen once (``.refused``), why none can be made
    (``.failed``)."""

    path: str
    class_path: str  # the user's driver class path, which the build runs with too
    driver_memory: str | None = None  # likewise: above 32 GB the JVM's pointers, and what it maps, differ

    def _beside(self, suffix: str) -> str:
        return self.path + suffix

    @property
    def record(self) -> str:
        return self._beside(".json")

    @property
    def log(self) -> str:
        return self._beside(".log")

    @property
    def lock(self) -> str:
        return self._beside(".building")

    @property
    def refused_once(self) -> str:
        return self._beside(".refused")

    @property
    def failed(self) -> str:
        return self._beside(".failed")

    def usable(self) -> bool:
        """The archive is whole: the size and time recorded when it was put in place."""
        try:
            with open(self.record, encoding="utf-8") as handle:
                recorded = json.load(handle)
            found = os.stat(self.path)
        except (OSError, ValueError):
            return False
        return (
            isinstance(recorded, dict)
            and recorded.get("size") == found.st_size
            and (recorded.get("mtime_ns") == found.st_mtime_ns)
        )

    def driver_options(self, verdict: bool = True) -> str:
        """The Java options that give a driver the archive, its CDS messages off; with ``verdict``,
        a refusal written to ``log``. Only for a driver started here and now: a JVM whose log
        file's folder is missing does not start, and a line handed to a launcher may run on
        another machine, or after the folder was removed."""
        options = f"-XX:SharedArchiveFile={self.path} {QUIET}"
        return f"{options} -Xlog:cds+dynamic=warning:file={self.log}::filecount=0" if verdict else options

    def refused(self) -> bool:
        """The last driver given the archive said the JVM could not use it."""
        try:
            with open(self.log, encoding="utf-8", errors="replace") as handle:
                return REFUSED in handle.read()
        except OSError:
            return False

    def failed_reason(self) -> str | None:
        try:
            with open(self.failed, encoding="utf-8", errors="replace") as handle:
                return handle.read().strip() or "unknown"
        except OSError:
            return None

    def discard(self) -> None:
        """The archive goes (a refused or damaged one); the next build makes it again."""
        for path in (self.record, self.path, self.log):
            with contextlib.suppress(OSError):
                os.remove(path)

    def building(self) -> bool:
        try:
            return time.time() - os.stat(self.lock).st_mtime < BUILD_SECONDS
        except OSError:
            return False


def ready(archive: ClassArchive) -> bool:
    """Whether a driver can be given the archive now. An archive the last driver's JVM refused is
    discarded to be made again, once: refused a second time, none is made any more (``.failed``
    says why). A damaged one (not the size and time recorded) is discarded."""
    if archive.failed_reason() is not None:
        return False
    if archive.refused():
        if os.path.exists(archive.refused_once):
            write_whole(archive.failed, f"the JVM refused the archive made for this driver twice (see {archive.log})\n")
            return False
        write_whole(archive.refused_once, f"{time.time()}\n")
        archive.discard()
        return False
    if archive.usable():
        return True
    if not archive.building():
        archive.discard()  # damaged, or left half made by a build that died
    return False


def needs_build(archive: ClassArchive) -> bool:
    return not archive.usable() and not archive.building() and archive.failed_reason() is None


def archive_for(spark_submit: str, parsed: spark_argv.SubmitArgs, listener_jar: str | None) -> ClassArchive | None:
    """The archive for a client-mode driver launched with ``parsed`` by ``spark_submit``, or None
    where there can be none (turned off, the driver elsewhere, the user's own CDS options, no
    Spark jars or Java found, a path the JVM's options cannot hold). Stats a few hundred files."""
    from sparkrecover.launch.jvm_files.listener_jar import cache_dir, spark_jars_dir

    if os.environ.get(DISABLE_ENV, "").strip() not in ("", "0") or parsed.deploy_mode != "client":
        return None
    sources = spark_argv.defaults_files(parsed, spark_submit)
    java_options = spark_argv.driver_setting(parsed.options, sources, spark_argv.DRIVER_JAVA_OPTIONS)
    given_everywhere = " ".join([java_options, os.environ.get("SPARK_SUBMIT_OPTS", "")])
    if any(flag in given_everywhere for flag in _USERS_OWN):
        return None
    jars_dir = spark_jars_dir(spark_submit)
    java = _java()
    if jars_dir is None or java is None:
        return None
    class_path = spark_argv.driver_setting(parsed.options, sources, spark_argv.DRIVER_CLASS_PATH)
    memory = spark_argv.driver_setting(parsed.options, sources, spark_argv.DRIVER_MEMORY) or None
    digest = hashlib.sha256()
    for part in _key_parts(java, jars_dir, class_path, memory or "", listener_jar):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    path = os.path.join(cache_dir(), FOLDER, f"driver-{digest.hexdigest()[:20]}.jsa")
    if any(char in path for char in _UNSAFE):
        return None
    return ClassArchive(path, class_path, memory)


def _java() -> str | None:
    """The java spark-class runs: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.access(java, os.X_OK) else None


def _key_parts(java: str, jars_dir: str, class_path: str, memory: str, listener_jar: str | None) -> list[str]:
    """What the JVM checks before it maps an archive, or what changes the classes in it: the
    JVM's build (its libjvm), Spark's jars (names, sizes, times), the class path's other parts
    (the driver class path, the folders spark-class puts there), the driver's memory, the
    listener's jar (its name holds its sources' digest). Not the driver's Java options: most
    (-D, -Xlog) change nothing the JVM checks, and one that does has the archive refused, and
    made again."""
    java_home = os.path.dirname(os.path.dirname(java))
    parts = [
        FORMAT,
        java,
        *(_stamp(path) for path in sorted(glob.glob(os.path.join(java_home, "lib", "*", "libjvm.so")))),
    ]
    for name in sorted(os.listdir(jars_dir)):
        parts.append(_stamp(os.path.join(jars_dir, name)))
    parts += [class_path, memory, listener_jar or ""]
    for name in ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH", "SPARK_SUBMIT_OPTS"):
        parts.append(f"{name}={os.environ.get(name, '')}")
    return parts


def _stamp(path: str) -> str:
    try:
        found = os.stat(path)
    except OSError:
        return path
    return f"{path}:{found.st_size}:{found.st_mtime_ns}"


def unarchivable(archive: ClassArchive, spark_submit: str) -> str | None:
    """Why JDK 17 cannot archive this driver's classes: a folder that holds files before Spark's
    jars on its class path (Spark's conf folder, a driver class path folder) makes the JVM refuse
    to write an archive, and to map one."""
    from sparkrecover.launch.jvm_files.listener_jar import spark_jars_dir

    jars_dir = spark_jars_dir(spark_submit) or ""
    home = os.path.dirname(jars_dir)
    conf = os.environ.get("SPARK_CONF_DIR") or os.path.join(home, "conf")
    for folder in [*archive.class_path.split(os.pathsep), conf]:
        if folder and os.path.isdir(folder) and os.listdir(folder):
            return (
                f"the driver's class path has a folder that holds files before Spark's jars ({folder}): "
                "the JVM cannot archive classes behind one"
            )
    return None


def warmup_args(archive: ClassArchive, parsed: spark_argv.SubmitArgs, work: str) -> spark_argv.SubmitArgs:
    """The warm-up application's spark-submit arguments: on ``local[2]``, with what shapes the
    driver's class path and memory as ``parsed`` has it, its JVM dumping the archive into ``work``."""
    options = []
    if parsed.option("--properties-file"):
        options += ["--properties-file", parsed.option("--properties-file") or ""]
    if "--load-spark-defaults" in parsed.options:
        options.append("--load-spark-defaults")
    if archive.class_path:
        options += ["--driver-class-path", archive.class_path]
    if archive.driver_memory:
        options += ["--driver-memory", archive.driver_memory]
    dump = f"-XX:ArchiveClassesAtExit={os.path.join(work, DUMPED)} {QUIET}"
    options += ["--driver-java-options", dump, "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    return spark_argv.SubmitArgs(options, WARMUP_APP, [os.path.join(work, "data")])


def start_build(archive: ClassArchive, command: list[str], env: dict[str, str], work: str) -> bool:
    """Make the archive in the background: a detached process runs ``command`` (a warm-up
    application under the bootstrap, which dumps its classes to ``work``/driver.jsa at exit) and
    puts the archive in place whole. False when a build is already under way."""
    folder = os.path.dirname(archive.path)
    try:
        os.makedirs(folder, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if not archive.building():
                os.remove(archive.lock)  # a build that died: its lock is stale
        descriptor = os.open(archive.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError:
        return False
    with os.fdopen(descriptor, "w") as lock:
        lock.write(json.dumps({"started": time.time(), "command": command}))
    job = os.path.join(work, "job.json")
    with open(job, "w", encoding="utf-8") as handle:
        json.dump({"archive": archive.path, "command": command, "work": work}, handle)
    with open(os.path.join(work, "build.log"), "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "sparkrecover.launch.jvm_files.class_archive", job],
            env=env,
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the command, and its Ctrl-C
        )
    return True


def build(job_path: str) -> int:
    """The background build (``python -m sparkrecover.launch.jvm_files.class_archive JOB``)."""
    with open(job_path, encoding="utf-8") as handle:
        job = json.load(handle)
    archive = ClassArchive(job["archive"], "")
    work = job["work"]
    dumped = os.path.join(work, DUMPED)
    try:
        try:
            done = subprocess.run(job["command"], cwd=work, timeout=BUILD_SECONDS, capture_output=True, text=True)
            output = (done.stderr or "") + (done.stdout or "")
            problem = None if done.returncode == 0 else f"the warm-up run failed (exit {done.returncode})"
        except (OSError, subprocess.SubprocessError) as error:
            output, problem = "", f"the warm-up run could not run: {error}"
        if problem is None and not os.path.isfile(dumped):
            problem = "the warm-up run's JVM wrote no archive"
        if problem is not None:
            tail = " | ".join(line for line in output.strip().splitlines()[-6:])
            write_whole(archive.failed, f"{problem}: {tail}"[:2000] + "\n")
            return 1
        with contextlib.suppress(OSError):
            os.remove(archive.log)  # the verdict on a former archive
        os.replace(dumped, archive.path)
        found = os.stat(archive.path)
        write_whole(
            archive.record, json.dumps({"size": found.st_size, "mtime_ns": found.st_mtime_ns, "built": time.time()})
        )
        return 0
    finally:
        with contextlib.suppress(OSError):
            os.remove(archive.lock)
        shutil.rmtree(work, ignore_errors=True)


def write_whole(path: str, text: str) -> None:
    """Whole or not at all: written beside, then renamed."""
    partial = f"{path}.{os.getpid()}.tmp"
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(partial, path)


if __name__ == "__main__":
    raise SystemExit(build(sys.argv[1]))
