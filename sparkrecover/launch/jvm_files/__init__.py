"""What the driver's JVM is given besides Spark: the package's jar, compiled on first use
(``listener_jar``), and the class-data-sharing archive of the driver JVM, made once in the
background (``class_archive``). Both live in sparkrecover's cache folder, keyed by what they were
built for."""
