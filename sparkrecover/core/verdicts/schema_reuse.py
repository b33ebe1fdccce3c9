"""Which inferred schemas a resumed attempt may reuse: the command line's half.

The driver journals ``schema.inferred`` for each read whose schema Spark inferred with a pass over
the data (``driver/recording/schema_reads.py``); ``RunState.schemas`` keeps the latest per read key. Before launch
the recorded input files are checked as stage inputs are (``staleness.changed_inputs``): a schema
whose files are gone or rewritten is inferred again. Files added since are the driver's to find:
it compares the read's whole listing with ``input_digest`` before it uses a schema.
"""

from __future__ import annotations

from sparkrecover.core.fold.runstate import RunState
from sparkrecover.core.verdicts import staleness
from sparkrecover.rundir.plans import SchemaEntry


def reusable(state: RunState, stat: staleness.Stat, *, from_scratch: bool = False) -> list[SchemaEntry]:
    """The plan's ``schemas``: what the driver needs to use each schema, and why it may."""
    if from_scratch:
        return []  # --from-scratch: nothing of an earlier attempt is taken on trust
    found = []
    for key, record in state.schemas.items():
        listed = record.get("input_files")
        count = int(record.get("input_count") or 0)
        if listed is None:
            reason = f"{count:,} input files, checked when read"
        elif staleness.changed_inputs({"input_files": listed}, stat):
            continue
        else:
            reason = "inputs unchanged"
        found.append(
            SchemaEntry(
                key=key,
                format=record["format"],
                paths=list(record.get("paths") or []),
                call_site=record.get("call_site"),
                attempt=record["attempt"],
                schema=record["schema"],
                input_digest=record["input_digest"],
                input_count=count,
                reason=reason,
            )
        )
    return found
