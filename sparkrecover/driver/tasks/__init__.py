"""Task-level resume inside one write: a write's shape and the resuming commit protocol's settings
(``partitions``), and what an unfinished write's committed tasks become (``taskresume``)."""
