"""The command-line process: argument parsing (typer), one module per command, and all terminal
output (rich). The only package that imports typer or rich; nothing outside it imports it."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> None:
    """The ``sparkrecover`` entry point (see ``cli.app``)."""
    from sparkrecover.cli.app import main as run

    run(argv)
