"""Fixtures of the in-process driver tests."""

from __future__ import annotations

import json

import pytest

from tests.helpers import zero_code_hooks


@pytest.fixture
def hooked(request):
    """pyspark's writers, RDD saves and SQL hooked for the test's file as the bootstrap hooks them
    for a script (call sites relative to its folder), and put back afterwards. A file whose every
    test needs them says ``pytestmark = pytest.mark.usefixtures("hooked")``."""
    with zero_code_hooks(request.module.__file__):
        yield


@pytest.fixture
def orders(tmp_path):
    """A folder of 30 JSON orders (id, day) for the actions and inferences under test."""
    folder = tmp_path / "orders"
    folder.mkdir()
    (folder / "a.json").write_text("".join(json.dumps({"id": i, "day": f"d{i % 3}"}) + "\n" for i in range(30)))
    return folder
