"""The journal reader: torn and malformed lines, versions, envelopes, merge order (docs/design.md §5)."""

from __future__ import annotations

import orjson
import pytest

from sparkrecover.errors import JournalError
from sparkrecover.journal import events, read_journal
from tests.journals import envelope, line_of, write_segment


def test_torn_last_line_is_dropped_with_a_warning(tmp_path):
    good = [envelope(0), envelope(1)]
    path = write_segment(tmp_path, [line_of(good[0]), line_of(good[1]), line_of(envelope(2))[:25]])
    warnings: list[str] = []
    assert read_journal(str(tmp_path), warnings.append) == good
    assert len(warnings) == 1
    assert f"{path}:3" in warnings[0] and "torn" in warnings[0]


def test_unterminated_but_complete_last_line_is_kept(tmp_path):
    records = [envelope(0), envelope(1)]
    write_segment(tmp_path, [line_of(records[0]), orjson.dumps(records[1])])
    warnings: list[str] = []
    assert read_journal(str(tmp_path), warnings.append) == records
    assert warnings == []


def test_malformed_line_in_the_middle_is_corruption(tmp_path):
    path = write_segment(tmp_path, [line_of(envelope(0)), b'{"v": 1, "type": \n', line_of(envelope(2))])
    with pytest.raises(JournalError) as caught:
        read_journal(str(tmp_path))
    assert caught.value.exit_code == 3
    assert f"{path}:2" in str(caught.value)


def test_a_torn_line_that_is_not_the_last_of_its_segment_is_corruption(tmp_path):
    write_segment(tmp_path, [line_of(envelope(0))[:20] + b"\n", line_of(envelope(1))])
    with pytest.raises(JournalError, match=r"0001-driver-000000\.jsonl:1"):
        read_journal(str(tmp_path))


def test_a_newer_format_version_is_refused_naming_both_versions(tmp_path):
    path = write_segment(tmp_path, [line_of(envelope(0)), line_of({**envelope(1), "v": 2})])
    with pytest.raises(JournalError) as caught:
        read_journal(str(tmp_path))
    message = str(caught.value)
    assert f"{path}:2" in message
    assert "v2" in message and "v1" in message
    assert caught.value.exit_code == 3


@pytest.mark.parametrize("key", events.ENVELOPE_KEYS)
def test_a_missing_envelope_field_is_refused(tmp_path, key):
    broken = envelope(1)
    del broken[key]
    path = write_segment(tmp_path, [line_of(envelope(0)), line_of(broken)])
    with pytest.raises(JournalError) as caught:
        read_journal(str(tmp_path))
    assert f"{path}:2" in str(caught.value)
    assert repr(key) in str(caught.value) or key in str(caught.value)


def test_cli_and_driver_records_of_an_attempt_merge_in_timestamp_order(tmp_path):
    def at(ms):
        return f"2026-01-01T00:00:00.{ms:03d}Z"

    cli = [
        envelope(0, "run.started", at(0), writer="cli"),
        envelope(1, "attempt.started", at(1), writer="cli"),
        envelope(2, "attempt.ended", at(9), writer="cli"),
    ]
    driver = [
        envelope(0, "driver.started", at(2)),
        envelope(1, "stage.started", at(3), stage="a"),
        envelope(2, "stage.committed", at(5), stage="a"),
        envelope(3, "driver.ended", at(8)),
    ]
    second = [envelope(0, "attempt.started", at(0), attempt=2, writer="cli")]
    write_segment(tmp_path, [line_of(r) for r in cli], writer="cli")
    write_segment(tmp_path, [line_of(r) for r in driver[:2]], writer="driver", index=0)
    write_segment(tmp_path, [line_of(r) for r in driver[2:]], writer="driver", index=1)
    write_segment(tmp_path, [line_of(r) for r in second], attempt=2, writer="cli")
    order = [(r["attempt"], r["type"]) for r in read_journal(str(tmp_path))]
    assert order == [
        (1, "run.started"),
        (1, "attempt.started"),
        (1, "driver.started"),
        (1, "stage.started"),
        (1, "stage.committed"),
        (1, "driver.ended"),
        (1, "attempt.ended"),
        (2, "attempt.started"),
    ]


def test_files_with_other_names_are_ignored(tmp_path):
    record = envelope(0)
    write_segment(tmp_path, [line_of(record)])
    (tmp_path / "journal" / "notes.txt").write_text("not a segment")
    (tmp_path / "journal" / "0001-driver-000001.jsonl.tmp").write_text("{")
    assert read_journal(str(tmp_path)) == [record]
    assert read_journal(str(tmp_path / "nothing-here")) == []


def test_a_damaged_journal_is_salvaged_around_its_damaged_lines(tmp_path):
    from sparkrecover.journal.reader import read_salvaged

    write_segment(tmp_path, [line_of(envelope(0, "attempt.started", writer="cli"))], writer="cli")
    write_segment(
        tmp_path,
        [
            line_of(envelope(0, ts="2026-01-01T00:00:01.000Z")),
            b"{not json\n",
            line_of(envelope(2, "stage.committed", ts="2026-01-01T00:00:03.000Z")),
        ],
    )
    records, damaged = read_salvaged(str(tmp_path))
    assert [(r["writer"], r["seq"]) for r in records] == [("cli", 0), ("driver", 0), ("driver", 2)]
    assert [segment.name for segment in damaged] == ["0001-driver-000000.jsonl"]
    assert read_salvaged(str(tmp_path / "elsewhere")) == ([], [])
