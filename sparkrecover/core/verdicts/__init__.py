"""What a resume decides for each stage, from the folded state and what survives on storage: the
planner (``planner``), told through one parameter (``evidence``), whether a stage's code or inputs
changed (``staleness``), and which inferred schemas it may reuse (``schema_reuse``)."""
