"""The golden file: the output of 410 queries captured before the refactor, and its check (see README.md)."""
