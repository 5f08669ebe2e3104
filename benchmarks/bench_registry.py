"""Decoding schema-registry framed Avro values: `kfs cat` against confluent-kafka-python's own
`AvroDeserializer` + `json.dumps` per record, and what framed decoding costs over raw lines.

    python -m benchmarks.bench_registry [--records 1000000] [--dir /tmp] [--keep]

Builds a log dir with a `_schemas` topic (one Avro schema: a nested record, an array of records, a
union, an enum, strings, longs, a map; ~150 bytes a value) and a topic of framed values, then times,
in one run (ratios are what matter on a shared machine):

    kfs cat LOGDIR orders-0                 decoded Avro (kfs.registry), to /dev/null
    kfs cat LOGDIR orders-0 --decode raw    the same records as section 3's bytes (the compiled path)
    kfs cat LOGDIR plain-0 [--decode raw]   a topic of JSON text values beside the registry: no extra cost
    cat MNT/orders-0/messages.jsonl         a mount's first read of the decoded file (with -o size_cache=none):
                                            wall, and CPU (the mount daemon's during the read, and cat's)
    confluent-kafka AvroDeserializer + json.dumps, per record (values already in memory; skipped where
    confluent-kafka[avro,schemaregistry] is not installed)
    Apache Avro's Java GenericDatumReader + JsonEncoder (java/AvroBench.java; skipped without a JDK and
    Debian's libavro-java): with a warm JIT over 100,000 values in memory, wall and CPU per record (against
    kfs cat's, like for like); and the JVM's whole process, start to finish, over all the records (a file
    of the datums, each JSON printed on a line to /dev/null: what kafka-avro-console-consumer's decoding
    costs), wall and CPU, against the mount's first read

Batches are written with kafka-python's builder (kfs[test]).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

SCHEMA = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "order_id", "type": "long"},
    {"name": "customer_id", "type": "string"},
    {"name": "created", "type": "long"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "note", "type": ["null", "string"]},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "street", "type": "string"}, {"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}, {"name": "cents", "type": "long"}]}}},
    {"name": "attrs", "type": {"type": "map", "values": "string"}},
]}
SCHEMA_ID = 1
T0 = 1_735_689_600_000


def order(rnd: random.Random, i: int) -> dict:
    return {"order_id": i, "customer_id": f"customer-{rnd.randrange(100000):06d}", "created": T0 + i,
            "status": rnd.choice(["NEW", "PAID", "SHIPPED"]), "note": None if i % 3 else f"note {i}",
            "address": {"street": f"{rnd.randrange(1, 999)} Main Street", "city": rnd.choice(["Oslo", "Lyon", "Kyoto"]),
                        "zip": f"{rnd.randrange(10000, 99999)}"},
            "lines": [{"sku": f"SKU-{rnd.randrange(10000):05d}", "qty": rnd.randrange(1, 9),
                       "cents": rnd.randrange(100, 100000)} for _ in range(rnd.choice([1, 2, 3]))],
            "attrs": {"channel": rnd.choice(["web", "app"]), "campaign": f"c{rnd.randrange(50)}"}}


def write_partition(logdir: str, name: str, records: Sequence[tuple[bytes | None, bytes | None]],
                    first: int = 0) -> None:
    """Append `records` to `<logdir>/<name>/00000000000000000000.log` in batches of 200 (empty indexes)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    path = os.path.join(logdir, name)
    os.makedirs(path, exist_ok=True)
    stem = os.path.join(path, f"{0:020d}")
    for suffix in (".index", ".timeindex"):
        open(stem + suffix, "ab").close()
    with open(stem + ".log", "ab") as log:
        for start in range(0, len(records), 200):
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                                producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
            for delta, (key, value) in enumerate(records[start:start + 200]):
                builder.append(delta, timestamp=T0 + first + start + delta, key=key, value=value, headers=[])
            buf = builder.build()
            struct.pack_into(">q", buf, 0, first + start)
            log.write(bytes(buf))


def build(logdir: str, records: int, datums: str) -> list[bytes]:
    """Write the log dir, and every value's datum (unframed, length-prefixed) to `datums` for the JVM's whole
    process; returns a sample of the framed values (for the in-memory baselines)."""
    from fastavro import parse_schema, schemaless_writer

    parsed = parse_schema(SCHEMA)
    with open(os.path.join(logdir, "meta.properties"), "w") as f:
        f.write("version=1\nnode.id=1\n")
    write_partition(logdir, "_schemas-0", [(
        json.dumps({"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1}).encode(),
        json.dumps({"subject": "orders-value", "version": 1, "id": SCHEMA_ID, "schema": json.dumps(SCHEMA),
                    "deleted": False}).encode())])
    rnd = random.Random(1)
    frame = b"\x00" + struct.pack(">I", SCHEMA_ID)
    sample: list[bytes] = []
    datums_out = open(datums, "wb")  # noqa: SIM115 (written chunk by chunk below, closed at the end)
    for chunk_start in range(0, records, 100_000):
        chunk = []
        for i in range(chunk_start, min(records, chunk_start + 100_000)):
            out = io.BytesIO()
            out.write(frame)
            schemaless_writer(out, parsed, order(rnd, i))
            chunk.append((f"order-{i}".encode(), out.getvalue()))
        if not sample:
            sample = [v for _, v in chunk]
        datums_out.write(b"".join(struct.pack(">i", len(v) - 5) + v[5:] for _, v in chunk))
        write_partition(logdir, "orders-0", chunk, chunk_start)
        write_partition(logdir, "plain-0", [(k, json.dumps({"order": i}).encode()) for i, (k, _) in
                                            enumerate(chunk, chunk_start)], chunk_start)
    datums_out.close()
    return sample


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of a command, its output to /dev/null."""
    before = os.times()
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        subprocess.run(argv, stdout=devnull, check=True)
    wall = time.perf_counter() - start
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all its threads) a running process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mount_first_read(logdir: str) -> tuple[float, float, float] | None:
    """(wall seconds, CPU seconds, seconds from start to mounted) of `cat` of the mount's
    orders-0/messages.jsonl (sizes not cached): the CPU is the mount daemon's during the read (it counts
    the file's size at the open, then renders it) and cat's. None without FUSE."""
    if not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None:
        return None
    mountpoint = tempfile.mkdtemp(prefix="kfs-bench-registry-mnt-")
    kfs = [sys.executable, "-m", "kfs.cli.main"]
    started = time.perf_counter()
    daemon = subprocess.Popen([*kfs, "mount", "-f", "-o", "size_cache=none,size_scan=no", logdir, mountpoint],
                              stderr=subprocess.DEVNULL)
    try:
        while not os.path.ismount(mountpoint):
            if daemon.poll() is not None or time.perf_counter() - started > 60:
                raise RuntimeError(f"kfs mount did not mount {mountpoint}")
            time.sleep(0.01)
        ready = time.perf_counter() - started
        cpu_before = process_cpu(daemon.pid)
        wall, cat_cpu = timed(["cat", os.path.join(mountpoint, "orders-0", "messages.jsonl")])
        return wall, process_cpu(daemon.pid) - cpu_before + cat_cpu, ready
    finally:
        subprocess.run(["fusermount3", "-u", mountpoint], check=False)
        daemon.wait(timeout=60)
        os.rmdir(mountpoint)


JAVA_CLASSPATH = ["/usr/share/java/avro.jar", "/usr/share/java/jackson-core-asl.jar",
                  "/usr/share/java/jackson-mapper-asl.jar", "/usr/share/java/commons-compress.jar",
                  "/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-nop.jar"]


def java_classpath(scratch: str) -> str | None:
    """AvroBench compiled into `scratch` (and the schema beside it): its class path, or None without a JDK and
    Debian's libavro-java."""
    if shutil.which("javac") is None or not all(os.path.exists(j) for j in JAVA_CLASSPATH):
        return None
    classes = os.path.join(scratch, "java")
    os.makedirs(classes)
    classpath = ":".join([classes, *JAVA_CLASSPATH])
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "AvroBench.java")
    subprocess.run(["javac", "-nowarn", "-d", classes, "-cp", classpath, source], check=True, capture_output=True)
    with open(os.path.join(scratch, "schema.avsc"), "w") as f:
        f.write(json.dumps(SCHEMA))
    return classpath


def java_baseline(classpath: str, values: list[bytes], scratch: str) -> tuple[float, float]:
    """(wall, CPU) microseconds per record of Avro's Java reader + JsonEncoder, warm (the last of four passes)."""
    with open(os.path.join(scratch, "sample.bin"), "wb") as f:
        for value in values:
            f.write(struct.pack(">i", len(value) - 5) + value[5:])
    out = subprocess.run(["java", "-cp", classpath, "AvroBench", os.path.join(scratch, "schema.avsc"),
                          os.path.join(scratch, "sample.bin")], check=True, capture_output=True, text=True).stdout
    last = out.strip().splitlines()[-1]  # "pass 3: W us/record wall, C us/record CPU (...)"
    wall, cpu = (float(part.split()[0]) for part in last.split(":", 1)[1].split(",")[:2])
    return wall, cpu


def java_whole_process(classpath: str, datums: str, scratch: str) -> tuple[float, float]:
    """(wall, CPU) seconds of the JVM's whole process printing every datum's JSON (AvroBench --print)."""
    return timed(["java", "-cp", classpath, "AvroBench", os.path.join(scratch, "schema.avsc"), datums, "--print"])


def confluent_baseline(values: list[bytes]) -> float | None:
    """CPU seconds per record of confluent-kafka's AvroDeserializer + json.dumps, or None without it."""
    try:
        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        from confluent_kafka.serialization import MessageField, SerializationContext
    except ImportError:
        return None
    client = MockSchemaRegistryClient({"url": "mock://bench"})
    assert client.register_schema("orders-value", Schema(json.dumps(SCHEMA), "AVRO")) == SCHEMA_ID
    deserializer = AvroDeserializer(client)
    ctx = SerializationContext("orders", MessageField.VALUE)
    start = time.process_time()
    for value in values:
        json.dumps(deserializer(value, ctx))
    return (time.process_time() - start) / len(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    logdir = tempfile.mkdtemp(prefix="kfs-bench-registry-", dir=args.dir)
    scratch = tempfile.mkdtemp(prefix="kfs-bench-registry-java-", dir=args.dir)
    datums = os.path.join(scratch, "datums.bin")
    try:
        with open("/proc/loadavg") as f:
            print(f"load average at the start: {' '.join(f.read().split()[:3])}")
        start = time.perf_counter()
        sample = build(logdir, args.records, datums)
        size = os.path.getsize(os.path.join(logdir, "orders-0", f"{0:020d}.log"))
        print(f"built {args.records:,} framed Avro records ({size / 1e6:.0f} MB, "
              f"~{sum(map(len, sample)) / len(sample):.0f} bytes a value) in {time.perf_counter() - start:.1f} s")
        kfs = [sys.executable, "-m", "kfs.cli.main"]
        decoded = timed([*kfs, "cat", logdir, "orders-0"])
        raw = timed([*kfs, "cat", logdir, "orders-0", "--decode", "raw"])
        per_record = decoded[1] / args.records
        print(f"kfs cat (decoded Avro):        {decoded[0]:6.2f} s wall, {decoded[1]:6.2f} s CPU, "
              f"{per_record * 1e6:5.1f} us/record CPU")
        print(f"kfs cat --decode raw:          {raw[0]:6.2f} s wall, {raw[1]:6.2f} s CPU "
              f"(decoding costs {decoded[1] / max(raw[1], 1e-9):.1f}x the raw lines)")
        plain = timed([*kfs, "cat", logdir, "plain-0"])
        plain_raw = timed([*kfs, "cat", logdir, "plain-0", "--decode", "raw"])
        print(f"kfs cat of a plain topic:      {plain[0]:6.2f} s wall, {plain[1]:6.2f} s CPU "
              f"(--decode raw: {plain_raw[1]:.2f} s CPU; the registry beside it costs "
              f"{plain[1] - plain_raw[1]:+.2f} s)")
        mounted = mount_first_read(logdir)
        if mounted is not None:
            print(f"mount, first read of messages.jsonl: {mounted[0]:6.2f} s wall, {mounted[1]:6.2f} s CPU "
                  f"(the daemon's and cat's; mounted in {mounted[2]:.2f} s; kfs cat: {decoded[0]:.2f} s wall)")
        baseline = confluent_baseline(sample)
        classpath = java_classpath(scratch)
        if classpath is None:
            print("Apache Avro's Java JsonEncoder: no javac or libavro-java (apt-get install libavro-java)")
        else:
            java_wall, java_cpu = java_baseline(classpath, sample, scratch)
            print(f"Avro Java reader + JsonEncoder, warm JIT: {java_wall:5.2f} us/record wall, {java_cpu:5.2f} "
                  f"us/record CPU: kfs cat is {java_cpu / (per_record * 1e6):.2f}x that in CPU time, "
                  f"{java_wall / (decoded[0] / args.records * 1e6):.2f}x in wall time")
            whole = java_whole_process(classpath, datums, scratch)
            print(f"the JVM's whole process over the {args.records:,} records: {whole[0]:6.2f} s wall, "
                  f"{whole[1]:6.2f} s CPU")
            if mounted is not None:
                print(f"  the mount's first read is {whole[0] / mounted[0]:.2f}x the JVM's whole process in wall "
                      f"time, {whole[1] / mounted[1]:.2f}x in CPU time")
        if baseline is None:
            print("confluent-kafka's AvroDeserializer: not installed "
                  "(pip install 'confluent-kafka[avro,schemaregistry]')")
        else:
            print(f"AvroDeserializer + json.dumps: {baseline * 1e6:5.1f} us/record CPU (values in memory, no I/O): "
                  f"kfs cat is {baseline / per_record:.2f}x that")
    finally:
        with open("/proc/loadavg") as f:
            print(f"load average at the end: {' '.join(f.read().split()[:3])}")
        if args.keep:
            print(f"kept {logdir} and {scratch}")
        else:
            shutil.rmtree(logdir, ignore_errors=True)
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
