"""driver/recording/on_import.py: every watcher of a module patches it when it is imported
(model saves and model training both watch pyspark.mllib's modules)."""

from __future__ import annotations

import sys

from sparkrecover.driver.recording import on_import


def test_two_watchers_of_one_module_both_patch_it_when_it_is_imported(tmp_path, monkeypatch):
    (tmp_path / "watched_by_two.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[str] = []
    on_import.watch("first", lambda name: name == "watched_by_two", lambda module: seen.append("first"))
    on_import.watch("second", lambda name: name == "watched_by_two", lambda module: seen.append("second"))
    try:
        import watched_by_two  # noqa: F401

        assert sorted(seen) == ["first", "second"]
    finally:
        on_import.unwatch("first")
        on_import.unwatch("second")
        sys.modules.pop("watched_by_two", None)
    assert not [finder for finder in sys.meta_path if isinstance(finder, on_import.PatchOnImport)]
