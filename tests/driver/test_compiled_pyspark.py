"""pyspark imported from the installed package's compiled files, not from the zip spark-submit puts
first on the path (driver/process/compiled_pyspark.py): in fresh Python processes whose PYTHONPATH starts
as spark-submit starts a driver's or a Python worker's, with the real pyspark of this environment;
and every layout where the zip is not the installed package's own left as it is."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pyspark

from sparkrecover.driver import bootstrap
from sparkrecover.driver.process import compiled_pyspark

PACKAGE = os.path.dirname(os.path.abspath(pyspark.__file__))
ZIP = os.path.join(PACKAGE, "python", "lib", "pyspark.zip")
WHERE = "import pyspark, pyspark.sql; print(pyspark.__file__); print(pyspark.sql.__file__)"


def run(code: str, pythonpath: list[str]) -> list[str]:
    """What a fresh interpreter prints, with only ``pythonpath`` on PYTHONPATH (not the tests'
    own sitecustomize, which would do the same for every process)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_spark_submits_zip_is_what_python_imports_otherwise():
    assert os.path.isfile(ZIP), "pip's pyspark ships its sources as python/lib/pyspark.zip"
    assert all(path.startswith(ZIP + os.sep) for path in run(WHERE, [ZIP]))


def test_the_installed_package_is_imported_instead_of_its_own_zip():
    prefer = "from sparkrecover.driver.process import compiled_pyspark; print(compiled_pyspark.prefer_compiled())"
    found = run(f"{prefer}; {WHERE}", [ZIP])
    assert found[0] == PACKAGE
    assert found[1] == os.path.join(PACKAGE, "__init__.py")
    assert found[2] == os.path.join(PACKAGE, "sql", "__init__.py")


def test_the_driver_bootstrap_does_it_before_anything_imports_pyspark():
    code = (
        "import runpy, sys\n"
        f"sys.argv = [{bootstrap.__file__!r}]\n"
        "try:\n"
        f"    runpy.run_path({bootstrap.__file__!r}, run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"  # no script to run: the bootstrap's top has run all the same
        "import pyspark; print(pyspark.__file__)\n"
    )
    assert run(code, [ZIP]) == [os.path.join(PACKAGE, "__init__.py")]


def fake_spark(tmp_path, *, installed: bool):
    """A Spark home with python/lib/pyspark.zip whose pyspark says where it came from; with
    ``installed``, laid out as pip's package (the home is itself an importable ``pyspark``)."""
    home = tmp_path / "site" / "pyspark" if installed else tmp_path / "spark"
    lib = home / "python" / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as archive:
        archive.writestr("pyspark/__init__.py", "WHERE = 'zip'\n")
    if installed:
        (home / "__init__.py").write_text("WHERE = 'installed'\n")
    return str(lib / "pyspark.zip"), str(home.parent)


def test_a_spark_distributions_zip_stays_first(tmp_path):
    zip_path, _ = fake_spark(tmp_path, installed=False)
    assert compiled_pyspark.installed_package_of(zip_path) is None
    assert compiled_pyspark.installed_first([zip_path, str(tmp_path)]) is None


def test_the_first_pyspark_on_the_path_decides(tmp_path):
    zip_path, site = fake_spark(tmp_path, installed=True)
    other_zip, _ = fake_spark(tmp_path / "other", installed=False)
    mine = tmp_path / "mine" / "pyspark"
    mine.mkdir(parents=True)
    (mine / "__init__.py").write_text("WHERE = 'mine'\n")
    assert compiled_pyspark.installed_first([str(mine.parent), zip_path, site]) is None
    assert compiled_pyspark.installed_first([other_zip, zip_path, site]) is None
    assert compiled_pyspark.installed_first(["py4j-src.zip", zip_path, site]) == os.path.join(site, "pyspark")


def test_the_redirected_package_is_the_installed_one_in_a_fresh_process(tmp_path):
    zip_path, site = fake_spark(tmp_path, installed=True)
    code = (
        "from sparkrecover.driver.process import compiled_pyspark\n"
        "first = compiled_pyspark.prefer_compiled()\n"
        "assert compiled_pyspark.prefer_compiled() is None  # once\n"
        "import pyspark; print(first, pyspark.WHERE)\n"
    )
    assert run(code, [zip_path, site]) == [os.path.join(site, "pyspark"), "installed"]
    assert run("import pyspark; print(pyspark.WHERE)", [zip_path, site]) == ["zip"]
