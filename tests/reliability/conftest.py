"""The ``reliability`` fixture and the ledger hooks live in tests/conftest.py, so that tests
outside this folder (the Spark ones) record their scenarios too."""
