"""The folded state as the commands show it, as data: ``inspect``'s summary (``summary``),
``replay``'s timeline (``timeline``), ``report``'s page (``report_data``, ``lanes``, ``grids``)
and ``--follow`` (``watch``)."""
