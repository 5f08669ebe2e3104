"""The benchmark's Java side (benchmarks/kafka-side-bench.jar: Kafka's own classes) and kfs read the same
records: a partition written by Kafka's MemoryRecordsBuilder (none and lz4 batches) decodes in kfs to
exactly what Kafka's FileRecords iteration prints, so `make bench` compares equal work."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from benchmarks.bench_kafka import DEBIAN_JARS, JAR, java

JARS = [str(JAR)] + [f"/usr/share/java/{name}.jar" for name in DEBIAN_JARS]
pytestmark = pytest.mark.skipif(not shutil.which("java") or not all(map(os.path.exists, JARS)),
                                reason="needs a JRE and Debian's liblz4-java libsnappy-java libzstd-jni-java "
                                       "libslf4j-java")
RECORD = re.compile(r"^\| offset: (\d+) CreateTime: (\d+) .* headerKeys: \[(.*)\] key: (\S+) payload: (.*)$")


def test_kfs_decodes_what_kafka_wrote_as_kafka_reads_it(tmp_path) -> None:
    cp = ":".join(JARS)
    partition = tmp_path / "logdir" / "bench.mixed-0"
    subprocess.run(java(cp, "write", str(partition), "3000", "mixed", "200000"), check=True)
    segments = sorted(str(p) for p in partition.glob("*.log"))
    assert len(segments) > 1  # rolled, so both read across segments
    dump = subprocess.run(java(cp, "dump", "1", *segments), capture_output=True, text=True, check=True).stdout
    kafka = [m.groups() for line in dump.splitlines() if (m := RECORD.match(line))]
    codecs = set(re.findall(r"compresscodec: (\w+)", dump))
    assert codecs == {"none", "lz4"} and "isvalid: false" not in dump
    lines = subprocess.run([sys.executable, "-c", "from kfs.cli.main import main; main()", "cat",
                            str(tmp_path / "logdir"), partition.name], capture_output=True, text=True,
                           check=True, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}).stdout
    ours = [json.loads(line) for line in lines.splitlines()]
    assert len(ours) == len(kafka) == 3000
    for record, (offset, timestamp, header_keys, key, value) in zip(ours, kafka, strict=True):
        assert (record["offset"], record["timestamp"], record["key"], record["value"]) == \
            (int(offset), int(timestamp), key, value)
        assert [h[0] for h in record["headers"]] == header_keys.split(",")
