"""What ``inspect`` and the plan say of recorded actions (docs/replay.md), as plain data and lines:
the results kept (a trained model's folder counted), the actions replayed without a Spark job and
the models loaded from the run's storage (their loader runs Spark jobs), and what runs again."""

from __future__ import annotations

from typing import Any

from sparkrecover.core import humanize
from sparkrecover.core.fold import savings
from sparkrecover.core.fold.runstate import RunState
from sparkrecover.kinds import MODEL_ACTIONS


def action_rows(state: RunState) -> dict[str, Any]:
    """Recorded and replayed actions (docs/replay.md): how many results are kept and their bytes (a
    trained model's folder included), which attempts replayed how many and loaded how many models,
    what that saved, and each action that ran again though it was recorded."""
    kept = [record for record in state.actions.values() if isinstance(record.get("result"), dict)]
    models = [record for record in kept if record.get("kind") in MODEL_ACTIONS]
    replayed: dict[int, int] = {}
    loaded: dict[int, int] = {}
    for record in state.replayed:
        if record.get("kind") in MODEL_ACTIONS:  # a fit given a list of param maps loads as many
            loaded[record["attempt"]] = loaded.get(record["attempt"], 0) + savings.models_of(record)
        else:
            replayed[record["attempt"]] = replayed.get(record["attempt"], 0) + 1
    model_bytes = sum(int(record.get("model_bytes") or 0) for record in models)
    return {
        "recorded": len(state.actions),
        "kept": len(kept),
        "kept_bytes": sum(int(record["result"].get("bytes") or 0) for record in kept) + model_bytes,
        "models_kept": sum(savings.models_of(record) for record in models),
        "model_bytes": model_bytes,
        "replayed": replayed,
        "loaded": loaded,
        "saved_s": round(sum(saving.seconds for saving in savings.of(state) if _replayed(saving)), 3),
        "ran_again": [
            {"key": key, "attempt": record["attempt"], "reason": record["ran_because"]}
            for key, record in state.actions.items()
            if record["attempt"] > 1 and record.get("ran_because") not in (None, "no record")
        ],
        "not_kept": [
            {"key": key, "attempt": record["attempt"], "reason": record["not_kept"]}
            for key, record in state.actions.items()
            if record.get("not_kept")
        ],
    }


def _replayed(saving: savings.Saving) -> bool:
    return saving.how.startswith(("replayed ", "loaded "))


def actions_line(actions: dict[str, Any], removed: bool) -> str:
    """``inspect``'s line of recorded actions (``actions``: ``action_rows``'s; ``removed``: the run
    succeeded, so its results were removed)."""
    where = "were kept (removed when the run succeeded)" if removed else "kept"
    line = f"actions: {actions['recorded']:,} recorded, {actions['kept']:,} result{_s(actions['kept'])} {where}"
    if not removed:
        models = actions.get("models_kept") or 0
        owner = "model's" if models == 1 else "models'"
        with_models = f" with {models:,} trained {owner} files" if models else ""
        line += f" ({humanize.size(actions['kept_bytes'])}{with_models})"
    done = []
    for attempt in sorted({*actions["replayed"], *actions.get("loaded", {})}):
        parts = []
        if actions["replayed"].get(attempt):
            parts.append(f"{actions['replayed'][attempt]:,} replayed")
        count = actions.get("loaded", {}).get(attempt)
        if count:
            parts.append(f"{count:,} model{_s(count)} loaded from the run's storage")
        done.append(f"{' and '.join(parts)} by attempt {attempt}")
    if done:
        line += f"; {', '.join(done)}, saving about {humanize.duration(actions['saved_s'])}"
    return line


def _s(count: int) -> str:
    return "s" if count != 1 else ""


def action_lines(entries: list[dict[str, Any]], limit: int = 10) -> list[str]:
    """The plan's recorded actions for people: how many are replayed, how many trained models are
    loaded (their loader runs Spark jobs: it reads the model's folder), and each that runs again."""
    replay = [entry for entry in entries if entry["decision"] == "replay"]
    load = [entry for entry in entries if entry["decision"] == "load"]
    again = [entry for entry in entries if entry["decision"] not in ("replay", "load")]
    lines = []
    if replay:
        lines.append(
            f"replay {len(replay):,} recorded action{_s(len(replay))} without a Spark job ({_reasons(replay)})"
        )
    if load:
        them = "them" if len(load) != 1 else "it"
        lines.append(
            f"load {len(load):,} trained model{_s(len(load))} from the run's storage instead of training {them} "
            f"({_reasons(load)}); loading runs Spark jobs of its own"
        )
    lines += [f"run again: {entry['key']}: {entry['reason']}" for entry in again[:limit]]
    if len(again) > limit:
        lines.append(f"run again: {len(again) - limit:,} more recorded actions")
    return lines


def _reasons(entries: list[dict[str, Any]]) -> str:
    return "; ".join(sorted({entry["reason"] for entry in entries}))
