"""pyspark's calls recorded as stages with no edit to the script: the one patch table (``hooks``),
DataFrameWriter writes and RDD saves (``zerocode``, ``writes``), SQL that writes (``sqlwrites``),
ML saves (``mlsaves``), tables (``tables``) and reads whose inferred schema a resume reuses
(``schema_reads``)."""
