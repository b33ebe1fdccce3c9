"""Task-level resume inside one write: a write's shape and the resuming commit protocol's settings
(``partitions``), what an unfinished write's committed tasks become (``taskresume``), and how each
kind of committer keeps them (``committers``, the interface; ``file_output_committer``,
``magic_committer``, ``manifest_committer``)."""
