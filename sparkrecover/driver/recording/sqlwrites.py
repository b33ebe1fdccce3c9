"""SQL statements that write, as implicit stages (zero-code mode: docs/recorded.md).

``spark.sql`` runs a command eagerly, when it is called: whether to skip it is decided before
the original runs. The statement is classified from Spark's own parser (``parsePlan``, through
Py4J), never from its text: the command node's class and its target.

    CreateTableAsSelect       CREATE TABLE t AS …            errorifexists (ignore: IF NOT EXISTS)
    ReplaceTableAsSelect      [CREATE OR] REPLACE TABLE t AS  overwrite
    InsertIntoStatement       INSERT INTO / OVERWRITE [TABLE]  append / overwrite
    InsertIntoDir             INSERT OVERWRITE [LOCAL] DIRECTORY   overwrite of the folder
    LoadData                  LOAD DATA [LOCAL] INPATH … [OVERWRITE] INTO TABLE t   append / overwrite
    CreateTable               CREATE TABLE t (…) (no AS)     create
    CreateTableLike           CREATE TABLE t LIKE s          create
    DropTable                 DROP TABLE t                   drop      } only of a table whose data
    TruncateTable/-Partition  TRUNCATE TABLE t [PARTITION …] truncate  } a stage of this run wrote

Anything else (queries, other DDL, a statement with ``args`` or keyword formatting, a statement the
parser refuses) runs as pyspark runs it: docs/recorded.md lists those that write and what a resume
then does. The statement's query is fingerprinted through its
analyzed plan, like a DataFrame, and is the written "frame".
"""

from __future__ import annotations

import os
from typing import Any

from sparkrecover.driver.lifecycle import stages
from sparkrecover.driver.process import messages, runtime
from sparkrecover.driver.recording import hooks, writes, zerocode
from sparkrecover.rundir import storage

_SEP = "\u0001"
# The kinds (the mode in a stage's name) of SQL DDL stages; DROP TABLE's is writes.DROP.
CREATE_TABLE, TRUNCATE = "create", "truncate"


def install() -> None:
    """Patch ``SparkSession.sql`` (once, through the patch table of ``driver/recording/hooks.py``)."""
    from pyspark.sql import SparkSession

    hooks.patch(SparkSession, "sql", _recorded_sql)


def _recorded_sql(original: Any) -> Any:
    def sql(self: Any, sqlQuery: str, args: Any = None, **kwargs: Any) -> Any:  # pyspark's parameter names
        rt = runtime.current()
        if rt is None or rt.in_stage or args is not None or kwargs or not isinstance(sqlQuery, str):
            return original(self, sqlQuery, args, **kwargs)
        try:
            call = describe(self, sqlQuery)
        except Exception as error:
            messages.say(
                f"sparkrecover: warning: spark.sql() statement not recorded: {type(error).__name__}: {error}",
            )
            call = None
        if call is None:
            return original(self, sqlQuery, args, **kwargs)
        result = writes.run(rt, call, lambda: original(self, sqlQuery, args, **kwargs))
        return result if result is not None else _empty(self)

    return sql


def _empty(spark: Any) -> Any:
    """What a skipped statement returns: a command's DataFrame has no rows."""
    from pyspark.sql.types import StructType

    return spark.createDataFrame([], StructType([]))


def _parse(spark: Any, statement: str) -> Any | None:
    try:
        return spark._jsparkSession.sessionState().sqlParser().parsePlan(statement)
    except Exception:
        return None  # Spark's own error, from the original call


def describe(spark: Any, statement: str) -> writes.Write | None:
    """The write a statement makes, or None for a statement that writes nothing we record."""
    plan = _parse(spark, statement)
    if plan is None:
        return None
    kind = str(plan.getClass().getSimpleName())
    if kind == "CreateTableAsSelect":
        table = _name(plan.name().nameParts())
        mode = "ignore" if _flag(plan, "ignoreIfExists") else "errorifexists"
        spec = plan.tableSpec()
        return zerocode.table_write(
            spark,
            _frame(spark, plan.query()),
            table,
            mode,
            writes.CREATE,
            _option(spec.provider()),
            path=_option(spec.location()),
        )
    if kind == "ReplaceTableAsSelect":
        table = _name(plan.name().nameParts())
        spec = plan.tableSpec()
        return zerocode.table_write(
            spark,
            _frame(spark, plan.query()),
            table,
            "overwrite",
            writes.OVERWRITE,
            _option(spec.provider()),
            path=_option(spec.location()),
        )
    if kind == "InsertIntoStatement":
        relation = plan.table()
        if str(relation.getClass().getSimpleName()) != "UnresolvedRelation":
            return None
        table = _name(relation.multipartIdentifier())
        overwrite = bool(plan.overwrite())
        mode = "overwrite" if overwrite else "append"
        return zerocode.table_write(
            spark, _frame(spark, plan.query()), table, mode, writes.OVERWRITE if overwrite else writes.APPEND, None
        )
    if kind == "LoadData":
        return _load_data(spark, plan)
    if kind in ("CreateTableLike", "CreateTableLikeCommand"):
        return _create_like(spark, plan)
    if kind == "CreateTable":
        # Recorded always: a table created now may be written later in the run, which cannot be
        # known yet, and a resumed driver running it again would find its files in the way.
        table = _name(plan.name().nameParts())
        spec = plan.tableSpec()
        return zerocode.table_write(
            spark, None, table, CREATE_TABLE, writes.CREATE, _option(spec.provider()), path=_option(spec.location())
        )
    if kind in ("DropTable", "TruncateTable", "TruncatePartition"):
        target = plan.child() if kind == "DropTable" else plan.table()
        parts = target.nameParts() if kind == "DropTable" else target.multipartIdentifier()
        table = _name(parts)
        mode = writes.DROP if kind == "DropTable" else TRUNCATE
        if not _recorded_target(spark, table, mode):
            return None
        return zerocode.table_write(spark, None, table, mode, writes.OVERWRITE, None)
    if kind == "InsertIntoDir":
        location = _option(plan.storage().locationUri())
        if location is None:
            return None
        url, spark_path = stages.qualify(spark, str(location))
        name, site, ordinal = zerocode.identify(zerocode.current_runtime(), "overwrite", url)
        return writes.Write(
            name,
            site,
            ordinal,
            "overwrite",
            writes.OVERWRITE,
            url,
            _frame(spark, plan.child()),
            spark,
            url=url,
            spark_path=spark_path,
            existed=storage.data_exists(url),
        )
    return None


def _load_data(spark: Any, plan: Any) -> writes.Write | None:
    """``LOAD DATA``: files copied (``LOCAL``) or moved into the table's folder, an append like
    ``INSERT INTO`` (the table's files before it are kept, so a rerun leaves the rows once) or,
    with ``OVERWRITE``, an overwrite. Its "frame" is the loaded path: a changed local file makes
    the committed load stale. A non-local load moves its file away, so its input is not part of
    its fingerprint (a skipped load would otherwise look stale for the move it made itself)."""
    relation = plan.child()
    if str(relation.getClass().getSimpleName()) != "UnresolvedTable":
        return None
    table = _name(relation.multipartIdentifier())
    overwrite = bool(plan.isOverwrite())
    mode = "overwrite" if overwrite else "append"
    source = LoadedFiles(spark, str(plan.path()), bool(plan.isLocal()))
    return zerocode.table_write(spark, source, table, mode, writes.OVERWRITE if overwrite else writes.APPEND, None)


class LoadedFiles:
    """What ``writes.run`` needs of the data a ``LOAD DATA`` writes: the session (as
    ``sparkContext``), a plan to fingerprint and the files it reads."""

    def __init__(self, spark: Any, path: str, local: bool):
        self.sparkContext = spark.sparkContext
        self.path, self.local = path, local
        self._spark = spark

    def canonical_plan(self) -> str:
        return f"LOAD DATA {'LOCAL ' if self.local else ''}INPATH {self.path}"

    def inputFiles(self) -> list[str]:  # the name DataFrame.inputFiles has
        if not self.local:
            return []
        try:
            # LOCAL paths are the driver's files: relative to its working folder, like Spark's.
            return [stages.qualify(self._spark, "file:" + os.path.abspath(self.path.removeprefix("file:")))[1]]
        except Exception:
            return []


def _create_like(spark: Any, plan: Any) -> writes.Write | None:
    """``CREATE TABLE t LIKE s``: a new, empty table, recorded as ``CREATE TABLE`` is (Spark 4's
    ``CreateTableLike``; Spark 3.5 parses it to ``CreateTableLikeCommand``)."""
    if str(plan.getClass().getSimpleName()) == "CreateTableLike":
        table = _name(plan.name().nameParts())
        location = _option(plan.location())
    else:
        table = str(plan.targetTable().unquotedString())
        location = _option(plan.fileFormat().locationUri())
    return zerocode.table_write(
        spark, None, table, CREATE_TABLE, writes.CREATE, _option(plan.provider()), path=location
    )


def _recorded_target(spark: Any, table: str, mode: str) -> bool:
    """Whether a DROP or TRUNCATE changes a recorded target: the table's data is an output some
    stage of this run wrote (earlier in this attempt, or committed in an earlier one); or the
    statement is a stage the plan knows (a committed DROP whose table is, rightly, not there)."""
    rt = zerocode.current_runtime()
    existed, location, _ = writes.table_info(spark, table)
    if existed and location is not None and storage.from_spark_path(location) in rt.producers:
        return True
    return zerocode.next_name(rt, mode, f"table {table}") in rt.decisions


def _frame(spark: Any, query: Any) -> Any:
    """The statement's query as a DataFrame (not run: fingerprint, input files, schema)."""
    from pyspark.sql import DataFrame

    jvm, session = spark._jvm, spark._jsparkSession
    try:
        jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, query)  # Spark 4
    except Exception:
        jdf = jvm.org.apache.spark.sql.Dataset.ofRows(session, query)  # Spark 3.5
    return DataFrame(jdf, spark)


def _name(parts: Any) -> str:
    """A multipart identifier as SQL would spell it, back-quoting parts that need it."""
    names = str(parts.mkString(_SEP)).split(_SEP)
    return ".".join(part if part.replace("_", "a").isalnum() else "`" + part.replace("`", "``") + "`" for part in names)


def _option(value: Any) -> str | None:
    """A Scala Option's value as text, or None."""
    try:
        return str(value.get()) if value is not None and value.isDefined() else None
    except Exception:
        return None


def _flag(plan: Any, name: str) -> bool:
    try:
        return bool(getattr(plan, name)())
    except Exception:
        return False
