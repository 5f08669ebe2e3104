"""`kfs cat -f FMT` and `-J` on a log dir against `kcat -C -f FMT` and `-J` consuming the same records
from a broker.

    python -m benchmarks.bench_kcat [--records 100000] [--rounds 5]

The broker is librdkafka's mock cluster, hosted by a kcat consumer started with
`-X test.mock.num.brokers=1` (no Kafka broker runs on this machine): it serves from memory over
loopback, so kcat's side is a best case of what it gets from a real broker. The mock keeps at most
100,000 records (and ~5 MB of batches) of a partition, hence the default and lz4. The same records
(keys, ~130-byte JSON values, a header) are written into a log dir in 20-record lz4 batches (Kafka's
framing; kafka-python's builder) and produced into the mock with `kcat -P -z lz4`. Both commands are
timed as whole processes, alternating, best of the rounds, output to /dev/null; the outputs are
compared first (without the timestamp, which the mock sets itself). Each side also runs on
a fifth of the records, and the difference gives its rate per record with its start-up taken out.
Needs kcat (`apt-get install kcat`).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORMAT = "%o %k %h %s\\n"


def write_log(logdir: Path, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    partition = logdir / f"{topic}-0"
    partition.mkdir(parents=True)
    out = bytearray()
    for base in range(0, len(records), 20):
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
        for i, (key, value) in enumerate(records[base:base + 20]):
            builder.append(i, 1_700_000_000_000 + base + i, key, value, [("trace", b"ab12")])
        out += lz4_batch(builder.build(), base)
    (partition / f"{0:020d}.log").write_bytes(bytes(out))


def lz4_batch(batch: bytearray, base: int) -> bytes:
    """The batch at `base` with its records section in an lz4 frame of independent blocks, as Kafka's
    KafkaLZ4BlockOutputStream writes it (and librdkafka, for kcat's side): length, codec and CRC to match."""
    import crc32c
    import lz4.frame

    out = bytearray(batch[:61]) + lz4.frame.compress(bytes(batch[61:]), block_linked=False)
    struct.pack_into(">q", out, 0, base)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, (struct.unpack_from(">h", out, 21)[0] & ~7) | 3)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def make_records(n: int) -> list[tuple[bytes, bytes]]:
    return [(b"user-%d" % (i % 1000), json.dumps({"order_id": i, "total": i % 977 / 4, "currency": "EUR",
                                                  "note": "an order of the kcat benchmark"}).encode())
            for i in range(n)]


def timed(command: str) -> float:
    start = time.perf_counter()
    subprocess.run(command, shell=True, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if shutil.which("kcat") is None:
        sys.exit("bench_kcat needs kcat: apt-get install kcat")
    kfs = shutil.which("kfs") or "kfs"
    work = Path(tempfile.mkdtemp(prefix="kfs-bench-kcat-"))
    host = subprocess.Popen(["kcat", "-C", "-X", "test.mock.num.brokers=1", "-b", "localhost:1", "-t", "bench",
                             "-p", "0", "-o", "end", "-q", "-f", "%o"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert host.stderr is not None
        bootstrap = next(m.group(1).decode() for line in host.stderr
                         if (m := re.search(rb"replaced with (127\.0\.0\.1:\d+)", line)))
        sizes = {"all": args.records, "a fifth": args.records // 5}
        logdirs = {}
        for name, n in sizes.items():
            records = make_records(n)
            topic = f"bench-{name.replace(' ', '-')}"  # (the same on both sides: -J prints it)
            logdirs[name] = work / name.replace(" ", "-")
            write_log(logdirs[name], topic, records)
            subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K", "\\x1f", "-D", "\\x1e",
                            "-H", "trace=ab12", "-X", "linger.ms=20", "-z", "lz4"],
                           input=b"".join(k + b"\x1f" + v + b"\x1e" for k, v in records), check=True)
            kept = subprocess.run(f"kcat -C -b {bootstrap} -t {topic} -p 0 -o beginning -e -q -f '%o\\n' | wc -l",
                                  shell=True, capture_output=True, text=True, check=True).stdout.strip()
            if int(kept) != n:
                sys.exit(f"the mock cluster kept {kept} of {n} records: run with fewer --records")
        for logdir in logdirs.values():  # the mock cluster's broker id, for -J's "broker"
            (logdir / "meta.properties").write_text("broker.id=1\n")
        for mode, flags in (("-f", f"-f '{FORMAT}'"), ("-J", "-J")):
            commands = {
                (name, side): (f"kcat -C -b {bootstrap} -t bench-{name.replace(' ', '-')} -p 0 -o beginning -q "
                               f"-c {n} {flags}" if side == "kcat" else
                               f"{kfs} cat {logdirs[name]} bench-{name.replace(' ', '-')}-0 {flags}")
                for name, n in sizes.items() for side in ("kcat", "kfs")}
            for name in sizes:  # (-J's "ts" is the mock's own time: compared without it)
                outputs = {side: re.sub(rb'"ts":\d+', b"", subprocess.run(commands[name, side], shell=True,
                                                                          capture_output=True, check=True).stdout)
                           for side in ("kcat", "kfs")}
                if outputs["kcat"] != outputs["kfs"]:
                    sys.exit(f"kcat and kfs print different bytes with {mode} for {name} of the records")
            best: dict[tuple[str, str], float] = {}
            for _ in range(args.rounds):
                for key, command in commands.items():
                    best[key] = min(best.get(key, float("inf")), timed(command))
            print(f"{args.records} records, {flags}, best of {args.rounds} (outputs identical):")
            for (name, side), seconds in best.items():
                print(f"  {side:5} {name:8} {seconds:7.3f} s")
            whole = best["all", "kcat"] / best["all", "kfs"]
            per_record = {side: (best["all", side] - best["a fifth", side]) / (sizes["all"] - sizes["a fifth"])
                          for side in ("kcat", "kfs")}
            print(f"  kcat's time over kfs's, whole commands: {whole:.2f}x (above 1: kfs is faster)")
            print(f"  per record, start-up taken out: kcat {per_record['kcat'] * 1e6:.2f} us, "
                  f"kfs {per_record['kfs'] * 1e6:.2f} us: {per_record['kcat'] / per_record['kfs']:.2f}x")
    finally:
        host.kill()
        host.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
