"""The run's event log: JSON lines, append-only, one set of segment files per writer and attempt."""

from sparkrecover.journal.reader import read_journal
from sparkrecover.journal.writer import JournalWriter

__all__ = ["JournalWriter", "read_journal"]
