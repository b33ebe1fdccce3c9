"""The run's state folded from its journal, once per command: stages and attempts
(``runstate``), a write's partitions over the attempts (``kept_partitions``), kept shuffle map
outputs (``kept_shuffles``) and the time recovery saved (``savings``)."""
