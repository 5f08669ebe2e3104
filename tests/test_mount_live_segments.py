"""A real mount while the log cleaner swaps segments and retention deletes them (found by the
live-writer soak, tests/soak): whole-partition reads are right or EIO, never other lines; a
segment's name never vanishes during a swap; deleted and replaced files are not held open."""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

from builders import write_numbered_segment
from conftest import v2_batch
from mounts import daemon_errors, mounted, needs_fuse
from soak.soak import VANISHED

pytestmark = needs_fuse

SEGMENTS = (0, 100, 200, 300)


def _partition(tmp_path: Path) -> Path:
    partition = tmp_path / "logdir" / "live-0"
    partition.mkdir(parents=True)
    for base in SEGMENTS:
        write_numbered_segment(partition, base, list(range(base, base + 100)))
    return partition


def _line(offset: int) -> bytes:
    return (b'{"topic": "live", "partition": 0, "offset": %d, "timestamp": %d, "timestamp_type": "CreateTime", '
            b'"key": "k%d", "value": "value-%d", "headers": []}\n' % (offset, 1_700_000_000_000 + offset, offset,
                                                                       offset))


def _swapper(tmp_path: Path, partition: Path, stop: threading.Event, swaps: list[int]) -> None:
    """Swap segment 100 between its whole and its cleaned (every other record) form, the cleaner's
    way: files written elsewhere, then renamed over the segment's (a new inode each time)."""
    n = 0
    while not stop.is_set():
        scratch = tmp_path / f"cleaned-{n}"
        scratch.mkdir()
        write_numbered_segment(scratch, 100, list(range(100, 200, 1 if n % 2 else 2)))
        for path in scratch.iterdir():
            os.replace(path, partition / path.name)
        n += 1
        swaps.append(n)
        time.sleep(0.1)


def test_whole_partition_reads_during_cleaner_swaps_are_right_or_eio(tmp_path: Path) -> None:
    partition = _partition(tmp_path)
    whole = b"".join(_line(o) for o in range(400))
    cleaned = b"".join(_line(o) for o in range(400) if not 100 <= o < 200 or o % 2 == 0)
    stop, swaps = threading.Event(), []
    with mounted(tmp_path, [str(tmp_path / "logdir")], expect_errors=True) as mnt:
        swapper = threading.Thread(target=_swapper, args=(tmp_path, partition, stop, swaps))
        swapper.start()
        good = eio = 0
        wrong: list[bytes] = []
        deadline = time.monotonic() + 8
        try:
            while time.monotonic() < deadline:
                try:
                    with open(mnt / "live-0" / "messages.jsonl", "rb", buffering=0) as f:
                        chunks = []
                        while chunk := f.read(4096):  # small reads: swaps land between them
                            chunks.append(chunk)
                    data = b"".join(chunks)
                except OSError as e:
                    assert e.errno == errno.EIO, e
                    eio += 1
                    continue
                if data in (whole, cleaned):
                    good += 1
                else:
                    wrong.append(data)
        finally:
            stop.set()
            swapper.join()
    assert wrong == [], f"{len(wrong)} wrong reads of {good + eio + len(wrong)} ({len(swaps)} swaps)"
    assert good > 0 and len(swaps) > 20, (good, eio)
    print(f"{good} right, {eio} EIO, {len(swaps)} swaps")
    _only_vanished(tmp_path / "mnt.log")


def _only_vanished(log_path: Path) -> None:
    """The daemon logged nothing but reads that met a deleted or replaced segment."""
    unexpected = [line for line in daemon_errors(log_path) if not VANISHED.search(line)]
    assert unexpected == [], unexpected[:5]


def test_a_segment_being_swapped_is_its_swap_file_and_never_vanishes(tmp_path: Path) -> None:
    """Kafka's cleaner (LocalLog.replaceSegments) renames the cleaned files to `.swap`, the old ones
    to `.deleted`, then the `.swap` files to their names: in between there is no `<base>.log`, and
    Kafka's LogLoader takes the `.swap` file for the segment. kfs answered ENOENT there for every
    name in the segment (found by the live-writer soak)."""
    partition = _partition(tmp_path)
    cleaned = b"".join(_line(o) for o in range(400) if not 100 <= o < 200 or o % 2 == 0)
    scratch = tmp_path / "cleaned"
    scratch.mkdir()
    write_numbered_segment(scratch, 100, list(range(100, 200, 2)))
    stem = f"{100:020d}"
    with mounted(tmp_path, [str(tmp_path / "logdir")]) as mnt:
        live = mnt / "live-0"
        assert (live / "offset" / "151.value").read_bytes() == b"value-151"
        for suffix in (".log", ".index", ".timeindex"):
            os.replace(scratch / (stem + suffix), partition / (stem + suffix + ".swap"))
        for suffix in (".log", ".index", ".timeindex"):
            os.replace(partition / (stem + suffix), partition / (stem + suffix + ".deleted"))
        time.sleep(1.2)  # the partition's listing and the kernel's attributes are renewed
        assert not (partition / (stem + ".log")).exists()
        assert (live / "offset" / "150.value").read_bytes() == b"value-150"
        assert not (live / "offset" / "151.value").exists()  # cleaned away: a gap
        assert (live / "offset" / "151.jsonl").open("rb").readline() == _line(152)
        assert (live / "time" / str(1_700_000_000_000 + 140)).open("rb").read(61)[:8]  # a batch
        with open(live / "messages.jsonl", "rb") as during:
            assert during.read(len(cleaned) // 2) == cleaned[:len(cleaned) // 2]
            for suffix in (".log", ".index", ".timeindex"):
                os.replace(partition / (stem + suffix + ".swap"), partition / (stem + suffix))
            time.sleep(1.2)
            assert (live / "offset" / "150.value").read_bytes() == b"value-150"
            assert during.read() == cleaned[len(cleaned) // 2:]  # the same file under its final name
        assert (live / "messages.jsonl").read_bytes() == cleaned
    _only_vanished(tmp_path / "mnt.log")


def test_a_reader_whose_pages_came_from_the_cache_gets_eio_after_a_swap_never_other_lines(tmp_path: Path) -> None:
    """A reader opened on pages another reader had cached read them without asking kfs; after the
    cleaner swapped a segment and the kernel dropped those pages, its next read was served from the
    file as it now is, at positions that now hold other lines: `grep -r` lost records (found by the
    soak). Every byte it reads must be the file as it was when it opened, then EIO."""
    partition = tmp_path / "logdir" / "live-0"
    partition.mkdir(parents=True)
    bases = range(0, 8000, 1000)
    for base in bases:
        write_numbered_segment(partition, base, list(range(base, base + 1000)))
    old = b"".join(_line(o) for o in range(8000))
    with mounted(tmp_path, [str(tmp_path / "logdir")], expect_errors=True) as mnt:
        path = mnt / "live-0" / "messages.jsonl"
        assert path.read_bytes() == old  # cached by the kernel
        with open(path, "rb", buffering=0) as reader:
            got = reader.read(len(old) // 2)  # from the cache
            scratch = tmp_path / "cleaned"
            scratch.mkdir()
            write_numbered_segment(scratch, 1000, list(range(1000, 2000, 2)))
            for file in scratch.iterdir():
                os.replace(file, partition / file.name)
            time.sleep(1.5)
            os.stat(path)  # the kernel sees the new size and drops the file's pages
            try:
                while chunk := reader.read(1 << 16):
                    got += chunk
            except OSError as e:
                assert e.errno == errno.EIO
        assert old.startswith(got)
    _only_vanished(tmp_path / "mnt.log")


def test_offset_latest_is_never_cut_at_the_size_the_kernel_holds_for_the_name(tmp_path: Path) -> None:
    """`offset/latest` names another batch as the log grows; the kernel ended a read at the size
    it held for the name (the last batch's before), and `cat offset/latest` gave a batch cut short
    (found by the soak)."""
    partition = tmp_path / "logdir" / "live-0"
    partition.mkdir(parents=True)
    write_numbered_segment(partition, 0, list(range(0, 5)))  # one small batch
    with mounted(tmp_path, [str(tmp_path / "logdir")]) as mnt:
        latest = mnt / "live-0" / "offset" / "latest"
        small = os.stat(latest).st_size
        records = [(o, 1_700_000_000_000 + o, b"k%d" % o, b"v" * 3000, []) for o in range(5, 10)]
        big = v2_batch(5, records)
        with open(partition / f"{0:020d}.log", "ab") as log:
            log.write(big)
        time.sleep(0.6)  # the partition is listed again; the kernel still holds the small size
        data = latest.read_bytes()  # the latest batch, or (a lookup is reused for a second) from the one before
        log_bytes = (partition / f"{0:020d}.log").read_bytes()
        assert data in (big, log_bytes) and len(big) > small
