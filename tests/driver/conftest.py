"""Fixtures of the in-process driver tests."""

from __future__ import annotations

import pytest

from tests.helpers import zero_code_hooks


@pytest.fixture
def hooked(request):
    """pyspark's writers, RDD saves and SQL hooked for the test's file as the bootstrap hooks them
    for a script (call sites relative to its folder), and put back afterwards. A file whose every
    test needs them says ``pytestmark = pytest.mark.usefixtures("hooked")``."""
    with zero_code_hooks(request.module.__file__):
        yield
