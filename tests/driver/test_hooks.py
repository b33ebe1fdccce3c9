"""The one parser of a writer call: what the arguments say wins over what the writer was told."""

from __future__ import annotations

import inspect

import pytest

from sparkrecover.driver.recording import hooks


@pytest.fixture()
def writer(spark):
    from pyspark.sql.readwriter import DataFrameWriter

    hooks.track(DataFrameWriter, ("mode", "format", "option", "options"))
    try:
        yield spark.range(1).write
    finally:
        hooks.uninstall()


def call(writer, method, *args, **kwargs):
    bound = inspect.signature(getattr(type(writer), method)).bind(writer, *args, **kwargs).arguments
    return hooks.writer_call(writer, method, bound)


def test_a_file_method_names_its_format_and_the_arguments_win(writer):
    writer.mode("append").format("json").option("compression", "gzip")
    parsed = call(writer, "parquet", "/out", mode="overwrite")
    assert (parsed.path, parsed.mode, parsed.format) == ("/out", "overwrite", "parquet")
    assert parsed.options == {"compression": "gzip"}


def test_save_takes_its_path_from_an_option_and_its_mode_from_the_writer(writer):
    writer.mode("error").format("delta").options(PATH="/tbl", mergeSchema=True)
    parsed = call(writer, "save")
    assert (parsed.path, parsed.mode, parsed.format, parsed.logged) == ("/tbl", "errorifexists", "delta", True)
    assert parsed.options == {"path": "/tbl", "mergeschema": "true"}


def test_a_table_write_has_a_path_only_when_given_one(writer):
    assert call(writer, "saveAsTable", "t").path is None
    assert call(writer, "saveAsTable", "t", path="/loc").path == "/loc"  # **options of saveAsTable


def test_nothing_is_tracked_once_the_hooks_are_gone(spark):
    from pyspark.sql.readwriter import DataFrameWriter

    original = DataFrameWriter.mode
    hooks.track(DataFrameWriter, ("mode",))
    assert DataFrameWriter.mode is not original
    hooks.uninstall()
    assert DataFrameWriter.mode is original
    assert hooks.calls(spark.range(1).write.mode("append")) == []
