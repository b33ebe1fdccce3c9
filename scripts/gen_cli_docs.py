"""Write docs/cli.md, the command-line reference, from the ``--help`` of every command.

python scripts/gen_cli_docs.py           # (re)write it
python scripts/gen_cli_docs.py --check   # exit 1 if it is stale (the tests do this too)
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "cli.md")
WIDTH = "80"  # help is wrapped to the terminal (at most 80): fix it so the document is the same everywhere


def help_text(args: list[str]) -> str:
    from sparkrecover.cli import app as cli

    saved = {name: os.environ.get(name) for name in ("COLUMNS", "NO_COLOR")}
    os.environ.update(COLUMNS=WIDTH, NO_COLOR="1")
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            cli.main([*args, "--help"])
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return "\n".join(line.rstrip() for line in out.getvalue().strip().splitlines())


def commands() -> list[str]:
    import typer

    from sparkrecover.cli.app import app

    return [name for name, command in typer.main.get_command(app).commands.items() if not command.hidden]


def document() -> str:
    sys.path.insert(0, ROOT)
    parts = [
        "# sparkrecover command-line reference",
        "",
        "Generated from `--help` by `scripts/gen_cli_docs.py`: do not edit by hand (a test fails when",
        "this file drifts from the CLI). How the commands behave and their exit codes: [commands.md](commands.md);",
        "the journal: [journal.md](journal.md).",
        "",
    ]
    for path in [[], *([name] for name in commands())]:
        parts += [f"## sparkrecover {' '.join(path)}".rstrip(), "", "```text", help_text(path), "```", ""]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    content = document()
    current = open(DOC, encoding="utf-8").read() if os.path.exists(DOC) else None
    if current == content:
        return 0
    if "--check" in argv:
        print("docs/cli.md is stale; run: python scripts/gen_cli_docs.py", file=sys.stderr)
        return 1
    with open(DOC, "w", encoding="utf-8") as handle:
        handle.write(content)
    print("wrote docs/cli.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
