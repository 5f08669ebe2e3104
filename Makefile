# The two commands of the README (and the benchmarks).
.PHONY: demo test install-test bench bench-deps soak spark-cluster test-spark-cluster bench-spark

demo:
	bash kfs/demo/demo.sh

# Installs what the tests need into the active Python (a venv is best): kfs with its test and
# Spark extras (PySpark builds from its source archive the first time: several minutes).
install-test:
	@python3 -c "import pytest, xdist, hypothesis, kafka, snappy, mypy, pyspark, pyarrow, kfs._native._speedups" 2>/dev/null \
	  || python3 -m pip install -q -e '.[test,spark]'

# The tests run in as many processes as there are cores, at most 4, a test file to a process (pytest-xdist
# --dist loadfile: a file's module fixtures, a Spark cluster or a mount, are made once); TEST_WORKERS=0 runs
# them in this process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
# compileall first: kfs is installed editable, so its modules (and the tests') are compiled where they are,
# and with PYTHONDONTWRITEBYTECODE=1 (set on the machine CI runs on) no process would keep that work: every
# `kfs` command and Spark worker the tests start would compile them afresh.
test: install-test
	python3 -m compileall -q kfs tests
	python3 -m pytest -q --durations=12 -n $(TEST_WORKERS) --dist loadfile tests

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
	python3 -m benchmarks.bench_spark_fixed
	python3 -m benchmarks.bench_spark_typed
	python3 -m benchmarks.bench_spark_internal
	python3 -m benchmarks.bench_readers
	python3 -m benchmarks.bench_registry
	python3 -m benchmarks.bench_native
	python3 -m benchmarks.bench_replicas

# The live-writer soak (docs/robustness.md): a writer appending, rolling, deleting and cleaning while
# readers read through a mount; needs /dev/fuse and the test extra.
soak:
	cd tests && python3 -m soak.soak --minutes 10

# A Spark standalone Master and Worker from the pip-installed PySpark, on 127.0.0.1:7077 (docs/spark.md),
# in the foreground: Ctrl-C stops both. Then: kfs spark grep --master spark://127.0.0.1:7077 ...
SPARK_HOME_PIP = $(shell python3 -c "import os, pyspark; print(os.path.dirname(pyspark.__file__))")
spark-cluster:
	SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$$(command -v python3) bash -c 'trap "kill 0" EXIT; \
	  $(SPARK_HOME_PIP)/bin/spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7077 --webui-port 8080 & \
	  $(SPARK_HOME_PIP)/bin/spark-class org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores 2 --memory 3g \
	    --work-dir /tmp/kfs-spark-work spark://127.0.0.1:7077 & wait'

# The source and jobs on a real standalone cluster the tests start and stop; the Spark comparison benchmark.
test-spark-cluster: install-test
	python3 -m pytest -q tests/test_spark_cluster.py tests/test_spark_broker_local.py tests/test_spark_tasks.py

bench-spark:
	python3 -m benchmarks.bench_spark
	python3 -m benchmarks.bench_spark_fixed
