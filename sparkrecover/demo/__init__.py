"""A small four-stage pipeline used by the README demo and the end-to-end tests."""
