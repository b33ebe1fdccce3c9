"""Where a write task's CPU goes, from executors' Java Flight Recorder files: of the samples of
Spark's task threads inside a file write (a stack through ``FileFormatWriter``), how many are in the
shuffle read (Spark's fetch iterator and reader, sparkrecover's kept blocks), and the top frames.

    .venv/bin/python scripts/bench_shuffle_resume.py --where standalone --task-cost-only \\
        "--executor-java-options=-XX:StartFlightRecording=settings=profile,filename=/tmp/jfr/,dumponexit=true"
    .venv/bin/python scripts/jfr_write_tasks.py /tmp/jfr/hotspot-pid-A*.jfr /tmp/jfr/hotspot-pid-B*.jfr

Give the files of one application's executors (the resume's, or the full run's: the newest two are
the resume's); ``jfr``, which the JDK ships, prints them. docs/decisions/0039-reading-kept-blocks-goal.md
has what it showed.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from collections.abc import Iterator

READ = re.compile(r"ShuffleBlockFetcherIterator|BlockStoreShuffleReader|sparkrecover/jvm/shuffle")


def samples(path: str) -> Iterator[tuple[str, list[str]]]:
    """(thread name, frames, innermost first) of each execution sample of a recording."""
    printed = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", "200", "--events", "jdk.ExecutionSample", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for event in json.loads(printed)["recording"]["events"]:
        values = event["values"]
        frames = (values.get("stackTrace") or {}).get("frames") or []
        names = [f"{frame['method']['type']['name']}.{frame['method']['name']}" for frame in frames]
        yield (values.get("sampledThread") or {}).get("javaName") or "", names


def main() -> None:
    writing = reading = 0
    top, top_reading = collections.Counter[str](), collections.Counter[str]()
    for path in sys.argv[1:]:
        for thread, frames in samples(path):
            if "task launch worker" not in thread or not any("FileFormatWriter" in f for f in frames):
                continue
            writing += 1
            top[frames[0]] += 1
            if any(READ.search(frame) for frame in frames):
                reading += 1
                top_reading[frames[0]] += 1
    share = reading / writing if writing else 0.0
    print(f"write-task samples: {writing}, in the shuffle read: {reading} ({share:.1%})")
    for title, counts in (("write tasks", top), ("shuffle read", top_reading)):
        print(f"top frames, {title}:")
        for frame, count in counts.most_common(12):
            print(f"  {count:6d} {frame}")


if __name__ == "__main__":
    main()
