"""Bad input in one voice: one line, `error: ...`, a documented exit code, nothing launched
(docs/cli.md, docs/decisions/0024-cli-rough-edges.md). On synthetic journals and a fake
spark-submit (no Spark)."""

from __future__ import annotations

import os

import orjson
import pytest

from tests import journals
from tests.helpers import fake_executable

IMPLICIT = "etl.py:36#1 overwrite /data/out/daily"


def implicit_run(root):
    """Two implicit writes of one call site and a declared stage, the last one unfinished."""
    run = journals.Run(root).start_attempt()
    run.done(IMPLICIT).done("etl.py:36#10 overwrite /data/out/weekly").done("clean")
    return run.started("etl.py:40#1 append /data/out/log").end(137, 9)


def dry_run(cli, tmp_path, *args):
    code, out, err = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run", "--json", *args)
    return code, (orjson.loads(out) if code == 0 else out), err


@pytest.mark.parametrize("given", ["etl.py:36#1", "etl.py:36#1 overwrite", IMPLICIT, "cle"])
def test_rerun_takes_the_name_people_see_or_a_unique_prefix(cli, tmp_path, given):
    implicit_run(tmp_path / "root")
    code, document, err = dry_run(cli, tmp_path, "--rerun", given)
    assert code == 0, err
    rerun = [s["stage"] for s in document["stages"] if s["decision"] == "rerun"]
    assert rerun == ["clean" if given == "cle" else IMPLICIT]


def test_rerun_of_an_ambiguous_prefix_names_the_candidates(cli, tmp_path):
    implicit_run(tmp_path / "root")
    code, out, err = dry_run(cli, tmp_path, "--rerun", "etl.py:36")
    assert (code, out) == (2, "")
    assert err == (
        "error: --rerun 'etl.py:36' names 2 stages of run r1: etl.py:36#1 overwrite /data/out/daily; "
        "etl.py:36#10 overwrite /data/out/weekly; give more of the name\n"
    )


def test_rerun_of_no_stage_lists_the_valid_names(cli, tmp_path):
    implicit_run(tmp_path / "root")
    code, out, err = dry_run(cli, tmp_path, "--rerun", "myjob.py:36#1")
    assert (code, out) == (2, "")
    assert err == (
        "error: --rerun 'myjob.py:36#1' names no stage of run r1; its stages: etl.py:36#1 overwrite "
        "/data/out/daily; etl.py:36#10 overwrite /data/out/weekly; clean; etl.py:40#1 append /data/out/log\n"
    )


# -- roots -------------------------------------------------------------------------------------------


@pytest.fixture
def app(tmp_path):
    (tmp_path / "app.py").write_text("print('never run by the fake')\n")
    return fake_executable(tmp_path / "fake-submit", f"touch {tmp_path}/launched\nexit 0")


def test_a_root_that_cannot_be_created_is_a_storage_error_before_anything_is_launched(cli, tmp_path, app):
    if os.geteuid() == 0:  # root writes anywhere: /proc refuses everyone
        code, out, err = cli("submit", "--root", "/proc/x", "--spark-submit", app, "--", "app.py")
    else:
        (tmp_path / "ro").mkdir()
        os.chmod(tmp_path / "ro", 0o500)
        try:
            code, out, err = cli("submit", "--root", str(tmp_path / "ro" / "x"), "--spark-submit", app, "--", "app.py")
        finally:
            os.chmod(tmp_path / "ro", 0o700)
    assert (code, out) == (3, "")
    assert err.startswith("error: cannot create ") and err.count("\n") == 1, err
    assert "journal in" not in err
    assert not (tmp_path / "launched").exists()


def test_an_empty_root_is_a_usage_error(cli, tmp_path, app):
    code, out, err = cli("submit", "--root", "", "--spark-submit", app, "--", "app.py")
    assert (code, out, err) == (
        2,
        "",
        "error: --root is empty: give a folder or URL, or leave --root out for the default\n",
    )
    assert not (tmp_path / "launched").exists() and not (tmp_path / ".sparkrecover").exists()
    assert cli("inspect", "--root", "")[0] == 2


def test_listing_a_root_that_is_not_there_exits_5(cli, tmp_path):
    code, out, err = cli("inspect", "--root", str(tmp_path / "no" / "such"))
    assert (code, out, err) == (5, "", f"error: no such root {tmp_path}/no/such: no run was ever started there\n")
    code, out, err = cli("inspect", "--root", str(tmp_path / "no" / "such"), "--json")
    assert (code, out) == (5, "")


# -- typos and usage errors ----------------------------------------------------------------------------


def test_a_typo_after_dashes_gets_did_you_mean(cli, tmp_path, app):
    code, out, err = cli("submit", "--spark-submit", app, "--", "--mastr", "local[2]", "app.py")
    assert (code, out) == (2, "")
    assert err == (
        "error: no such spark-submit option --mastr: did you mean --master? (local[2] was taken for the application)\n"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["inspect", "--bogus"], "error: no such option: --bogus (see 'sparkrecover inspect --help')\n"),
        (["replay"], "error: missing argument 'RUN' (see 'sparkrecover replay --help')\n"),
        (
            ["resume", "r1", "--verify"],
            "error: option '--verify' requires an argument (see 'sparkrecover resume --help')\n",
        ),
        (["runs"], "error: no such command 'runs': runs are listed by 'sparkrecover inspect' (one run: inspect RUN)\n"),
        (["list"], "error: no such command 'list': runs are listed by 'sparkrecover inspect' (one run: inspect RUN)\n"),
        (["inspec"], "error: no such command 'inspec': did you mean inspect?\n"),
    ],
)
def test_usage_errors_are_one_line_in_the_projects_voice(cli, args, message):
    assert cli(*args) == (2, "", message)


# -- --verify checksum without digests -------------------------------------------------------------------


def test_verify_checksum_of_a_run_recorded_without_digests_says_what_was_checked(cli, tmp_path):
    run = journals.Run(tmp_path / "root").start_attempt()
    run.done("a").started("b", ["a"]).end(1)
    code, out, err = cli("resume", "r1", "--root", str(tmp_path / "root"), "--dry-run", "--verify", "checksum")
    assert code == 0
    assert "output verified by size and footer (no checksums were recorded)" in out
    assert err == (
        "warning: --verify checksum: run r1 was recorded without checksums (submit --checksums records them); "
        "outputs were checked by file sizes, _SUCCESS and Parquet/ORC footers instead\n"
    )
