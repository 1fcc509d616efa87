"""Pieces of ``benchmarks/bench_peers.py``: lakehouse beside delta-rs, pyiceberg and plain parquet."""
