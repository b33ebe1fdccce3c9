"""Tables come back as they were (docs/zero-code.md, "Tables").

A table write records its table at commit (``describe``: type, provider, schema, partition
columns, bucket spec, properties, options, location). Spark's in-memory catalog dies with the driver, so a
skipped or lost table write of a resumed attempt registers the table again from that record
(``register``): a ``CREATE TABLE … LOCATION`` (EXTERNAL, the only kind Spark creates over
existing files), its partitions recovered, then its type set back to what was recorded through
``SessionCatalog.alterTable`` (MANAGED stays MANAGED, so a later ``DROP TABLE`` deletes its files
as in a plain run). A skipped ``DROP TABLE`` takes the table out of the catalog again without
touching files (``forget``). With Hive support the catalog survives: nothing is registered, and
``catalog_problem`` checks the catalog against the recorded location instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sparkrecover.rundir import storage
from sparkrecover.rundir.plans import Committed

_SEP = "\u0001"
# Keys CREATE TABLE refuses in TBLPROPERTIES (the catalog sets them), and Hive's bookkeeping.
_RESERVED = frozenset(
    {
        "provider",
        "location",
        "comment",
        "owner",
        "external",
        "is_managed_location",
        "collation",
        "transient_lastddltime",
    }
)
# Options whose value may be a secret never reach the journal (docs/design.md §4 rule 9).
_SECRET = re.compile(
    r"pass(word|wd)|secret|token|credential|access.?key|session.?key|private.?key|api.?key", re.IGNORECASE
)


def hive(spark: Any) -> bool:
    """Whether the session's catalog is Hive's (it survives the driver)."""
    try:
        return str(spark.conf.get("spark.sql.catalogImplementation", "in-memory")) == "hive"
    except Exception:
        return False


def _metadata(spark: Any, name: str) -> Any | None:
    """The session catalog's ``CatalogTable`` of a table, or None (missing, a view, another catalog)."""
    try:
        if not spark.catalog.tableExists(name):
            return None
        table = spark.catalog.getTable(name)
        if table.tableType == "VIEW" or table.isTemporary or not table.namespace:
            return None
        jvm = spark._jvm
        ident = jvm.org.apache.spark.sql.catalyst.TableIdentifier(table.name, jvm.scala.Some(table.namespace[-1]))
        return spark._jsparkSession.sessionState().catalog().getTableMetadata(ident)
    except Exception:
        return None


def _scala_map(spark: Any, value: Any) -> dict[str, str]:
    converted = spark._jvm.scala.collection.JavaConverters.mapAsJavaMap(value)
    return {str(key): str(converted[key]) for key in converted.keySet()}


def describe(spark: Any, name: str) -> dict[str, Any] | None:
    """What a table write records of its table at commit; None when there is nothing to record."""
    meta = _metadata(spark, name)
    if meta is None:
        return None
    provider = meta.provider()
    columns = str(meta.partitionColumnNames().mkString(_SEP))
    properties = {
        key: value for key, value in _scala_map(spark, meta.properties()).items() if key.lower() not in _RESERVED
    }
    options = {
        key: value
        for key, value in _scala_map(spark, meta.storage().properties()).items()
        if key.lower() != "path" and not _SECRET.search(key)
    }
    identifier = meta.identifier()
    buckets = _buckets(meta)
    return {
        "name": str(identifier.table()),
        "database": str(identifier.database().get()),
        "type": str(meta.tableType().name()),
        "provider": str(provider.get()) if provider.isDefined() else None,
        "schema": str(meta.schema().json()),
        "partition_columns": columns.split(_SEP) if columns else [],
        "properties": properties,
        "options": options,
        "location": str(meta.location()),
        **({"buckets": buckets} if buckets is not None else {}),
    }


def _buckets(meta: Any) -> dict[str, Any] | None:
    """A bucketed table's spec (``bucketBy``, ``CLUSTERED BY``): count, columns, sort columns."""
    spec = meta.bucketSpec()
    if not spec.isDefined():
        return None
    spec = spec.get()

    def names(seq: Any) -> list[str]:
        text = str(seq.mkString(_SEP))
        return text.split(_SEP) if text else []

    return {
        "count": int(spec.numBuckets()),
        "columns": names(spec.bucketColumnNames()),
        "sort_columns": names(spec.sortColumnNames()),
    }


def catalog_problem(spark: Any, name: str, location: str | None) -> str | None:
    """Why a surviving catalog does not hold the table a skipped write recorded, or None."""
    recorded = describe(spark, name)
    if recorded is None:
        return f"table {name} is not in the catalog any more"
    if location and storage.from_spark_path(recorded["location"]) != storage.from_spark_path(location):
        return f"table {name} is not at {location} any more (the catalog says {recorded['location']})"
    return None


def register(spark: Any, name: str, committed: Committed) -> None:
    """Register the table a skipped or lost write left, as recorded at its commit. Nothing with
    Hive support (the catalog survived) or when the table is there."""
    if hive(spark) or spark.catalog.tableExists(name):
        return
    recorded = committed.table
    if not recorded:
        _register_as_before(spark, name, committed)
        return
    if str(recorded.get("provider") or "").lower() == "hive":
        return  # a Hive table needs Hive support, which this session does not have
    ident = f"{_quote(recorded['database'])}.{_quote(recorded['name'])}"
    schema = spark._jvm.org.apache.spark.sql.types.DataType.fromJson(recorded["schema"]).toDDL()
    statement = f"CREATE TABLE {ident} ({schema}) USING {_quote(recorded.get('provider') or 'parquet')}"
    if recorded.get("options"):
        statement += f" OPTIONS ({_pairs(recorded['options'])})"
    if recorded.get("partition_columns"):
        statement += f" PARTITIONED BY ({', '.join(_quote(c) for c in recorded['partition_columns'])})"
    buckets = recorded.get("buckets")
    if buckets:
        statement += f" CLUSTERED BY ({', '.join(_quote(c) for c in buckets['columns'])})"
        if buckets.get("sort_columns"):
            statement += f" SORTED BY ({', '.join(_quote(c) for c in buckets['sort_columns'])})"
        statement += f" INTO {int(buckets['count'])} BUCKETS"
    if recorded.get("properties"):
        statement += f" TBLPROPERTIES ({_pairs(recorded['properties'])})"
    statement += f" LOCATION {_literal(recorded['location'])}"
    session = spark._jsparkSession  # not through spark.sql: this statement is ours, not a stage
    session.sql(statement)
    if recorded.get("partition_columns") and storage.data_exists(storage.from_spark_path(recorded["location"])):
        session.sql(f"ALTER TABLE {ident} RECOVER PARTITIONS")
    if recorded.get("type") and recorded["type"] != "EXTERNAL":
        set_type(spark, f"{recorded['database']}.{recorded['name']}", recorded["type"])


def forget(spark: Any, name: str) -> None:
    """Take a table out of an in-memory catalog without touching its files (a skipped DROP)."""
    if hive(spark) or _metadata(spark, name) is None:
        return
    set_type(spark, name, "EXTERNAL")
    spark._jsparkSession.sql(f"DROP TABLE {name}")


def set_type(spark: Any, name: str, table_type: str) -> None:
    """Change a table's type in the session catalog, keeping everything else (its partitions too).

    ``CatalogTable`` is a Scala case class: its ``copy`` is called with every argument taken from
    its ``copy$default$N`` methods but the second, ``tableType`` (the same on Spark 3.5 and 4).
    """
    meta = _metadata(spark, name)
    if meta is None:
        return
    types = spark._jvm.org.apache.spark.sql.catalyst.catalog.CatalogTableType
    wanted = getattr(types, table_type)()
    count = max(
        len(method.getParameterTypes()) for method in meta.getClass().getMethods() if method.getName() == "copy"
    )
    arguments = [getattr(meta, f"copy$default${index}")() for index in range(1, count + 1)]
    if str(arguments[1].getClass().getSimpleName()) != "CatalogTableType":
        raise RuntimeError("CatalogTable.copy's second argument is not its table type")
    arguments[1] = wanted
    spark._jsparkSession.sessionState().catalog().alterTable(meta.copy(*arguments))


def _register_as_before(spark: Any, name: str, committed: Committed) -> None:
    """A record written before tables were recorded: an external table over the committed files."""
    paths, schema = committed.paths, committed.schema
    if not paths:
        return
    kwargs: dict[str, Any] = {"path": paths[0], "source": committed.format or "parquet"}
    if schema:
        from pyspark.sql.types import StructType

        kwargs["schema"] = StructType.fromJson(json.loads(schema))
    spark.catalog.createTable(name, **kwargs)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _pairs(values: dict[str, str]) -> str:
    return ", ".join(f"{_literal(key)} = {_literal(value)}" for key, value in sorted(values.items()))
