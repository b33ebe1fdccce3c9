"""Every shell line of README.md's "Under another launcher" and of docs/launchers.md runs as
written: pasted into bash, it hands spark-submit the arguments it means (a shell-quoted
``'local[*]'`` arrives as ``local[*]``), and the README's line runs a real application.

A line is one of a ```bash block (a trailing backslash joins the next). The lines run with a
spark-submit on PATH that records its arguments; the only things changed are the places: a root
on HDFS becomes the tests' viewfs:// stand-in (tests/hdfslike), absolute script paths a file here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.helpers import fake_executable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
README_SECTION = "## Under another launcher"
BOOTSTRAP_TAIL = os.path.join("sparkrecover", "driver", "bootstrap.py")


def bash_lines(text: str) -> list[str]:
    found = []
    for block in BASH_BLOCK.findall(text):
        joined = block.replace("\\\n", " ")
        found += [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]
    return found


def readme_section() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    start = text.index(README_SECTION)
    end = text.find("\n## ", start + len(README_SECTION))
    return text[start : end if end != -1 else len(text)]


def launchers_page() -> str:
    with open(os.path.join(ROOT, "docs", "launchers.md"), encoding="utf-8") as handle:
        return handle.read()


def documented_lines() -> list[tuple[str, str]]:
    return [("README.md", line) for line in bash_lines(readme_section())] + [
        ("docs/launchers.md", line) for line in bash_lines(launchers_page())
    ]


def test_the_pages_have_shell_lines_to_run():
    """The extraction finds them (a test that runs nothing proves nothing)."""
    pages = {page for page, _ in documented_lines()}
    assert pages == {"README.md", "docs/launchers.md"}
    assert any("spark-submit-args" in line for _, line in documented_lines())


def _place_here(line: str, tmp_path) -> str:
    """The line with its places moved here: an HDFS root onto the viewfs stand-in, /jobs onto a folder."""
    line = line.replace("hdfs:///user/etl/sparkrecover", "viewfs://etl/sparkrecover")
    return line.replace("/jobs/", f"{tmp_path}/jobs/")


@pytest.mark.parametrize(("page", "line"), documented_lines(), ids=lambda value: value[:60])
def test_each_line_hands_spark_submit_the_arguments_it_means(page, line, tmp_path, monkeypatch):
    calls = tmp_path / "spark-submit-calls.jsonl"
    record = f"import json, os, sys\nopen({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    fake = tmp_path / "bin" / "spark-submit"
    fake_executable(fake, f'exec "{sys.executable}" -c "$RECORD" "$@"')
    (tmp_path / "etl.py").write_text("print('the application')\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "etl.py").write_text("print('the application')\n")
    (tmp_path / "hdfs").mkdir()
    env = {
        **os.environ,
        "RECORD": record,
        "PATH": os.pathsep.join([str(fake.parent), os.path.dirname(sys.executable), os.environ["PATH"]]),
        "SPARKRECOVER_ROOT": str(tmp_path / "runs"),
        "SPARKRECOVER_NO_JVM_LISTENER": "1",  # no javac run against a fake Spark
        "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "tests", "hdfslike"), os.environ.get("PYTHONPATH", "")]),
        "SPARKRECOVER_TEST_VIEWFS": f"etl={tmp_path / 'hdfs'}",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _place_here(line, tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{page}: {line}\n{done.stderr}"
    assert "error" not in done.stderr, done.stderr
    if not calls.exists():
        assert line.startswith("sparkrecover spark-submit-args"), f"{line}: spark-submit never ran\n{done.stderr}"
        assert done.stdout.strip(), line  # it printed what to hand on
        return
    argv = json.loads(calls.read_text().splitlines()[-1])
    assert argv[next(i for i, a in enumerate(argv) if a.endswith(BOOTSTRAP_TAIL))].endswith(BOOTSTRAP_TAIL)
    given = re.search(r"--master '?([^' ]+)'?", line)
    if given:
        assert argv[argv.index("--master") + 1] == given.group(1), argv
    # The script is handed on whole, after the bootstrap's own arguments.
    script = argv[argv.index("--", argv.index("--run-id")) + 1]
    assert os.path.basename(script) == "etl.py" and os.path.isfile(script), argv


@pytest.mark.e2e
def test_the_readme_line_runs_an_application_under_a_real_spark_submit(tmp_path):
    """Pasted as written (its run id and script): the application runs, the run succeeds, and the
    same line again runs nothing."""
    (line,) = bash_lines(readme_section())
    (tmp_path / "etl.py").write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "spark.range(10).write.mode('overwrite').parquet('out')\n"
        "spark.stop()\n"
    )
    env = {**os.environ, "SPARKRECOVER_ROOT": str(tmp_path / "runs")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
    first = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert (tmp_path / "out" / "_SUCCESS").exists()
    again = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    said = again.stdout + again.stderr  # the driver's own line: spark-submit decides where it goes
    assert "run nightly-2026-11-21 already completed successfully: this driver runs nothing" in said
