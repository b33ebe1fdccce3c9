"""Launching attempts from the command-line process: submit and resume orchestration, one
attempt's spark-submit, redaction of what is recorded, and the JVM listener jar's build."""
