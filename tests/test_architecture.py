"""The layout's rules (docs/architecture.md), checked on the code's own imports: the command line
and the driver are two processes, and each package may only lean on what sits below it."""

from __future__ import annotations

import ast
import os
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
    """The planner and the views are told what survives on storage (core/evidence.py); they read nothing."""
    assert core_offenders() == []


def test_the_rules_see_a_violation(tmp_path, monkeypatch):
    """The checks above read real files: a planted import must be found."""
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "bad.py").write_text("def f():\n    from sparkrecover.cli import render\n")
    (tmp_path / "driver" / "worse.py").write_text("from sparkrecover.launch.recovery import plan_resume\n")
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "bad.py").write_text("import os\nfrom sparkrecover.rundir import storage\n")
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
        "driver/worse.py imports sparkrecover.launch.recovery",
        "driver/worse.py imports sparkrecover.launch.recovery.plan_resume",
    ]
    assert offenders("planning", ("sparkrecover.launch",)) == [
        "planning/bad.py imports sparkrecover.launch",
        "planning/bad.py imports sparkrecover.launch.shuffles",
    ]
