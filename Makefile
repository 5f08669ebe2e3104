# The two commands of the README.
.PHONY: demo test bench

demo:
	bash kfs/demo/demo.sh

test:
	python3 -m pytest -q tests

bench:
	python3 -m kfs.bench.bench_core
	python3 -m kfs.bench.bench_fuse
