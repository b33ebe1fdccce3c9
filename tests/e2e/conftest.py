"""Fixtures of the end-to-end tests: the reference runs that several files compare with."""

from __future__ import annotations

import pytest

from tests.e2e.support import PIPELINE
from tests.references import FOLDER


@pytest.fixture
def pipeline_reference(plain_runs):
    """The demo pipeline (60,000 rows) under plain spark-submit, without sparkrecover: its
    ``text("out", "report.txt")`` is the report a resumed pipeline must write. Started beside the
    first test that asks for it, shared with the others (of every file that runs on the same
    pytest-xdist worker)."""
    return plain_runs.start(PIPELINE, f"{FOLDER}/out", "--rows", "60000")
