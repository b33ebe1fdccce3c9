"""replay: the timeline, --until, --json and --verify on synthetic journals (no Spark)."""

from __future__ import annotations

import os
import shutil

import orjson
import pytest

from sparkrecover.core.views import timeline
from sparkrecover.errors import UsageError
from sparkrecover.journal import JournalWriter
from sparkrecover.rundir.runs import Run
from tests import journals
from tests.helpers import on_screen

TIMELINE_OF_THE_RESUMED_RUN = """\
journal of run nightly at <tmp>/root/nightly: 29 events
     #  time (UTC)    att writer  event                   stage   fact
── 2026-11-22 ──
     1  03:00:00.500    1 cli     run.started             -       /jobs/etl.py --day 2026-11-21  (spark-submit --master local[2])
     2  03:00:01.000    1 cli     attempt.started         -       spark-submit started by pid 4242
     3  03:00:01.500    1 driver  driver.started          -       local-1700000001 on local[2] (client), Spark 3.5.8
     4  03:00:02.000    1 driver  stage.started           orders  checkpoint; writes <tmp>/data/orders
     5  03:00:02.500    1 driver  spark.job.started       orders  Spark job 1
     6  03:00:03.000    1 driver  spark.stage.completed   orders  Spark stage 1.0: 2 tasks, 1,000 rows written
     7  03:00:03.500    1 driver  spark.job.ended         orders  Spark job 1 succeeded
     8  03:00:04.000    1 driver  stage.committed         orders  2 files, 3.0 KiB in 2.0s
     9  03:00:04.500    1 driver  stage.started           clean   checkpoint; writes <tmp>/data/clean; reads orders
    10  03:00:05.000    1 driver  spark.job.started       clean   Spark job 2
    11  03:00:05.500    1 driver  spark.stage.completed   clean   Spark stage 2.0: 2 tasks, 800 rows written
    12  03:00:06.000    1 driver  spark.job.ended         clean   Spark job 2 succeeded
    13  03:00:06.500    1 driver  stage.committed         clean   2 files, 3.0 KiB in 2.0s
    14  03:00:07.000    1 driver  stage.started           daily   checkpoint; writes <tmp>/data/daily; reads clean
    15  03:00:07.500    1 driver  spark.job.started       daily   Spark job 3
    16  03:00:08.000    1 driver  spark.stage.completed   daily   Spark stage 3.0: 4 tasks, 1 failed
    17  03:00:08.500    1 driver  spark.job.ended         daily   Spark job 3 succeeded
    18  03:00:09.000    2 cli     attempt.started         -       spark-submit started by pid 4242
    19  03:00:09.500    2 cli     plan.created            -       plan: 2 skip, 1 run (plans/0002.json)
    20  03:00:10.000    2 driver  driver.started          -       local-1700000002 on local[2] (client), Spark 3.5.8
    21  03:00:10.500    2 driver  stage.skipped           orders  committed in attempt 1, output verified
    22  03:00:11.000    2 driver  stage.skipped           clean   committed in attempt 1, output verified
    23  03:00:11.500    2 driver  stage.started           daily   checkpoint; writes <tmp>/data/daily; reads clean
    24  03:00:12.000    2 driver  spark.job.started       daily   Spark job 4
    25  03:00:12.500    2 driver  spark.stage.completed   daily   Spark stage 4.0: 2 tasks, 30 rows written
    26  03:00:13.000    2 driver  spark.job.ended         daily   Spark job 4 succeeded
    27  03:00:13.500    2 driver  stage.committed         daily   2 files, 3.0 KiB in 2.0s
    28  03:00:14.000    2 driver  driver.ended            -       exit 0
    29  03:00:14.500    2 cli     attempt.ended           -       exit 0
"""  # noqa: E501 - the expected timeline is wider than 120 columns, as replay prints it

STATE_AT_EVENT_21 = """\

stopped after event 21 (2:driver:1 at 2026-11-22T03:00:10.500Z); the run as it stood then:
run nightly  running
app:        /jobs/etl.py
root:       <tmp>/root
journal:    <tmp>/root/nightly
time:       10.0s from first to last event, 9.0s in 2 attempts
stages
┏━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━┓
┃ stage  ┃ status     ┃ attempt ┃ duration ┃  rows ┃ written ┃ jobs ┃ spark stages ┃ tasks ┃ failures ┃
┡━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━┩
│ orders │ skipped    │       1 │     2.0s │ 1,000 │ 3.0 KiB │    1 │            1 │     2 │ -        │
│ clean  │ committed  │       1 │     2.0s │   800 │ 3.0 KiB │    1 │            1 │     2 │ -        │
│ daily  │ unfinished │       1 │        - │     - │       - │    1 │            1 │     4 │ 1 task   │
└────────┴────────────┴─────────┴──────────┴───────┴─────────┴──────┴──────────────┴───────┴──────────┘
  orders: skipped in attempt 2: committed in attempt 1, output verified
attempts
┏━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┓
┃ attempt     ┃ outcome ┃ exit ┃ started (UTC)       ┃ duration ┃ plan          ┃ application id   ┃
┡━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━┩
│ 1           │ crashed │ -    │ 2026-11-22 03:00:01 │ 7.5s     │ -             │ local-1700000001 │
│ 2 (resumed) │ running │ -    │ 2026-11-22 03:00:09 │ 1.5s     │ 2 skip, 1 run │ local-1700000002 │
└─────────────┴─────────┴──────┴─────────────────────┴──────────┴───────────────┴──────────────────┘
what resume --dry-run would have decided then (attempt 3; outputs checked as they are now)
┏━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ stage  ┃ decision ┃ reason                                  ┃
┡━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ orders │ skip     │ committed in attempt 1, output verified │
│ clean  │ skip     │ committed in attempt 1, output verified │
│ daily  │ run      │ started in attempt 1 but not committed  │
└────────┴──────────┴─────────────────────────────────────────┘
"""


def replay_cli(cli, tmp_path, *args):
    return on_screen(cli, tmp_path, "replay", *args)


def test_timeline_of_a_resumed_run(cli, tmp_path):
    journals.resumed_run(tmp_path / "root")
    code, out, err = replay_cli(cli, tmp_path, "nightly")
    assert (code, err) == (0, "")
    assert (
        out == TIMELINE_OF_THE_RESUMED_RUN + "end of the journal: run succeeded, 3/3 stages committed, 2 attempt(s)\n"
    )


@pytest.mark.parametrize(
    "until", ["21", "2:driver:1", "2026-11-22T03:00:10.500Z", "2026-11-22T04:00:10.7+01:00", "2026-11-22 03:00:10.5"]
)
def test_until_shows_the_run_then_and_what_resume_would_have_decided(cli, tmp_path, until):
    journals.resumed_run(tmp_path / "root")
    code, out, err = replay_cli(cli, tmp_path, "nightly", "--until", until)
    assert (code, err) == (0, "")
    timeline = TIMELINE_OF_THE_RESUMED_RUN.splitlines(keepends=True)
    assert out == "".join(timeline[:24]) + STATE_AT_EVENT_21


def test_until_checks_outputs_as_they_are_now(cli, tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    shutil.rmtree(run.outputs("orders"))
    _code, out, _ = replay_cli(cli, tmp_path, "nightly", "--until", "13", "--json")
    assert orjson.loads(out)["plan"] == {
        "run": "nightly",
        "attempt": 2,
        "stages": [
            {"stage": "orders", "decision": "lost", "reason": f"output lost: {run.outputs('orders')} is gone"},
            {"stage": "clean", "decision": "skip", "reason": "committed in attempt 1, output verified"},
        ],
    }


def test_the_end_of_a_crashed_attempt_is_a_crash_not_a_running_attempt(cli, tmp_path):
    journals.crashed_run(tmp_path / "root")
    _code, out, _ = replay_cli(cli, tmp_path, "nightly", "--until", "17", "--json")
    state = orjson.loads(out)["state"]
    assert (state["status"], state["stopped_in"]) == ("crashed", ["daily"])
    _code, out, _ = replay_cli(cli, tmp_path, "nightly", "--until", "16", "--json")
    assert orjson.loads(out)["state"]["status"] == "running"  # the attempt went on writing after 16


def test_json_emits_the_normalized_events(cli, tmp_path):
    journals.invalidated_run(tmp_path / "root")
    code, out, err = replay_cli(cli, tmp_path, "nightly", "--json")
    assert (code, err) == (0, "")
    document = orjson.loads(out)
    assert (document["run"], document["until"], document["state"]["status"]) == ("nightly", None, "succeeded")
    assert "plan" not in document
    events = document["events"]
    assert [e["index"] for e in events] == list(range(1, 35))
    assert events[21] == {
        "index": 22,
        "v": 1,
        "type": "stage.invalidated",
        "run": "nightly",
        "attempt": 2,
        "writer": "driver",
        "seq": 2,
        "ts": "2026-11-22T03:00:11.000Z",
        "stage": "clean",
        "reason": "fingerprint changed: version None -> 2",
    }
    code, out, _ = replay_cli(cli, tmp_path, "nightly", "--json", "--until", "2:driver:2")
    document = orjson.loads(out)
    assert document["until"] == {
        "given": "2:driver:2",
        "index": 22,
        "event": "2:driver:2",
        "ts": "2026-11-22T03:00:11.000Z",
    }
    assert len(document["events"]) == 22
    assert {s["stage"]: s["status"] for s in document["state"]["stages"]} == {
        "orders": "skipped",
        "clean": "invalidated",
        "daily": "failed",
    }
    assert [s["decision"] for s in document["plan"]["stages"]] == ["skip", "skip", "run"]


def test_the_invalidated_and_failed_events_read_as_one_line_each(cli, tmp_path):
    journals.invalidated_run(tmp_path / "root")
    _code, err, _err = replay_cli(cli, tmp_path, "nightly")
    assert (
        "    15  03:00:07.500    1 driver  stage.failed            daily   Py4JJavaError: An error occurred "
        "while calling o123.save.\n"
    ) in err
    assert "    16  03:00:08.000    1 driver  driver.ended            -       exit 1: boom\n" in err
    assert (
        "    22  03:00:11.000    2 driver  stage.invalidated       clean   fingerprint changed: version None -> 2\n"
    ) in err


def test_unknown_event_types_are_shown_with_their_payload(cli, tmp_path):
    run = journals.SyntheticRun(tmp_path / "root").attempt()
    run.driver.emit("spark.task.speculated", stage="orders", task=7, host="worker-2")
    run.end(0)
    _code, err, _err = replay_cli(cli, tmp_path, "nightly")
    assert '     4  03:00:02.000    1 driver  spark.task.speculated   orders  {"task":7,"host":"worker-2"}\n' in err


@pytest.mark.parametrize(
    "until, message",
    [
        ("0", "--until 0: events are numbered from 1"),
        ("18", "--until 18: the journal has 17 events"),
        ("1:driver:99", "--until 1:driver:99: no event 1:driver:99 in the journal"),
        ("2026-11-21T23:00:00Z", "--until 2026-11-21T23:00:00Z: the journal starts later, at 2026-11-22T03:00:00.500Z"),
        (
            "yesterday",
            "--until yesterday: expected an event number as replay prints it, ATTEMPT:WRITER:SEQ "
            "(e.g. 2:driver:14) or an ISO time (e.g. 2026-11-22T03:15:00Z)",
        ),
    ],
)
def test_bad_until_is_a_usage_error(cli, tmp_path, until, message):
    journals.crashed_run(tmp_path / "root")
    assert replay_cli(cli, tmp_path, "nightly", "--until", until) == (2, "", f"error: {message}\n")


def test_parse_until():
    assert timeline.parse_until("12") == timeline.Until("12", index=12)
    assert timeline.parse_until("3:cli:0").address == (3, "cli", 0)
    assert timeline.parse_until("2026-11-22T05:15:00.123456+02:00").time == "2026-11-22T03:15:00.123Z"
    with pytest.raises(UsageError):
        timeline.parse_until("2:driver")


def test_unknown_run_and_corrupt_journal(cli, tmp_path):
    assert replay_cli(cli, tmp_path, "nope") == (5, "", "error: no run 'nope' at <tmp>/root/nope\n")
    run = journals.crashed_run(tmp_path / "root")
    path = os.path.join(run.dir, "journal", "0001-cli-000000.jsonl")
    with open(path, "r+b") as handle:
        handle.write(b"[1,")
    assert replay_cli(cli, tmp_path, "nightly") == (
        3,
        "",
        "error: <tmp>/root/nightly/journal/0001-cli-000000.jsonl:1: malformed journal line. "
        "The journal of run nightly is damaged: 'sparkrecover replay nightly --root <tmp>/root "
        "--verify' lists every damaged line; 'sparkrecover resume nightly --root <tmp>/root --from-scratch' sets the "
        "damaged segments aside (in journal.damaged/) and runs "
        "every stage again\n",
    )


# -- --verify ---------------------------------------------------------------------------------------


def segment(run, attempt=1, writer="driver", index=0) -> str:
    return os.path.join(run.dir, "journal", f"{attempt:04d}-{writer}-{index:06d}.jsonl")


def edit_lines(path, change) -> None:
    with open(path, "rb") as handle:
        lines = handle.read().split(b"\n")
    with open(path, "wb") as handle:
        handle.write(b"\n".join(change(lines)))


def verify(cli, tmp_path):
    return replay_cli(cli, tmp_path, "nightly", "--verify")


def test_verify_a_sound_journal(cli, tmp_path):
    journals.resumed_run(tmp_path / "root")
    assert verify(cli, tmp_path) == (
        0,
        """\
journal of run nightly at <tmp>/root/nightly: 4 segment(s), 29 events (1/cli 2, 1/driver 15, 2/cli 3, 2/driver 9)
journal OK: 0 problems, 0 warnings
""",
        "",
    )
    code, out, err = replay_cli(cli, tmp_path, "nightly", "--verify", "--json")
    report = orjson.loads(out)
    assert (code, err, report["ok"], report["events"], report["problems"], report["warnings"]) == (
        0,
        "",
        True,
        29,
        [],
        [],
    )
    assert report["streams"][0] == {"attempt": 1, "writer": "cli", "segments": 1, "events": 2}
    assert report["event_types"]["stage.skipped"] == 2


def test_verify_reports_a_torn_tail_as_a_warning(cli, tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    edit_lines(segment(run), lambda lines: [*lines[:-2], lines[-2][:25]])
    assert verify(cli, tmp_path) == (
        0,
        """\
journal of run nightly at <tmp>/root/nightly: 2 segment(s), 16 events (1/cli 2, 1/driver 14)
warning: <tmp>/root/nightly/journal/0001-driver-000000.jsonl:15: torn last line (25 bytes; the writer stopped \
mid-write); readers drop it
journal OK: 0 problems, 1 warning
""",
        "",
    )


def test_verify_exits_3_on_corruption_naming_file_and_line(cli, tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    edit_lines(segment(run), lambda lines: [*lines[:3], b'{"v": 1, "type": "stage.comm', *lines[4:]])
    assert verify(cli, tmp_path) == (
        3,
        """\
journal of run nightly at <tmp>/root/nightly: 2 segment(s), 16 events (1/cli 2, 1/driver 14)
error: <tmp>/root/nightly/journal/0001-driver-000000.jsonl:4: malformed journal line
journal corrupt: 1 problem, 0 warnings
""",
        "",
    )
    code, out, err = replay_cli(cli, tmp_path, "nightly", "--verify", "--json")
    assert (code, err) == (3, "")
    assert orjson.loads(out)["problems"] == [{"where": f"{segment(run)}:4", "message": "malformed journal line"}]


@pytest.mark.parametrize(
    "damage, finding",
    [
        (lambda lines: lines[:4] + lines[5:], "0001-driver-000000.jsonl:5: seq jumps from 3 to 5: 1 event missing"),
        (
            lambda lines: lines[:5] + lines[4:],
            "0001-driver-000000.jsonl:6: seq 4 again after seq 4 (at "
            "<tmp>/root/nightly/journal/0001-driver-000000.jsonl:5): a repeated or "
            "reordered event",
        ),
        (
            lambda lines: [lines[0].replace(b'"v":1', b'"v":2'), *lines[1:]],
            "0001-driver-000000.jsonl:1: written in journal format v2; this sparkrecover reads v1",
        ),
        (
            lambda lines: [lines[0].replace(b'"attempt":1', b'"attempt":2'), *lines[1:]],
            "0001-driver-000000.jsonl:1: record of attempt 2/driver in a segment of attempt 1/driver",
        ),
        (
            lambda lines: [lines[0].replace(b'"seq":0', b'"seq":"0"'), *lines[1:]],
            "0001-driver-000000.jsonl:1: envelope field 'seq' is not a int: '0'",
        ),
        (
            lambda lines: [lines[0].replace(b'.500Z"', b'"'), *lines[1:]],
            "0001-driver-000000.jsonl:1: timestamp '2026-11-22T03:00:01' is not UTC ISO 8601 with milliseconds",
        ),
        (
            lambda lines: [lines[0].replace(b'"run":"nightly"', b'"run":"other"'), *lines[1:]],
            "0001-driver-000000.jsonl:1: 1 record(s) name run 'other', the others 'nightly': "
            "records of another run were copied here",
        ),
    ],
)
def test_verify_finds_each_kind_of_corruption(cli, tmp_path, damage, finding):
    run = journals.crashed_run(tmp_path / "root")
    edit_lines(segment(run), damage)
    code, err, _err = verify(cli, tmp_path)  # the report is stdout: findings included
    assert code == 3
    assert f"error: <tmp>/root/nightly/journal/{finding}\n" in err
    assert err.endswith("journal corrupt: 1 problem, 0 warnings\n")


def test_verify_finds_a_missing_segment_and_ignores_stray_files(cli, tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    os.rename(segment(run), segment(run, index=1))
    open(os.path.join(run.dir, "journal", "notes.txt"), "w").close()
    code, out, err = verify(cli, tmp_path)
    assert (code, err) == (3, "")
    assert out.splitlines()[1:] == [
        "warning: <tmp>/root/nightly/journal/notes.txt: not a journal segment name; readers ignore this file",
        "error: <tmp>/root/nightly/journal/0001-driver-000001.jsonl: segment 000000 of attempt 1/driver is missing "
        "before this one",
        "journal corrupt: 1 problem, 1 warning",
    ]


def test_verify_forgives_what_the_writer_itself_reported_dropped(cli, tmp_path):
    run = journals.crashed_run(tmp_path / "root")
    # What a writer does when storage failed for long: it drops its oldest pending lines, then
    # says so in journal.degraded once storage is back.
    edit_lines(segment(run), lambda lines: lines[:2] + lines[5:])
    with open(segment(run), "ab") as handle:
        handle.write(
            orjson.dumps(
                {
                    "v": 1,
                    "type": "journal.degraded",
                    "run": "nightly",
                    "attempt": 1,
                    "writer": "driver",
                    "seq": 15,
                    "ts": "2026-11-22T03:00:09.000Z",
                    "since": "2026-11-22T03:00:02.000Z",
                    "until": "2026-11-22T03:00:09.000Z",
                    "error": "OSError: disk full",
                    "dropped_bytes": 600,
                }
            )
            + b"\n"
        )
    code, err, _err = verify(cli, tmp_path)  # the report is stdout: findings included
    assert code == 0, err
    assert (
        "warning: <tmp>/root/nightly/journal/0001-driver-000000.jsonl:3: seq jumps from 1 to 5: 3 events "
        "missing: dropped while the journal's storage was failing (journal.degraded at "
        "<tmp>/root/nightly/journal/0001-driver-000000.jsonl:13)\n"
    ) in err


def test_verify_warns_when_time_goes_back_within_a_writer(cli, tmp_path):
    run_dir = str(tmp_path / "root" / "nightly")
    writer = JournalWriter(Run("nightly", run_dir), 1, "cli", flush_interval=0)
    stamps = iter(["2026-11-22T03:00:02.000Z", "2026-11-22T03:00:01.000Z"])
    writer._timestamp = lambda: next(stamps)
    writer.emit("run.started", app="a.py")
    writer.emit("attempt.started", pid=1)
    writer.close()
    code, err, _err = verify(cli, tmp_path)  # the report is stdout: findings included
    assert code == 0
    assert (
        "warning: <tmp>/root/nightly/journal/0001-cli-000000.jsonl:2: time goes back from "
        "2026-11-22T03:00:02.000Z to 2026-11-22T03:00:01.000Z within attempt 1/cli (a clock stepped back?)\n" in err
    )


def test_a_replayed_model_reads_as_loaded_not_as_a_result_without_a_job():
    record = {
        "type": "action.replayed",
        "key": "etl.py:9#1 mllib.train(KMeans.train)",
        "kind": "mllib.train",
        "recorded_in": 1,
        "saved_s": 4.2,
        "model": "pyspark.mllib.clustering.KMeansModel",
    }
    assert timeline.fact(record) == (
        "etl.py:9#1 mllib.train(KMeans.train): model of attempt 1 loaded (KMeansModel), not trained again "
        "(training took 4.2s)"
    )


def test_a_kept_model_reads_with_its_folders_size_not_its_small_result_file():
    record = {
        "type": "action.recorded",
        "key": "etl.py:9#1 ml.fit(KMeans)",
        "kind": "ml.fit",
        "duration_s": 4.2,
        "summary": "model KMeansModel",
        "result": {"path": "results/0001/000001.json", "sha256": "ab", "bytes": 120},
        "model_bytes": 5 << 20,
    }
    assert timeline.fact(record) == "etl.py:9#1 ml.fit(KMeans): model KMeansModel in 4.2s, model kept (5.0 MiB)"


def test_a_replayed_list_of_models_reads_as_so_many_models_loaded():
    record = {
        "type": "action.replayed",
        "key": "etl.py:9#1 ml.fit(KMeans)",
        "kind": "ml.fit",
        "recorded_in": 1,
        "saved_s": 4.2,
        "model": "pyspark.ml.clustering.KMeansModel",
        "models": 3,
    }
    assert timeline.fact(record) == (
        "etl.py:9#1 ml.fit(KMeans): 3 models of attempt 1 loaded (KMeansModel), not trained again (training took 4.2s)"
    )
