"""Damage through a real mount: a read that reaches a damaged closed segment is EIO after the data
before it (decoded, raw and `.value` views), `info.json` lists the problem, other paths work."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import GOLDEN, LOGDIRS, read_jsonl, run_kfs
from mounts import daemon_errors, golden_value, mounted, needs_fuse

pytestmark = needs_fuse


def _copy(tmp_path: Path, checkpoint: bool = True) -> Path:
    logdir = tmp_path / "logdir"
    for partition in ("orders-0", "legacy-0"):
        shutil.copytree(Path(LOGDIRS[0]) / partition, logdir / partition)
    shutil.copy(Path(LOGDIRS[0]) / "meta.properties", logdir)
    if checkpoint:
        (logdir / "cleaner-offset-checkpoint").write_text("0\n0\n")  # a broker's: nothing was ever compacted
    return logdir


def _batches(segment: int) -> list[dict]:
    return [b for b in read_jsonl(GOLDEN / "orders-0" / "batches.jsonl") if b["segment_base_offset"] == segment]


def _segment_sizes() -> dict[int, int]:
    info = json.loads((GOLDEN / "orders-0" / "info.json").read_text())
    return {s["base_offset"]: s["size"] for s in info["segments"]}


@pytest.mark.parametrize("cut", ["mid-batch", "batch-boundary", "batch-boundary, no cleaner checkpoint"])
def test_a_truncated_closed_segment_is_eio_after_the_data_before_it(tmp_path: Path, cut: str) -> None:
    """Without the cleaner checkpoint (a copied log dir), the boundary cut is seen from the indexes:
    the segment's offset and time indexes name the two batches it lost (kfs.storage.damage, rule 3)."""
    logdir = _copy(tmp_path, checkpoint="no cleaner checkpoint" not in cut)
    batches = _batches(661)
    victim = batches[3] if cut == "mid-batch" else batches[-2]  # the boundary cut loses the last two batches
    segment = logdir / "orders-0" / f"{661:020d}.log"
    os.truncate(segment, victim["position"] + (30 if cut == "mid-batch" else 0))
    records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
    before = [r for r in records if r["offset"] < victim["base_offset"]]
    raw_before = sum(size for base, size in _segment_sizes().items() if base < 661) + victim["position"]
    raw_expected = b"".join((Path(LOGDIRS[0]) / "orders-0" / f"{b:020d}.log").read_bytes()
                            for b in sorted(_segment_sizes()) if b < 661) + segment.read_bytes()[:victim["position"]]

    with mounted(tmp_path, [str(logdir)], expect_errors=True) as mnt:
        part = mnt / "orders-0"
        done = subprocess.run(["cat", str(part / "messages.jsonl")], capture_output=True, timeout=60)
        assert done.returncode != 0 and b"Input/output error" in done.stderr
        # a view known to hold damage is opened direct_io: every line before the damage, as `kfs cat`
        # prints them before it fails (page-cached, the page holding the damage failed whole)
        healthy = run_kfs("cat", LOGDIRS[0], "orders-0").stdout.splitlines(keepends=True)
        before_bytes = b"".join(healthy[:len(before)])
        assert done.stdout == before_bytes
        damaged_cat = run_kfs("cat", str(logdir), "orders-0")
        assert damaged_cat.returncode != 0 and damaged_cat.stdout == before_bytes
        # a view that starts a few records before the damage holds those lines, the damage, then the
        # segments after it (its start was counted past the damage: the lines before it were lost)
        near = part / "offset" / f"{before[-3]['offset']}.jsonl"
        after = run_kfs("cat", str(logdir), "orders-0", "--offset", "940").stdout
        assert near.stat().st_size == len(b"".join(healthy[len(before) - 3:len(before)])) + 1 + len(after)
        few = subprocess.run(["cat", str(near)], capture_output=True, timeout=60)
        assert few.returncode != 0 and few.stdout == b"".join(healthy[len(before) - 3:len(before)])

        small = subprocess.run(["dd", f"if={part / 'offset' / '0'}", "bs=1024"], capture_output=True, timeout=60)
        assert small.returncode != 0 and b"Input/output error" in small.stderr
        assert small.stdout == raw_expected and len(raw_expected) == raw_before  # every byte before it

        assert (part / "offset" / f"{before[-1]['offset']}.value").read_bytes() == golden_value(before[-1]["value"])
        with pytest.raises(OSError) as lost:
            (part / "offset" / f"{victim['base_offset']}.value").read_bytes()
        assert lost.value.errno == 5  # EIO: the record existed and is gone, not "no such offset"
        after = next(r for r in records if r["offset"] >= 940)
        assert (part / "offset" / "940.value").read_bytes() == golden_value(after["value"])  # past it: fine

        info = json.loads((part / "info.json").read_bytes())
        problems = {s["base_offset"]: s["problems"] for s in info["segments"]}
        assert [b for b, p in problems.items() if p] == [661] and str(victim["position"]) in problems[661][0]
        assert len((mnt / "legacy-0" / "messages.jsonl").read_bytes()) > 0  # other partitions keep working
    errors = "\n".join(daemon_errors(tmp_path / "mnt.log"))
    assert str(segment) in errors and str(victim["position"]) in errors


@pytest.mark.parametrize("segment_base", [661, 1518])  # a closed segment, and the live one
def test_a_hole_of_zeros_where_batches_were_is_damage_not_the_log_end(tmp_path: Path, segment_base: int) -> None:
    """The first batches of a segment zeroed in place (a sparse copy, a crash that lost the start of a
    file): zeros end a log only as a preallocated file's tail, after its last batch. Here complete
    batches follow them (the index knows them), so `kfs cat` and the mount stop at the hole with an
    error, after every record before it; the batches past it were silently dropped before."""
    logdir = _copy(tmp_path)
    batches = _batches(segment_base)
    hole_end = batches[2]["position"]
    segment = logdir / "orders-0" / f"{segment_base:020d}.log"
    with segment.open("r+b") as f:
        f.write(bytes(hole_end))
    records = read_jsonl(GOLDEN / "orders-0" / "records.jsonl")
    before = [r for r in records if r["offset"] < segment_base]
    healthy = run_kfs("cat", LOGDIRS[0], "orders-0").stdout.splitlines(keepends=True)
    before_bytes = b"".join(healthy[:len(before)])

    done = run_kfs("cat", str(logdir), "orders-0")
    assert done.returncode != 0 and done.stdout == before_bytes
    assert str(segment).encode() in done.stderr and b"position 0: zeroed bytes" in done.stderr

    with mounted(tmp_path, [str(logdir)], expect_errors=True) as mnt:
        part = mnt / "orders-0"
        assert os.stat(part / "messages.jsonl").st_size > len(before_bytes)  # the unreadable byte of the hole
        read = subprocess.run(["cat", str(part / "messages.jsonl")], capture_output=True, timeout=60)
        assert read.returncode != 0 and b"Input/output error" in read.stderr
        assert read.stdout == before_bytes  # every line before the hole (direct_io: kfs.fuse.tree._open_decoded)
        with pytest.raises(OSError) as lost:
            (part / "offset" / f"{segment_base}.value").read_bytes()
        assert lost.value.errno == 5  # EIO: the record was there, not "no such offset"
    errors = "\n".join(daemon_errors(tmp_path / "mnt.log"))
    assert str(segment) in errors and "zeroed bytes" in errors


def test_a_raw_reader_whose_file_lost_a_segment_gets_eio_never_a_short_file(tmp_path: Path) -> None:
    """`offset/0` open and read while a middle segment is deleted: a stat of the name after that gave
    the kernel the size of the log as it is now (without the segment), and the open reader's file
    ended there with no error (what `cp` keeps is a short file). Now the reader's file keeps its size
    and the reads it cannot serve fail: every byte it gets is the file's as it was, then EIO or its end."""
    from builders import write_numbered_segment

    from kfs.storage.local_log import REFRESH_INTERVAL

    logdir = tmp_path / "logdir"
    partition = logdir / "live-0"
    partition.mkdir(parents=True)
    for base in (0, 20000, 40000):
        write_numbered_segment(partition, base, list(range(base, base + 20000)))
    written = b"".join(p.read_bytes() for p in sorted(partition.glob("*.log")))
    with mounted(tmp_path, [str(logdir)], expect_errors=True) as mnt:
        name = mnt / "live-0" / "offset" / "0"
        with open(name, "rb") as reader:
            assert os.fstat(reader.fileno()).st_size == len(written)
            got = reader.read(4096)
            for path in partition.glob(f"{20000:020d}.*"):
                path.unlink()
            time.sleep(max(REFRESH_INTERVAL, 1.0) + 1.0)  # past the kernel's attribute timeout
            os.stat(name)  # another process's stat: the kernel takes what it answers
            error = None
            try:
                while chunk := reader.read(1 << 16):
                    got += chunk
            except OSError as e:
                error = e
        assert got == written[:len(got)]
        assert len(got) == len(written) or (error is not None and error.errno == errno.EIO), (len(got), error)


def test_damage_appended_to_a_closed_segment_under_a_direct_io_mount_is_seen(tmp_path: Path) -> None:
    """A closed segment that grows garbage after the mount mapped it (a bad copy finishing, a disk
    error) changes its identity: the next open counts it again and meets the damage, as `kfs cat`
    does (with -o direct_io the old map was served whole, exit 0)."""
    logdir = _copy(tmp_path)
    segment = logdir / "orders-0" / f"{661:020d}.log"
    with mounted(tmp_path, [str(logdir)], expect_errors=True, direct_io=True) as mnt:
        view = mnt / "orders-0" / "messages.jsonl"
        first = subprocess.run(["cat", str(view)], capture_output=True, timeout=60)
        assert first.returncode == 0
        with open(segment, "ab") as f:
            f.write(b"\x00\x00\x00\x00\x00\x00\x03\xad\x00\x00\x10\x00garbage")
        assert run_kfs("cat", str(logdir), "orders-0").returncode != 0
        second = subprocess.run(["cat", str(view)], capture_output=True, timeout=60)
        assert second.returncode != 0 and b"Input/output error" in second.stderr
        assert len(second.stdout) < len(first.stdout)


def _copy_by(tool: str, source: Path, target: Path) -> tuple[bool, bytes]:
    """Copy `source` to `target` as `tool` does: whether it reported an error, and what it copied."""
    target.unlink(missing_ok=True)
    failed = False
    if tool == "python read()":
        got = b""  # (unbuffered: a buffered read() that meets an error drops what it had read with it)
        try:
            with open(source, "rb", buffering=0) as f:
                while chunk := f.read(1 << 16):
                    got += chunk
        except OSError as e:
            failed = e.errno == errno.EIO
        target.write_bytes(got)
    elif tool == "shutil.copyfile":  # sendfile: the kernel reads even a direct_io file through the page cache
        try:
            shutil.copyfile(source, target)
        except OSError as e:
            failed = e.errno == errno.EIO
    else:
        command = {"cat": ["cat", str(source)], "tail -c +1": ["tail", "-c", "+1", str(source)],
                   "dd bs=1M": ["dd", f"if={source}", f"of={target}", "bs=1M", "status=none"],
                   "cp": ["cp", str(source), str(target)]}[tool]
        with open(target, "ab") as out:
            done = subprocess.run(command, stdout=out if tool in ("cat", "tail -c +1") else None,
                                  stderr=subprocess.PIPE, timeout=60)
        failed = done.returncode != 0 and b"Input/output error" in done.stderr
    return failed, target.read_bytes() if target.exists() else b""


READERS = ("cat", "dd bs=1M", "cp", "tail -c +1", "python read()")


@pytest.mark.parametrize("mode", ["page-cached", "-o direct_io"])
def test_every_reader_of_a_damaged_view_gets_eio_at_the_damage_never_an_end(tmp_path: Path, mode: str) -> None:
    """The tools a user copies with, on a decoded and a raw view of a segment cut mid-batch. A reader's
    own reads get exactly what `kfs cat` prints (or the raw bytes) before the damage, then EIO: before,
    a page-cached decoded view failed from the page holding the damage (1,838 bytes of lines lost).
    sendfile (shutil.copyfile), which the kernel serves through the page cache even for a direct_io
    file, gets every whole page before the damage, then EIO: before, a direct_io view answered it short
    and the kernel took that for the end of the file (a short copy, no error)."""
    logdir = _copy(tmp_path)
    victim = _batches(661)[3]
    segment = logdir / "orders-0" / f"{661:020d}.log"
    os.truncate(segment, victim["position"] + 30)
    decoded = run_kfs("cat", str(logdir), "orders-0")
    assert decoded.returncode != 0 and len(decoded.stdout) % 4096  # (the damage inside a page: the case here)
    raw = b"".join((Path(LOGDIRS[0]) / "orders-0" / f"{b:020d}.log").read_bytes() for b in (0, 313)) \
        + segment.read_bytes()[:victim["position"]]
    mount = mounted(tmp_path, [str(logdir)], expect_errors=True, direct_io=True) if "direct" in mode \
        else mounted(tmp_path, [str(logdir)], expect_errors=True)
    with mount as mnt:
        for name, before in (("messages.jsonl", decoded.stdout), ("offset/0", raw)):
            view = mnt / "orders-0" / name
            assert os.stat(view).st_size > len(before)  # the size counts through the damage
            for tool in READERS:
                failed, got = _copy_by(tool, view, tmp_path / "copy")
                assert failed and got == before, (name, tool, failed, len(got), len(before))
            failed, got = _copy_by("shutil.copyfile", view, tmp_path / "copy")
            assert failed and got == before[:len(before) // 4096 * 4096], (name, failed, len(got), len(before))


def test_a_raw_view_that_ends_at_damage_is_a_byte_longer_than_its_bytes(tmp_path: Path) -> None:
    """The last closed segment cut at a batch boundary and the active one empty: the raw view's bytes
    end where the damage is. Its size ended there too, so copies that go by the size (sendfile, tar)
    made a whole-looking short file, exit 0. The damage is one byte of the view that cannot be read."""
    logdir = _copy(tmp_path)
    partition = logdir / "orders-0"
    for path in partition.iterdir():  # 940 becomes the active segment, empty: the log ends at 940
        base = path.name.split(".")[0]
        if base.isdigit() and int(base) > 940:
            path.unlink()
        elif base.isdigit() and int(base) == 940:
            os.truncate(path, 0)
    segment = partition / f"{661:020d}.log"
    os.truncate(segment, _batches(661)[-2]["position"])  # the last two batches lost
    assert run_kfs("cat", str(logdir), "orders-0").returncode != 0
    before = b"".join((Path(LOGDIRS[0]) / "orders-0" / f"{b:020d}.log").read_bytes() for b in (0, 313)) \
        + segment.read_bytes()
    with mounted(tmp_path, [str(logdir)], expect_errors=True) as mnt:
        view = mnt / "orders-0" / "offset" / "0"
        for tool in ("shutil.copyfile", *READERS):
            failed, got = _copy_by(tool, view, tmp_path / "copy")
            assert failed and before.startswith(got) and len(got) >= len(before) // 4096 * 4096, (tool, len(got))
        done = subprocess.run(["tar", "-cf", str(tmp_path / "out.tar"), "-C", str(view.parent), "0"],
                              capture_output=True, timeout=60)
        assert done.returncode != 0, done.stderr
        assert os.stat(view).st_size == len(before) + 1
