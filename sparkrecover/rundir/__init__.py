"""The run directory's files other than the journal: storage access (fsspec), run ids and
folders, the lease, output manifests and the plans handed to resumed attempts."""
