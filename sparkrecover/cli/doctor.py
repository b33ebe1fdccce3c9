"""``sparkrecover doctor``: one line per check (launch/readiness.py), exit 1 when one is a problem."""

from __future__ import annotations

from rich.text import Text

from sparkrecover.cli import render
from sparkrecover.errors import EXIT_NOT_READY
from sparkrecover.launch import readiness

_STYLES = {readiness.OK: "green", readiness.NOTE: "yellow", readiness.PROBLEM: "red bold"}
_WIDTH = max(len(name) for name in ("listener-jar", "driver-python", "spark-submit"))


def run(*, root: str | None, spark_submit: str | None, json_output: bool) -> int:
    findings = readiness.examine(root, spark_submit)
    problems = [finding for finding in findings if finding.status == readiness.PROBLEM]
    if json_output:
        render.emit_json({"ok": not problems, "checks": [finding.document() for finding in findings]})
    else:
        out = render.report()
        for finding in findings:
            out.print(
                Text.assemble(
                    (f"{finding.status:<8}", _STYLES[finding.status]), f"{finding.check:<{_WIDTH}}  {finding.detail}"
                ),
                soft_wrap=True,
            )
        if problems:
            named = ", ".join(finding.check for finding in problems)
            out.print(Text(f"{len(problems)} to fix: {named}"), soft_wrap=True)
        else:
            out.print(Text("all well: nothing to fix"))
    return EXIT_NOT_READY if problems else 0
