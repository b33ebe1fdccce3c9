"""Property test of the plan file: every plan the planner can hand a driver, with every optional
field of every record set, is read back by the driver into exactly what the command line wrote.

The strategy is made from the plan's types themselves (each dataclass field, optional ones always
set, lists never empty), so a field added to a plan type is covered the day it is added; a second
test checks that the examples do set every field.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkrecover.core.verdicts import planner
from sparkrecover.rundir import plans

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# orjson writes any str but a lone surrogate, and 64-bit integers.
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
integers = st.integers(min_value=-(2**63), max_value=2**63 - 1)
json_values = st.recursive(
    st.none() | st.booleans() | integers | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def full(kind: Any) -> st.SearchStrategy[Any]:
    """Values of ``kind`` with every optional part present: no None, no empty list or object."""
    if kind is Any:
        return json_values
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        (option,) = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        return full(option)
    if origin is list:
        return st.lists(full(typing.get_args(kind)[0]), min_size=1, max_size=3)
    if origin is dict:
        return st.dictionaries(texts, full(typing.get_args(kind)[1]), min_size=1, max_size=3)
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return st.builds(kind, **{f.name: full(hints[f.name]) for f in dataclasses.fields(kind)})  # type: ignore[arg-type]
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return st.sampled_from(list(kind))
    finite = st.floats(allow_nan=False, allow_infinity=False)
    return {str: texts, int: integers, bool: st.booleans(), float: finite}[kind]


# What the planner hands the next attempt: its decisions, the schemas, the kept shuffles and actions.
planned = st.builds(
    planner.plan_of,
    st.builds(
        planner.StageDecisions,
        run_id=texts,
        attempt=integers,
        decisions=full(list[plans.PlanEntry]),
        schemas=full(list[plans.SchemaEntry]),
        shuffles=full(list[plans.KeptShuffle]),
        actions=full(list[plans.ActionEntry]),
    ),
)


@SETTINGS
@given(planned)
def test_every_plan_is_read_back_into_what_was_written(plan):
    back = plans.read_plan(plans.encode(plan), "0002.json")
    assert back == plan
    assert [type(entry.decision) for entry in back.stages] == [plans.Verdict] * len(plan.stages)


def unset_fields(value: Any, path: str = "plan") -> list[str]:
    """Every dataclass field under ``value`` left None or empty."""
    if dataclasses.is_dataclass(value):
        found = []
        for item in dataclasses.fields(value):
            inner = getattr(value, item.name)
            if inner is None or inner == [] or inner == {}:
                found.append(f"{path}.{item.name}")
            found += unset_fields(inner, f"{path}.{item.name}")
        return found
    if isinstance(value, list):
        return [hole for i, item in enumerate(value) for hole in unset_fields(item, f"{path}[{i}]")]
    return []


@SETTINGS
@given(planned)
def test_the_examples_set_every_field_of_every_record(plan):
    assert unset_fields(plan) == []
