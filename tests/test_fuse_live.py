"""A live log under a mount: a writer appends and rolls segments while readers follow; concurrent
readers; corrupt and vanishing files; partitions appearing after the mount."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import GOLDEN, LOGDIRS, golden_logdir, read_jsonl
from mounts import daemon_errors, golden_value, mounted, needs_fuse

pytestmark = needs_fuse

WRITER = r'''
import os, struct, sys, time
sys.path.insert(0, sys.argv[1])
from conftest import v2_batch
directory, total, per_segment = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
offset, segment_base, log = 0, None, None
while offset < total:
    if segment_base is None or offset - segment_base >= per_segment:
        if log:
            log.close()
        segment_base = offset
        stem = os.path.join(directory, f"{segment_base:020d}")
        open(stem + ".index", "wb").close()
        open(stem + ".timeindex", "wb").close()
        log = open(stem + ".log", "ab", buffering=0)
    n = min(1 + offset % 4, total - offset)
    records = [(offset + i, 1_700_000_000_000 + offset + i, b"k%d" % (offset + i), b"value-%d" % (offset + i), [])
               for i in range(n)]
    data = v2_batch(offset, records, codec=offset % 3)
    half = len(data) // 2
    log.write(data[:half])      # a reader may see this half-written batch: it must not show it
    time.sleep(0.002)
    log.write(data[half:])
    offset += n
    time.sleep(0.001)
log.close()
print(offset)
'''


def _follow(path: Path, until: int, timeout: float) -> list[dict]:
    """Read `path` like `tail -f`: one fd, read to EOF, wait, read on; every line must be whole."""
    lines: list[dict] = []
    pending = b""
    deadline = time.monotonic() + timeout
    while True:  # offset/0.jsonl exists once offset 0 does
        try:
            fd = os.open(path, os.O_RDONLY)
            break
        except FileNotFoundError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    try:
        while time.monotonic() < deadline:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                if lines and lines[-1]["offset"] >= until - 1:
                    break
                time.sleep(0.05)
                continue
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                line = json.loads(raw)  # a half-written or wrong line fails here ...
                expected_offset = lines[-1]["offset"] + 1 if lines else 0
                assert line["offset"] == expected_offset  # ... or here
                assert line["value"] == f"value-{expected_offset}"
                lines.append(line)
    finally:
        os.close(fd)
    assert pending == b""
    return lines


def test_a_reader_following_a_growing_rolling_log_sees_only_whole_correct_lines(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    partition = logdir / "live-0"
    partition.mkdir(parents=True)
    total = 1500
    (partition / f"{0:020d}.log").touch()
    with mounted(tmp_path, [str(logdir)]) as mnt:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(Path(__file__).parent), str(partition),
                                   str(total), "200"], stdout=subprocess.PIPE)
        followed: dict[str, list] = {}
        readers = [threading.Thread(target=lambda name=name: followed.__setitem__(
            name, _follow(mnt / "live-0" / name, total, 120))) for name in ("messages.jsonl", "offset/0.jsonl")]
        for reader in readers:
            reader.start()
        assert int(writer.communicate(timeout=120)[0]) == total
        for reader in readers:
            reader.join()
        assert len(list(partition.glob("*.log"))) > 3  # it rolled
        for name in ("messages.jsonl", "offset/0.jsonl"):
            assert [line["offset"] for line in followed[name]] == list(range(total))
        # and a fresh read agrees, with an exact size once the writer stopped
        data = (mnt / "live-0" / "messages.jsonl").read_bytes()
        assert data.count(b"\n") == total
        raw = (mnt / "live-0" / "offset" / "0").read_bytes()
        assert raw == b"".join(p.read_bytes() for p in sorted(partition.glob("*.log")))


def test_eight_concurrent_readers(tmp_path: Path) -> None:
    views = ["orders-0/messages.jsonl", "audit.events-v2-3/messages.jsonl", "orders-0/offset/700.jsonl",
             "orders-0/offset/700", "payments-0/messages.jsonl", "legacy-0/offset/100.jsonl",
             "metrics_raw-0/info.json", "inventory-2/messages.jsonl"]
    with mounted(tmp_path) as mnt:
        expected = {v: (mnt / v).read_bytes() for v in views}
        failures: list[str] = []

        def reader(view: str) -> None:
            for _ in range(6):
                out = subprocess.run(["cat", str(mnt / view)], capture_output=True, timeout=60).stdout
                if out != expected[view]:
                    failures.append(view)

        threads = [threading.Thread(target=reader, args=(v,)) for v in views]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
        assert [json.loads(x) for x in expected["orders-0/messages.jsonl"].splitlines()] == records


def _copy_partition(tmp_path: Path, partition: str) -> Path:
    logdir = tmp_path / "logdir"
    logdir.mkdir(exist_ok=True)
    shutil.copytree(Path(golden_logdir(partition)) / partition, logdir / partition)
    return logdir


def test_a_corrupt_batch_is_eio_for_that_read_only(tmp_path: Path) -> None:
    logdir = _copy_partition(tmp_path, "orders-0")
    shutil.copytree(Path(golden_logdir("payments-0")) / "payments-0", logdir / "payments-0")
    batches = read_jsonl(GOLDEN / "orders-0" / "batches.jsonl")
    victim = [b for b in batches if b["segment_base_offset"] == 661][3]
    segment = logdir / "orders-0" / f"{661:020d}.log"
    data = bytearray(segment.read_bytes())
    data[victim["position"] + 16] = 0x7F  # the magic byte: no format Kafka ever wrote
    segment.write_bytes(bytes(data))
    records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
    before = [r for r in records if r["offset"] < victim["base_offset"]]
    with mounted(tmp_path, [str(logdir)], expect_errors=True) as mnt:
        done = subprocess.run(["cat", str(mnt / "orders-0" / "messages.jsonl")], capture_output=True, timeout=60)
        assert done.returncode != 0 and b"Input/output error" in done.stderr
        # every page before the one holding the damage: whole lines, then (maybe) part of one
        got = [json.loads(x) for x in done.stdout.split(b"\n")[:-1]]
        assert got == before[:len(got)] and len(got) >= len([r for r in before if r["offset"] < 661])
        value = mnt / "orders-0" / "offset" / f"{before[-1]['offset']}.value"  # data before stays readable
        assert value.read_bytes() == golden_value(before[-1]["value"])
        assert len((mnt / "payments-0" / "messages.jsonl").read_bytes()) > 0  # other paths keep working
        assert (mnt / "orders-0" / "offset" / "0").read_bytes()[:100]
    errors = "\n".join(daemon_errors(tmp_path / "mnt.log"))
    assert str(segment) in errors and str(victim["position"]) in errors


def test_a_vanished_segment_is_an_error_not_a_crash(tmp_path: Path) -> None:
    logdir = _copy_partition(tmp_path, "orders-0")
    with mounted(tmp_path, [str(logdir)], expect_errors=True) as mnt:
        with open(mnt / "orders-0" / "offset" / "0", "rb") as f:
            head = f.read(1000)
            for path in sorted((logdir / "orders-0").glob("*.log"))[:2]:  # retention deletes the oldest
                path.unlink()
            with contextlib.suppress(OSError):
                f.read()
        assert head
        time.sleep(1.2)
        with pytest.raises(FileNotFoundError):
            os.stat(mnt / "orders-0" / "offset" / "0")
        lines = (mnt / "orders-0" / "messages.jsonl").read_bytes().splitlines()
        assert json.loads(lines[0])["offset"] == 661  # the new log start
        assert os.listdir(mnt) == ["orders-0"]


def test_a_partition_created_after_mounting_appears(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    shutil.copy(Path(LOGDIRS[0]) / "meta.properties", logdir)  # a broker's empty log dir: just its meta.properties
    with mounted(tmp_path, [str(logdir)]) as mnt:
        assert os.listdir(mnt) == []
        shutil.copytree(Path(golden_logdir("web_clicks-1")) / "web_clicks-1", logdir / "web_clicks-1")
        assert os.listdir(mnt) == ["web_clicks-1"]
        lines = [json.loads(x) for x in (mnt / "web_clicks-1" / "messages.jsonl").read_bytes().splitlines()]
        assert lines == read_jsonl(GOLDEN / "web_clicks-1" / "records.jsonl")
        shutil.rmtree(logdir / "web_clicks-1")
        assert os.listdir(mnt) == []
        time.sleep(1.2)  # the kernel keeps a looked-up name for the entry timeout (1 s)
        with pytest.raises(FileNotFoundError):
            os.stat(mnt / "web_clicks-1" / "messages.jsonl")


def _daemon_pid(mountpoint: Path) -> int:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path("/proc", entry, "cmdline").read_bytes()
            except OSError:
                continue
            if b"kfs.fuse.mount" in cmdline and b'"%s"' % str(mountpoint).encode() in cmdline:
                return int(entry)
    raise AssertionError(f"no kfs daemon serves {mountpoint}")


def _open_segment_files(pid: int, roots: list[Path]) -> list[str]:
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return [t for t in targets if t.endswith((".log", ".index", ".timeindex"))
            and any(t.startswith(str(root)) for root in roots)]


def test_mounting_5000_partitions_is_lazy(tmp_path: Path) -> None:
    """Mounting and listing open no segment file: partitions are opened when first read (the
    background size scan, which reads them all, is off here: it is a reader like any other)."""
    logdir = tmp_path / "logdir"
    source = Path(LOGDIRS[0]) / "orders-0"
    shared = tmp_path / "segment.log"  # hard links to one copy: kfs follows no symbolic link to a segment
    shutil.copyfile(source / f"{0:020d}.log", shared)
    for i in range(5000):
        partition = logdir / f"topic-{i}"
        partition.mkdir(parents=True)
        os.link(shared, partition / f"{0:020d}.log")
    from kfs.fuse.mount import mount, unmount

    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    start = time.perf_counter()
    mount([str(logdir)], str(mountpoint), {"log": str(tmp_path / "mnt.log"), "size_scan": "no"})
    elapsed = time.perf_counter() - start
    try:
        pid = _daemon_pid(mountpoint)
        listed = time.perf_counter()
        assert len(os.listdir(mountpoint)) == 5000
        listed = time.perf_counter() - listed
        assert _open_segment_files(pid, [logdir, source.resolve(), shared]) == []
        assert (mountpoint / "topic-4321" / "offset" / "0").read_bytes() == (source / f"{0:020d}.log").read_bytes()
    finally:
        unmount(str(mountpoint))
    print(f"mount of 5000 partitions: {elapsed:.3f}s (including the daemon's interpreter start), ls {listed:.3f}s")


def test_a_partition_directory_without_segments_is_an_empty_log(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    (logdir / "fresh-0").mkdir(parents=True)
    shutil.copy(Path(LOGDIRS[0]) / "meta.properties", logdir)
    with mounted(tmp_path, [str(logdir)]) as mnt:
        assert (mnt / "fresh-0" / "messages.jsonl").read_bytes() == b""
        assert json.loads((mnt / "fresh-0" / "info.json").read_bytes())["log_end_offset"] == 0
        with pytest.raises(FileNotFoundError):
            os.stat(mnt / "fresh-0" / "offset" / "0")


def test_a_preallocated_live_segment_growing_in_place_grows_through_the_mount(tmp_path: Path) -> None:
    """log.preallocate=true: the broker writes into the zeros of a file whose size never changes. The
    mount's messages.jsonl grows by the appended record's line (after the attribute timeout), and
    `tail -n 1` and the record's `.value` show it."""
    logdir = tmp_path / "logdir"
    shutil.copytree(Path(LOGDIRS[0]) / "orders-0", logdir / "orders-0")
    batches = [b for b in read_jsonl(GOLDEN / "orders-0" / "batches.jsonl") if b["segment_base_offset"] == 1518]
    last = batches[-1]
    path = logdir / "orders-0" / f"{1518:020d}.log"
    whole = path.read_bytes()
    with open(path, "r+b") as f:  # the last batch not written yet, the file preallocated past it
        f.seek(last["position"])
        f.write(bytes(len(whole) - last["position"] + (1 << 16)))
    records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
    appended = [r for r in records if r["offset"] >= last["base_offset"]]
    with mounted(tmp_path, [str(logdir)]) as mnt:
        view = mnt / "orders-0" / "messages.jsonl"
        before = view.read_bytes()
        assert before.count(b"\n") == len(records) - len(appended)
        with open(path, "r+b") as f:  # the broker appends the batch, in place
            f.seek(last["position"])
            f.write(whole[last["position"]:])
        time.sleep(1.5)  # the kernel keeps a stat for attr_timeout (1 s)
        after = view.read_bytes()
        assert after.startswith(before) and after.count(b"\n") == len(records)
        tail = subprocess.run(["tail", "-n", "1", str(view)], capture_output=True, timeout=30, check=True).stdout
        assert json.loads(tail)["offset"] == records[-1]["offset"]
        value = (mnt / "orders-0" / "offset" / f"{records[-1]['offset']}.value").read_bytes()
        assert value == golden_value(records[-1]["value"])
