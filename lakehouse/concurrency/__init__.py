"""Concurrency control: table locks (and, next, optimistic commit checks under them)."""
