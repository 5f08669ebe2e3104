# The two commands of the README (and the benchmarks).
.PHONY: demo test bench

demo:
	bash kfs/demo/demo.sh

test:
	@python3 -c "import pytest, hypothesis, kafka, kfs" 2>/dev/null || python3 -m pip install -q -e '.[test]'
	python3 -m pytest -q tests

bench:
	python3 -m kfs.bench.bench_core
	python3 -m kfs.bench.bench_fuse
	python3 -m kfs.bench.bench_spark
