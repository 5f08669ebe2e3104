"""Benchmarks, run from the repository's root: `python -m benchmarks.bench_kafka` (against Kafka's own
decoder), `benchmarks.bench_core` (decoding and index lookups), one per front end, and `make bench`.

They build their data with the tests' writers (tests/log_writers.py, tests/offsets_log.py,
tests/index_pages.py: one copy of each, where the tests check what they write), so the tests
directory is put on the path here.
"""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent.parent / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
