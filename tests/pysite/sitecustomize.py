"""Test-only (tests/conftest.py puts this folder on PYTHONPATH): every Python process the tests
start, pyspark's Python workers among them, imports pyspark from the installed package's compiled
files instead of compiling the zip spark-submit puts first on their path, as the driver bootstrap
does for itself (sparkrecover/driver/process/compiled_pyspark.py): about 1 s of CPU less per worker daemon
and per driver. What runs is the same source: pip's pyspark zip holds the package's own files."""

try:
    from sparkrecover.driver.process import compiled_pyspark

    compiled_pyspark.prefer_compiled()
except Exception:  # never the reason a test's process fails to start
    pass
