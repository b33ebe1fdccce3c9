"""What runs inside the Spark driver, under ``spark-submit``: the bootstrap (``bootstrap.py``, the
file spark-submit runs) and the public API (``api.py``, ``import sparkrecover as sr``) above four
rooms, each leaning only on those below it: ``recording/`` (pyspark's calls recorded as stages),
``lifecycle/`` (the one stage lifecycle), ``tasks/`` (task-level resume inside a write) and
``process/`` (the driver process: its attempt, state, fence, signals and listener). Never imports
``sparkrecover.cli`` or ``sparkrecover.launch``."""
