"""The project's exceptions. Each carries the exit code the CLI turns it into (docs/design.md §8)."""

from __future__ import annotations

# `sparkrecover doctor` found something to fix (the generic failure of sysexits-minded tools).
EXIT_NOT_READY = 1
EXIT_USAGE = 2
EXIT_JOURNAL = 3
EXIT_LEASE_HELD = 4
EXIT_NOTHING_TO_RESUME = 5
# The lease was taken over while this process ran (a driver fenced, a CLI whose heartbeat found
# another holder): EX_TEMPFAIL of sysexits, outside the application's usual codes.
EXIT_LEASE_LOST = 75
EXIT_INTERRUPTED = 130


class SparkRecoverError(Exception):
    """Base of every error the CLI reports as one line instead of a traceback."""

    exit_code = 1


class UsageError(SparkRecoverError):
    """The command line or the API was used in a way that cannot work."""

    exit_code = EXIT_USAGE


class JournalError(SparkRecoverError):
    """The journal cannot be read: corrupt, or written by a newer sparkrecover."""

    exit_code = EXIT_JOURNAL


class JournalDamagedError(JournalError):
    """A journal line is not a record of the format this sparkrecover reads (a disk or a copy
    damaged it, or someone edited it). The message names the file and line and says what to do."""

    def __init__(self, where: str, problem: str):
        self.where = where
        run_dir = where.rsplit("/journal/", 1)[0]
        root, _, run_id = run_dir.rstrip("/").rpartition("/")
        # The root the damaged run is under, always: a hint without it acts on a run of the same
        # name under the default root.
        run = f"{run_id} --root {root}" if root else run_id
        super().__init__(
            f"{where}: {problem}. The journal of run {run_id} is damaged: 'sparkrecover replay {run} "
            f"--verify' lists every damaged line; 'sparkrecover resume {run} --from-scratch' sets the "
            "damaged segments aside (in journal.damaged/) and runs every stage again"
        )


class StorageError(JournalError):
    """The storage under the root could not be reached or refused a request (exit 3 like any
    journal that cannot be read)."""


class FormatError(JournalError):
    """A run directory file (journal line, plan, lease, manifest) is of a format version this
    sparkrecover does not read, or is malformed (exit 3, like an unreadable journal)."""


class LeaseHeldError(SparkRecoverError):
    """Another live process is running this run."""

    exit_code = EXIT_LEASE_HELD


class RunNotFoundError(SparkRecoverError):
    """There is no run to resume or inspect under that name."""

    exit_code = EXIT_NOTHING_TO_RESUME


class LaunchError(SparkRecoverError):
    """spark-submit could not be found or started."""

    exit_code = EXIT_USAGE


class LeaseLostError(SparkRecoverError):
    """This process's lease on the run was taken over (it was judged dead: a pause, a network
    partition): it stopped before committing anything more, and the run is another's now."""

    exit_code = EXIT_LEASE_LOST
