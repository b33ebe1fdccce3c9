"""The package's version: one source for the wheel (pyproject's ``[tool.hatch.version]``), the
CLI's ``--version`` and what ``run.started`` records. A module of its own so that the journal can
read it without importing the package's front door, which reaches up into the driver's API."""

__version__ = "0.1.0.dev0"
