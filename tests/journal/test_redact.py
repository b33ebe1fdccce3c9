"""Redaction of secrets in recorded arguments and environments (DESIGN rule 9)."""

from __future__ import annotations

import pytest

from sparkrecover.journal import redact

# -- redaction (rule 9) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--conf", "spark.db.password=hunter2"], ["--conf", "spark.db.password=*****"]),
        (["--conf", "spark.hadoop.fs.s3a.secret.key=abc"], ["--conf", "spark.hadoop.fs.s3a.secret.key=*****"]),
        (["--conf", "spark.hadoop.fs.s3a.access.key=AKIA"], ["--conf", "spark.hadoop.fs.s3a.access.key=*****"]),
        (["--conf", "spark.hadoop.fs.s3a.session.token=t"], ["--conf", "spark.hadoop.fs.s3a.session.token=*****"]),
        (["-c", "my.Credential=c"], ["-c", "my.Credential=*****"]),
        (["--conf", "AWS_ACCESS_KEY_ID=x"], ["--conf", "AWS_ACCESS_KEY_ID=*****"]),
        (["--db-password=x"], ["--db-password=*****"]),
        (["--API-TOKEN", "x", "--day", "1"], ["--API-TOKEN", "*****", "--day", "1"]),
        (["--session_key", "k"], ["--session_key", "*****"]),
        (
            ["--master", "local[2]", "--conf", "spark.executor.memory=4g", "--name=etl", "app.py", "pass"],
            ["--master", "local[2]", "--conf", "spark.executor.memory=4g", "--name=etl", "app.py", "pass"],
        ),
    ],
)
def test_redact_args(args, expected):
    assert redact.redact_args(args) == expected


def test_has_redacted_names_the_redacted_arguments():
    assert redact.has_redacted(["--conf", "a.secret=*****", "--token", "*****", "x"]) == ["a.secret=*****", "*****"]
