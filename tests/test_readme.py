"""What the README and the messages tell users to run must work: sparkrecover is not on PyPI."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# `pip install sparkrecover`, `pip install 'sparkrecover[s3]'`: a name an index does not have.
FROM_AN_INDEX = re.compile(r"pip install\s+(?:-\S+\s+)*['\"]?sparkrecover\b")


def test_no_install_instruction_asks_an_index_for_sparkrecover():
    """The README, the docs, the scripts and the package's messages (the changelog may quote what
    used to fail)."""
    paths = [os.path.join(ROOT, "README.md")]
    for top in ("docs", "scripts", "sparkrecover"):
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            paths += [os.path.join(folder, name) for name in names if name.endswith((".md", ".py", ".sh"))]
    found = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as handle:
            found += [f"{os.path.relpath(path, ROOT)}: {line.strip()}" for line in handle if FROM_AN_INDEX.search(line)]
    assert found == []


def test_the_readme_installs_from_a_checkout_and_from_a_built_wheel():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    assert "pip install -e '.[s3]'" in readme
    assert "python -m build" in readme and "dist/sparkrecover-" in readme
