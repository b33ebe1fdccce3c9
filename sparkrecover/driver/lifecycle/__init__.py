"""The one stage lifecycle every stage goes through (``stages``), and the fingerprints it compares
across attempts (``fingerprints``)."""
