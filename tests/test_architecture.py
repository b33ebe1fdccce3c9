"""The layout's rules (docs/architecture.md), checked on the code's own imports: the command line
and the driver are two processes, and each package may only lean on what sits below it."""

from __future__ import annotations

import ast
import os
import re
import sys

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sparkrecover")


def imports_of(relative_folder: str) -> list[tuple[str, str]]:
    """(file relative to the package, imported module) for every import under the folder,
    function-level (lazy) imports included."""
    found = []
    top = os.path.join(PACKAGE, relative_folder)
    for folder, _, names in os.walk(top):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, PACKAGE)
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.Import):
                    found += [(relative, alias.name) for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    found += [(relative, node.module)]
                    found += [(relative, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def offenders(folder: str, forbidden: tuple[str, ...], *, skip: tuple[str, ...] = ()) -> list[str]:
    return sorted(
        {
            f"{where} imports {module}"
            for where, module in imports_of(folder)
            if not where.startswith(skip) and any(module == bad or module.startswith(bad + ".") for bad in forbidden)
        }
    )


def test_only_the_cli_imports_typer_or_rich():
    assert offenders("", ("typer", "rich", "click"), skip=("cli" + os.sep,)) == []


def test_the_driver_never_imports_the_cli_or_the_launcher():
    assert offenders("driver", ("sparkrecover.cli", "sparkrecover.launch")) == []


# The rooms of a package, from the ground up: each may import only the rooms below it, and none
# the package's modules that stand above them all (the driver's entry points). The core's
# ``humanize`` stands under its rooms: each may use it.
ROOMS = {
    "driver": (("process", "tasks", "lifecycle", "recording", "recall"), ("bootstrap", "api")),
    "core": (("fold", "verdicts", "views"), ()),
}


def room_offenders(package: str) -> list[str]:
    rooms, tops = ROOMS[package]
    found = []
    for floor, room in enumerate(rooms):
        above = [f"sparkrecover.{package}.{higher}" for higher in (*rooms[floor + 1 :], *tops)]
        found += offenders(os.path.join(package, room), tuple(above))
    return found


@pytest.mark.parametrize("package", sorted(ROOMS))
def test_each_room_leans_only_on_the_rooms_below_it(package):
    assert room_offenders(package) == []


def test_no_room_holds_more_than_twelve_modules():
    """A folder of more than twelve modules is a room that hides its concerns: split it."""
    crowded = []
    for folder, _, names in os.walk(PACKAGE):
        modules = [n for n in names if n.endswith(".py") and n != "__init__.py"]
        if len(modules) > 12:
            crowded.append(f"{os.path.relpath(folder, PACKAGE)}: {len(modules)} modules")
    assert crowded == []


# The Java packages of the jar (sparkrecover/jvm/<package>/), and those each may name.
JAVA_MAY_USE = {"bridge": (), "commit": ("bridge",), "shuffle": ("bridge",)}


def java_offenders() -> list[str]:
    found = []
    top = os.path.join(PACKAGE, "jvm")
    for folder, _, names in os.walk(top):
        for name in (n for n in names if n.endswith(".java")):
            path = os.path.join(folder, name)
            package = os.path.relpath(folder, top).split(os.sep)[0]
            for used in set(re.findall(r"\bsparkrecover\.jvm\.(\w+)\.", open(path, encoding="utf-8").read())):
                if used != package and used not in JAVA_MAY_USE.get(package, ()):
                    found.append(f"{os.path.relpath(path, PACKAGE)} names sparkrecover.jvm.{used}")
    return sorted(found)


def test_the_java_packages_lean_only_on_the_bridge():
    """The commit protocols and the shuffle keeping share the listener's bridge, never each other."""
    assert java_offenders() == []


@pytest.mark.parametrize("package", ["core", "journal", "rundir", "launch", "planning"])
def test_the_command_line_side_never_imports_pyspark_or_the_driver(package):
    assert offenders(package, ("pyspark", "py4j", "sparkrecover.driver", "sparkrecover.cli")) == []


def test_the_airflow_operator_is_a_launcher_so_it_never_imports_the_cli_the_driver_or_pyspark():
    """sparkrecover.airflow runs in an Airflow worker, where spark-submit-args would run: it builds
    on launch/, as the CLI does, and on nothing of the driver's process."""
    assert offenders("airflow", ("pyspark", "py4j", "sparkrecover.driver", "sparkrecover.cli")) == []
    assert {module for _, module in imports_of("airflow")} >= {"sparkrecover.launch.handoff"}


def test_planning_is_shared_by_both_processes_so_it_leans_on_neither():
    """The driver plans its own resume with planning/: planning may not reach the launcher."""
    assert offenders("planning", ("sparkrecover.launch",)) == []


def test_the_journal_and_the_run_directory_sit_below_the_core():
    above = ("sparkrecover.core", "sparkrecover.launch", "sparkrecover.planning")
    assert offenders("journal", above) == []
    assert offenders("rundir", (*above, "sparkrecover.journal")) == []
    assert offenders("core", ("sparkrecover.planning",)) == []


# What the core may import of the package: its own modules and pure definitions (types, words,
# errors, the journal's event names). Anything else could read storage or start Spark.
CORE_MAY_IMPORT = (
    "sparkrecover.core",
    "sparkrecover.kinds",
    "sparkrecover.errors",
    "sparkrecover.journal.events",
    "sparkrecover.rundir.plans",
    "sparkrecover.rundir.formats",
)
# Standard modules that touch files, processes or the network.
IO_MODULES = (
    "os",
    "io",
    "shutil",
    "glob",
    "pathlib",
    "subprocess",
    "socket",
    "tempfile",
    "fsspec",
    "s3fs",
    "urllib.request",
    "pyspark",
    "py4j",
)


def core_offenders(folder: str = "core") -> list[str]:
    found = set()
    for where, module in imports_of(folder):
        ours = module == "sparkrecover" or module.startswith("sparkrecover.")
        # A package named on the way to an allowed module (``from sparkrecover.journal import
        # events``) is judged by the module it names.
        allowed = any(
            module == ok or module.startswith(ok + ".") or ok.startswith(module + ".") for ok in CORE_MAY_IMPORT
        )
        if (ours and not allowed) or any(module == bad or module.startswith(bad + ".") for bad in IO_MODULES):
            found.add(f"{where} imports {module}")
    return sorted(found)


def test_the_core_reads_no_storage_and_starts_no_spark():
    """The planner and the views are told what survives on storage (core/verdicts/evidence.py); they read nothing."""
    assert core_offenders() == []


def namesakes(top: str) -> list[str]:
    """Modules under ``top`` whose names say the same thing: one file name twice, or a name and its
    plural (``attempt.py`` beside ``attempts.py``)."""
    seen: dict[str, list[str]] = {}
    for folder, _, names in os.walk(top):
        for name in names:
            if name.endswith(".py") and name not in ("__init__.py", "__main__.py"):
                stem = name[: -len(".py")]
                path = os.path.relpath(os.path.join(folder, name), top)
                seen.setdefault(stem[:-1] if stem.endswith("s") else stem, []).append(path)
    return sorted(" beside ".join(sorted(paths)) for paths in seen.values() if len(paths) > 1)


def test_no_two_modules_share_a_name():
    """A name says one thing (docs/architecture.md): `grep`, a traceback or a review that names a
    module names one file."""
    assert namesakes(PACKAGE) == []


def public_and_private_twins(top: str) -> list[str]:
    """Top-level functions of one module named ``x`` and ``_x``: two things under one name."""
    found = []
    for folder, _, names in os.walk(top):
        for name in (n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            tree = ast.parse(open(path, encoding="utf-8").read())
            defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
            found += [f"{os.path.relpath(path, top)}: {n} and _{n}" for n in sorted(defined) if f"_{n}" in defined]
    return found


def test_no_module_has_a_public_and_a_private_function_of_one_name():
    assert public_and_private_twins(PACKAGE) == []


def test_namesakes_are_found(tmp_path):
    for path in ("cli/report.py", "core/report.py", "launch/attempts.py", "driver/attempt.py", "core/plans.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    (tmp_path / "core" / "plans.py").write_text("def keep():\n    pass\n\n\ndef _keep():\n    pass\n")
    assert public_and_private_twins(str(tmp_path)) == ["core/plans.py: keep and _keep"]
    assert namesakes(str(tmp_path)) == [
        "cli/report.py beside core/report.py",
        "driver/attempt.py beside launch/attempts.py",
    ]


def test_the_rules_see_a_violation(tmp_path, monkeypatch):
    """The checks above read real files: a planted import must be found."""
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "bad.py").write_text("def f():\n    from sparkrecover.cli import render\n")
    (tmp_path / "driver" / "worse.py").write_text("from sparkrecover.launch.recovery import plan_resume\n")
    (tmp_path / "driver" / "tasks").mkdir()
    (tmp_path / "driver" / "tasks" / "bad.py").write_text("from sparkrecover.driver.recording import hooks\n")
    (tmp_path / "driver" / "recording").mkdir()
    (tmp_path / "driver" / "recording" / "worst.py").write_text("import sparkrecover.cli.app\n")
    (tmp_path / "jvm" / "commit").mkdir(parents=True)
    (tmp_path / "jvm" / "commit" / "Bad.java").write_text(
        "package sparkrecover.jvm.commit;\n\nimport sparkrecover.jvm.shuffle.KeptStore;\n"
        "import sparkrecover.jvm.bridge.DriverSignals;\n"
    )
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "bad.py").write_text("import os\nfrom sparkrecover.rundir import storage\n")
    (tmp_path / "core" / "fold").mkdir()
    (tmp_path / "core" / "fold" / "up.py").write_text("from sparkrecover.core.views import summary\n")
    (tmp_path / "planning").mkdir()
    (tmp_path / "planning" / "bad.py").write_text("from sparkrecover.launch import shuffles\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", str(tmp_path))
    assert core_offenders() == [
        "core/bad.py imports os",
        "core/bad.py imports sparkrecover.rundir.storage",
    ]
    assert offenders("driver", ("sparkrecover.cli", "sparkrecover.launch")) == [
        "driver/bad.py imports sparkrecover.cli",
        "driver/bad.py imports sparkrecover.cli.render",
        "driver/recording/worst.py imports sparkrecover.cli.app",
        "driver/worse.py imports sparkrecover.launch.recovery",
        "driver/worse.py imports sparkrecover.launch.recovery.plan_resume",
    ]
    assert java_offenders() == ["jvm/commit/Bad.java names sparkrecover.jvm.shuffle"]
    assert room_offenders("core") == [
        "core/fold/up.py imports sparkrecover.core.views",
        "core/fold/up.py imports sparkrecover.core.views.summary",
    ]
    assert room_offenders("driver") == [
        "driver/tasks/bad.py imports sparkrecover.driver.recording",
        "driver/tasks/bad.py imports sparkrecover.driver.recording.hooks",
    ]
    assert offenders("planning", ("sparkrecover.launch",)) == [
        "planning/bad.py imports sparkrecover.launch",
        "planning/bad.py imports sparkrecover.launch.shuffles",
    ]
