# The two commands of the README (and the benchmarks).
.PHONY: demo test install-test bench bench-deps soak

demo:
	bash kfs/demo/demo.sh

# Installs what the tests need into the active Python (a venv is best): kfs with its test and
# Spark extras (PySpark builds from its source archive the first time: several minutes).
install-test:
	@python3 -c "import pytest, hypothesis, kafka, snappy, mypy, pyspark, pyarrow, kfs._native._speedups" 2>/dev/null \
	  || python3 -m pip install -q -e '.[test,spark]'

test: install-test
	python3 -m pytest -q tests

# The benchmark against Kafka's own decoder runs Kafka's classes (benchmarks/kafka-side-bench.jar) on a JRE
# with Debian's codec jars, and uses bindfs as the FUSE baseline: installed here when missing (needs root).
BENCH_JARS = /usr/share/java/lz4-java.jar /usr/share/java/snappy-java.jar /usr/share/java/zstd-jni.jar \
	/usr/share/java/slf4j-api.jar /usr/share/java/slf4j-nop.jar
bench-deps:
	@python3 -c "import confluent_kafka.schema_registry.avro" 2>/dev/null \
	  || python3 -m pip install -q 'confluent-kafka[avro,schemaregistry]'  # bench_registry's baseline
	@for f in $(BENCH_JARS); do [ -e $$f ] || missing=1; done; \
	command -v java >/dev/null && command -v bindfs >/dev/null || missing=1; \
	if [ -n "$$missing" ]; then \
	  echo "make bench-deps: apt-get install default-jre-headless bindfs liblz4-java libsnappy-java libzstd-jni-java libslf4j-java"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless bindfs liblz4-java libsnappy-java \
	    libzstd-jni-java libslf4j-java >/dev/null; \
	fi

bench: bench-deps
	python3 -m benchmarks.bench_kafka
	python3 -m benchmarks.bench_core
	python3 -m benchmarks.bench_fuse
	python3 -m benchmarks.bench_sizes
	python3 -m benchmarks.bench_spark
	python3 -m benchmarks.bench_registry

# The live-writer soak (docs/robustness.md): a writer appending, rolling, deleting and cleaning while
# readers read through a mount; needs /dev/fuse and the test extra.
soak:
	cd tests && python3 -m soak.soak --minutes 10
