"""Starting runs and resuming them: the core of ``submit`` and ``resume``, free of any CLI."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from sparkrecover import attempts, launcher, planner, runs, storage
from sparkrecover.errors import UsageError
from sparkrecover.journal.segments import next_attempt
from sparkrecover.runstate import RunState

Notify = Callable[[str], None]


@dataclass
class ResumePlan:
    run_dir: str
    run_id: str
    state: RunState
    attempt: int
    decisions: list[planner.Decision]

    def document(self) -> dict[str, Any]:
        return planner.plan_document(self.run_id, self.attempt, self.decisions)

    def dry_run(self) -> dict[str, Any]:
        return planner.dry_run_document(self.run_id, self.attempt, self.decisions)


def submit(root: str, run_id: Optional[str], submit_args: list[str], *, spark_submit: Optional[str],
           flush_interval: float, buffer_size: int, notify: Notify, checkpoint_root: Optional[str] = None,
           warn: Optional[Notify] = None) -> tuple[str, int]:
    """Start a new run; returns (run id, exit code)."""
    parsed = launcher.split_submit_args(submit_args)
    launcher.check_application(parsed)
    checkpoint_root = storage.normalize(checkpoint_root) if checkpoint_root else None
    if parsed.deploy_mode == "cluster":
        for option, where in (("--root", root), ("--checkpoint-root", checkpoint_root)):
            if where is not None and launcher_is_local_root(where):
                raise UsageError(f"--deploy-mode cluster needs {option} on shared storage (s3://, hdfs://, "
                                 f"...): the driver runs on the cluster and cannot write to {where}")
    run_id = runs.check_run_id(run_id) if run_id else runs.new_run_id(parsed.app)
    run_dir = runs.run_dir_of(root, run_id)
    if runs.has_journal(run_dir):
        raise UsageError(f"run {run_id} already exists at {run_dir}: use 'sparkrecover resume {run_id}'")
    spec = attempts.LaunchSpec(spark_submit=launcher.find_spark_submit(spark_submit), submit_args=parsed,
                               flush_interval=flush_interval, buffer_size=buffer_size,
                               checkpoint_root=checkpoint_root)
    notify(f"run {run_id}: journal in {run_dir}" + (f", checkpoints in {checkpoint_root}" if checkpoint_root else ""))
    return run_id, attempts.run_attempt(run_dir, run_id, 1, spec, first=True, notify=notify, warn=warn)


def launcher_is_local_root(root: str) -> bool:
    """A root the driver of a cluster could not reach: this machine's disk, or this process's
    memory (``memory://`` lives and dies with one Python process)."""
    return storage.is_local(root) or storage.scheme_of(root) == "memory"


def plan_resume(run_dir: str, run_id: str, *, verify_level: str = "size", rerun: tuple[str, ...] = (),
                from_scratch: bool = False, warn: Optional[Notify] = None,
                progress: Optional[Callable[[int], None]] = None) -> ResumePlan:
    state = runs.load_state(run_dir, run_id, warn)
    verify = planner.verifier_for(run_dir, verify_level, progress)
    decisions = planner.make_plan(state, verify, rerun=rerun, from_scratch=from_scratch)
    return ResumePlan(run_dir, run_id, state, next_attempt(run_dir), decisions)


def launch_resume(plan: ResumePlan, extra_options: list[str], *, spark_submit: Optional[str],
                  notify: Notify, warn: Optional[Notify] = None) -> int:
    if not plan.state.run:
        raise UsageError(f"run {plan.run_id} has no run.started record: it cannot be relaunched")
    spec = attempts.LaunchSpec.from_run_started(plan.state.run, extra_options, spark_submit)
    return attempts.run_attempt(plan.run_dir, plan.run_id, plan.attempt, spec, plan=plan.document(),
                                notify=notify, warn=warn)
