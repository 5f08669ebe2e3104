# The two commands of the README (and the benchmarks).
.PHONY: demo test install-test bench

demo:
	bash kfs/demo/demo.sh

# Installs what the tests need into the active Python (a venv is best): kfs with its test and
# Spark extras (PySpark builds from its source archive the first time: several minutes).
install-test:
	@python3 -c "import pytest, hypothesis, kafka, snappy, mypy, pyspark, pyarrow, kfs.record._speedups" 2>/dev/null \
	  || python3 -m pip install -q -e '.[test,spark]'

test: install-test
	python3 -m pytest -q tests

bench:
	python3 -m kfs.bench.bench_core
	python3 -m kfs.bench.bench_fuse
	python3 -m kfs.bench.bench_sizes
	python3 -m kfs.bench.bench_spark
