"""Benchmarks: `python -m kfs.bench.bench_core` (decode and index lookups), and one per front end."""
