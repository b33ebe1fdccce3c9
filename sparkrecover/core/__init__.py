"""The pure core: folding a journal into a run's state, planning a resume, and the views that
``inspect`` and ``replay`` show (as data). Imports neither pyspark nor typer nor rich."""
