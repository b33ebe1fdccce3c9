"""RunState: attempt outcomes and the run's status, folded from journal records."""

from __future__ import annotations

import pytest

from sparkrecover.core.fold.runstate import RunState


def event(type_, seq, attempt=1, writer="cli", **payload):
    return {
        "v": 1,
        "type": type_,
        "run": "r1",
        "attempt": attempt,
        "writer": writer,
        "seq": seq,
        "ts": f"2026-01-01T00:00:{seq:02d}.000Z",
        **payload,
    }


@pytest.mark.parametrize(
    "ended, outcome",
    [
        ({"exit_code": 0, "signal": None}, "succeeded"),
        ({"exit_code": 1, "signal": None}, "failed"),
        ({"exit_code": 137, "signal": 9}, "crashed"),
        ({"exit_code": 139, "signal": 11}, "crashed"),
        ({"exit_code": 130, "signal": 2}, "interrupted"),
        ({"exit_code": 143, "signal": 15}, "interrupted"),
        (None, "crashed"),
    ],
)
def test_attempt_outcomes(ended, outcome):
    records = [event("run.started", 0, app="app.py"), event("attempt.started", 1)]
    if ended is not None:
        records.append(event("attempt.ended", 2, **ended))
    state = RunState.from_events("r1", records)
    attempt = state.attempts[1]
    assert attempt.outcome == outcome
    assert (attempt.exit_code, attempt.signal) == ((ended or {}).get("exit_code"), (ended or {}).get("signal"))
    assert state.status() == outcome
    assert state.succeeded is (outcome == "succeeded")
    assert state.status(lease_live=True) == ("running" if ended is None else outcome)


@pytest.mark.parametrize(
    "ended, outcome",
    [
        ({"exit_code": 143, "signal": 15}, "interrupted"),
        ({"exit_code": 130, "signal": 2}, "interrupted"),
        ({"exit_code": 1, "signal": None}, "failed"),
        ({"exit_code": 0, "signal": 15}, "succeeded"),  # the script caught it and finished
    ],
)
def test_a_driver_that_outlived_its_cli_says_how_it_ended(ended, outcome):
    """No attempt.ended (a cluster-mode driver, a CLI killed first): the driver's own word."""
    records = [event("attempt.started", 0), event("driver.ended", 0, writer="driver", error=None, **ended)]
    assert RunState.from_events("r1", records).attempts[1].outcome == outcome


def test_the_last_attempt_decides_the_run_status():
    state = RunState.from_events(
        "r1",
        [
            event("attempt.started", 0),
            event("attempt.ended", 1, exit_code=137, signal=9),
            event("attempt.started", 2, attempt=2),
            event("attempt.ended", 3, attempt=2, exit_code=0),
        ],
    )
    assert [a.outcome for a in state.attempts.values()] == ["crashed", "succeeded"]
    assert state.status() == "succeeded" and state.last_attempt.number == 2


def test_unknown_event_types_are_counted_not_fatal():
    state = RunState.from_events(
        "r1",
        [
            event("run.started", 0, app="app.py"),
            event("attempt.started", 1),
            event("stage.started", 2, writer="driver", stage="a", upstream=[]),
            event("spark.task.speculated", 3, writer="driver", stage="a"),
            event("something.new", 4, writer="driver", payload={"x": 1}),
            event("stage.committed", 5, writer="driver", stage="a", manifest=[]),
            event("attempt.ended", 6, exit_code=0),
        ],
    )
    assert (state.other_events, state.event_count) == (2, 7)
    assert list(state.stages) == ["a"] and state.stages["a"].status == "committed"
    assert state.status() == "succeeded"
    assert (state.first_ts, state.last_ts) == ("2026-01-01T00:00:00.000Z", "2026-01-01T00:00:06.000Z")
