"""The CLI as users meet it: completions, the generated reference, help texts, start-up, usage errors."""

from __future__ import annotations

import glob
import importlib.util
import os
import shlex
import subprocess
import sys

import pytest
import typer

from sparkrecover.cli.app import app
from tests import journals

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def script(name: str):
    """A module of scripts/ (not a package), loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commands() -> dict:
    return typer.main.get_command(app).commands


def complete(cli, monkeypatch, words: str) -> list[str]:
    """What bash gets from sparkrecover for the words typed so far (the last one being completed)."""
    parts = words.split(" ")
    monkeypatch.setenv("_SPARKRECOVER_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", words)
    monkeypatch.setenv("COMP_CWORD", str(len(parts) - 1))
    code, out, err = cli()
    monkeypatch.delenv("_SPARKRECOVER_COMPLETE")
    assert (code, err) == (0, "")
    return out.split()


# -- completions ------------------------------------------------------------------------------------


def test_completion_scripts_are_generated_from_the_cli():
    generated = script("gen_completions").scripts()
    assert sorted(generated) == sorted(os.listdir(os.path.join(ROOT, "completions")))
    for name, content in generated.items():
        with open(os.path.join(ROOT, "completions", name), encoding="utf-8") as handle:
            assert handle.read() == content, f"completions/{name} is stale: run python scripts/gen_completions.py"


@pytest.mark.parametrize(
    "shell, name", [("bash", "sparkrecover.bash"), ("zsh", "sparkrecover.zsh"), ("fish", "sparkrecover.fish")]
)
def test_the_scripts_are_what_install_completion_installs(cli, monkeypatch, shell, name):
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")  # name the shell, don't guess it
    code, out, _err = cli("--show-completion", shell)
    with open(os.path.join(ROOT, "completions", name), encoding="utf-8") as handle:
        committed = handle.read().replace(script("gen_completions").HEADER, "")
    assert (code, out.strip()) == (0, committed.strip())


def test_completion_offers_every_command_and_each_of_its_options(cli, monkeypatch):
    assert complete(cli, monkeypatch, "sparkrecover ") == list(commands())
    assert complete(cli, monkeypatch, "sparkrecover re") == ["resume", "replay", "report"]
    for name, command in commands().items():
        options = [opt for param in command.params for opt in param.opts if opt.startswith("--")]
        assert complete(cli, monkeypatch, f"sparkrecover {name} --") == [*options, "--help"], name


def test_completion_offers_the_run_ids_under_the_root(cli, monkeypatch, tmp_path):
    journals.clean_run(tmp_path / "root")
    journals.SyntheticRun(tmp_path / "root", "nightly-2").attempt().end(0)
    root = str(tmp_path / "root")
    assert complete(cli, monkeypatch, f"sparkrecover inspect --root {root} ") == ["nightly", "nightly-2"]
    assert complete(cli, monkeypatch, f"sparkrecover replay --root {root} nightly-") == ["nightly-2"]
    monkeypatch.setenv("SPARKRECOVER_ROOT", root)
    assert complete(cli, monkeypatch, "sparkrecover resume n") == ["nightly", "nightly-2"]
    monkeypatch.setenv("SPARKRECOVER_ROOT", "s3://bucket/runs")  # TAB never waits on the network
    assert complete(cli, monkeypatch, "sparkrecover resume n") == []


def test_submit_keep_shuffles_completes_its_modes(cli, monkeypatch):
    assert complete(cli, monkeypatch, "sparkrecover submit --keep-shuffles ") == ["auto", "link", "copy", "off"]
    assert complete(cli, monkeypatch, "sparkrecover submit --keep-shuffles o") == ["off"]


def test_resume_verify_completes_its_levels(cli, monkeypatch):
    assert complete(cli, monkeypatch, "sparkrecover resume nightly --verify ") == ["size", "footer", "checksum"]
    assert complete(cli, monkeypatch, "sparkrecover resume nightly --verify f") == ["footer"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_complete_run_ids_and_verify_levels(cli, monkeypatch, tmp_path, shell):
    """What the zsh and fish scripts get from sparkrecover: they pass the command line typed so
    far in _TYPER_COMPLETE_ARGS (zsh wants an _arguments spec, fish one value a line)."""
    journals.clean_run(tmp_path / "root")
    journals.SyntheticRun(tmp_path / "root", "nightly-2").attempt().end(0)

    def offered(words: str) -> str:
        monkeypatch.setenv("_SPARKRECOVER_COMPLETE", f"complete_{shell}")
        monkeypatch.setenv("_TYPER_COMPLETE_ARGS", words)
        monkeypatch.setenv("_TYPER_COMPLETE_FISH_ACTION", "get-args")
        code, out, err = cli()
        assert (code, err) == (0, "")
        return out.strip()

    runs = offered(f"sparkrecover replay --root {tmp_path / 'root'} n")
    levels = offered("sparkrecover resume nightly --verify ")
    if shell == "zsh":
        assert (runs, levels) == (
            '_arguments \'*: :(("nightly"\n"nightly-2"))\'',
            '_arguments \'*: :(("size"\n"footer"\n"checksum"))\'',
        )
    else:
        assert (runs.split(), levels.split()) == (["nightly", "nightly-2"], ["size", "footer", "checksum"])


def test_the_bash_script_completes_in_bash(tmp_path):
    shim = tmp_path / "bin" / "sparkrecover"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m sparkrecover "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": ROOT}
    result = subprocess.run(
        [
            "bash",
            "--norc",
            "-c",
            f"source {ROOT}/completions/sparkrecover.bash; "
            "COMP_WORDS=(sparkrecover re); COMP_CWORD=1; _sparkrecover_completion sparkrecover; "
            'echo "${COMPREPLY[*]}"',
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "resume replay report\n", "")


# -- the reference and the help texts ---------------------------------------------------------------


def test_the_cli_reference_is_generated_from_help():
    with open(os.path.join(ROOT, "docs", "cli.md"), encoding="utf-8") as handle:
        assert handle.read() == script("gen_cli_docs").document(), (
            "docs/cli.md is stale: run python scripts/gen_cli_docs.py"
        )


def test_every_command_and_option_has_help():
    group = typer.main.get_command(app)
    missing = [name for name, command in group.commands.items() if not (command.help or "").strip()]
    for name, command in [("sparkrecover", group), *group.commands.items()]:
        for param in command.params:
            if not (getattr(param, "help", None) or "").strip():
                missing.append(f"{name} {param.opts[0] if param.opts else param.name}")
    assert missing == []


def test_usage_lines_say_what_goes_where(cli):
    usage = {}
    for name in commands():
        code, out, _ = cli(name, "--help")
        assert code == 0
        usage[name] = out.splitlines()[0]
        assert "options above" not in out  # the options are listed below the text
    assert usage == {
        "submit": "Usage: sparkrecover submit [OPTIONS] [--] [SPARK-SUBMIT OPTIONS] APP [APP ARGS]",
        "resume": "Usage: sparkrecover resume [OPTIONS] RUN [-- SPARK-SUBMIT OPTIONS]",
        "inspect": "Usage: sparkrecover inspect [OPTIONS] [RUN]",
        "replay": "Usage: sparkrecover replay [OPTIONS] RUN",
        "report": "Usage: sparkrecover report [OPTIONS] RUN",
        "spark-submit-args": (
            "Usage: sparkrecover spark-submit-args [OPTIONS] [--] [SPARK-SUBMIT OPTIONS] APP [APP ARGS]"
        ),
        "doctor": "Usage: sparkrecover doctor [OPTIONS]",
    }


def test_every_command_has_an_example_its_parser_accepts():
    """Each help text shows the command at work (an indented line of its own), and every such
    example is a command line the command accepts: an option renamed or removed fails here."""
    for name, command in commands().items():
        examples = [
            line.strip() for line in (command.help or "").splitlines() if line.startswith(f"    sparkrecover {name}")
        ]
        assert examples, name
        for example in examples:
            words = shlex.split(example.split(" > ")[0])[2:]
            with command.make_context(name, words) as context:
                assert context.command is command, example


# -- rules of the house -----------------------------------------------------------------------------

HEAVY = (
    "pyspark",
    "py4j",
    "fsspec",
    "s3fs",
    "rich",
    "orjson",
    "sparkrecover.journal",
    "sparkrecover.core.verdicts.planner",
    "sparkrecover.driver.api",
    "sparkrecover.driver.process.telemetry",
)


def test_help_starts_without_heavy_imports():
    """docs/design.md §9: the heavy modules are imported only by the commands that need them."""
    probe = (
        "import sys\nfrom sparkrecover import cli\ntry:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert result.stderr.strip().splitlines()[-1] == "[]"
    assert "replay" in result.stdout and "submit" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "--bogus"],
        ["replay"],
        ["resume", "r1", "--verify"],
        ["resume"],
        ["resume", "run-1", "--no-such-option"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_2_with_a_message_not_a_crash(cli, args, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where a crash log would go
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    code, out, err = cli(*args)
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err
    assert not glob.glob(str(tmp_path / "sparkrecover-crash-*"))


def test_the_shared_options_object_takes_each_commands_own_options_by_name():
    """submit, spark-submit-args and resume hand their options down as one RunOptions built from
    click's parsed parameters by name (launch/options.py): a field no command has as a parameter,
    or a parameter renamed away from its field, would be silently left at its default."""
    import dataclasses

    from sparkrecover.launch.options import RunOptions

    command = typer.main.get_command(app)
    params = {
        name: {p.name for p in command.commands[name].params} for name in ("submit", "spark-submit-args", "resume")
    }
    shared = {field.name for field in dataclasses.fields(RunOptions)}
    assert shared <= params["submit"]
    assert shared - params["spark-submit-args"] == {"max_attempts"}  # a launcher retries, not sparkrecover
    assert shared & params["resume"] == {"root", "spark_submit", "max_attempts", "json_output", "no_class_archive"}


def test_an_option_several_commands_share_is_declared_once():
    """--root (seven commands), --max-attempts, the journal's options and RUN are one declaration
    each in cli/app.py, so their help cannot drift apart (--spark-submit and --keep-shuffles one
    each too, with the help each command gives); --json twice: the run's outcome (submit,
    resume) and the view (inspect, replay), spark-submit-args' and doctor's being other documents."""
    import sparkrecover.cli.app as module

    source = open(module.__file__, encoding="utf-8").read()
    shared = (
        "--root",
        "--max-attempts",
        "--flush-interval",
        "--buffer-size",
        "--checksums",
        "--checkpoint-root",
        "--spark-submit",
        "--keep-shuffles",
        "--no-class-archive",
    )
    assert {name: source.count(f'"{name}"') for name in shared} == dict.fromkeys(shared, 1)
    assert source.count('"--json"') == 4
    assert source.count('metavar="RUN"') == 2  # inspect's RUN is optional and lists the runs
    commands = {command.name or command.callback.__name__: command.callback for command in app.registered_commands}
    with_root = [name for name, callback in commands.items() if "root" in callback.__code__.co_varnames]
    assert len(with_root) == 7
