"""Reading a run and planning its next attempt, for both processes: ``resume`` plans on the command
line, and a driver that a launcher restarted (YARN, an operator, an orchestrator) plans its own
resume inside Spark, with the very same functions. A run read from storage for the fold
(``reading.py``), the storage evidence the planner is given (``storage_evidence.py``), and the plan of the
next attempt (``next_attempt.py``). Imports the core, the journal, the run directory and ``jvm``; never
``launch/``, ``cli/`` or ``driver/``, and never pyspark."""
