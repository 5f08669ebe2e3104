"""`kfs cat` and the mount's `messages.jsonl` agree on damaged partitions: the same records, and the
damage reported at the same place (kfs cat: one sentence and exit 1 after the records before it;
the mount: every page before the one holding it, then EIO; its size covers the damage).

Each case is one class of the campaign's partition-target findings (tests/fuzz/fuzz_targets.py),
minimized to one edit of a Kafka-written partition. Before the fixes, the decoded view took a
segment's run as complete once its records reached the run's end, so damage after a segment's
last record ended `messages.jsonl` quietly or was skipped; records outside their batch's offsets,
past the active segment's log end, below the segment, out of order or overlapping the batch before
were printed by `kfs cat` and dropped, or measured or mapped differently, by the view.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import fuzz_mutators as mut
import fuzz_targets as t
import pytest
from conftest import LOGDIRS, golden_logdir
from mounts import daemon_errors, mounted, needs_fuse

from kfs.record import peek_size


def _batch(data: bytes, position: int) -> bytes:
    size, _ = peek_size(data, position)
    return data[position:position + size]


def garbage_after_closed_segment(pdir: Path) -> None:
    """Bytes after a closed segment's last complete batch (not zeros: a preallocated tail reads as the end)."""
    with open(pdir / f"{313:020d}.log", "ab") as f:
        f.write(bytes(range(1, 15)))


def batch_appended_to_closed_segment(pdir: Path) -> None:
    """A closed segment's last batch written again after it: its offsets go back."""
    path = pdir / f"{661:020d}.log"
    data = path.read_bytes()
    path.write_bytes(data + _batch(data, t.batch_positions(data)[-1]))


def batch_appended_to_active_segment(pdir: Path) -> None:
    """The same in the active segment: a complete batch, so not a half-written tail."""
    path = pdir / f"{1518:020d}.log"
    data = path.read_bytes()
    path.write_bytes(data + _batch(data, t.batch_positions(data)[-1]))


def base_offset_before_the_active_tail(pdir: Path) -> None:
    """The active segment's first batch's base offset (outside the CRC) raised by 2^30: the log end
    is read from the segment's last batches, so that batch's records lie past it."""
    path = pdir / f"{1518:020d}.log"
    data = bytearray(path.read_bytes())
    data[0:8] = (int.from_bytes(data[0:8], "big") + 2**30).to_bytes(8, "big")
    path.write_bytes(bytes(data))


def record_outside_its_batch(pdir: Path) -> None:
    """A middle batch of a closed segment whose last record's offset delta (inside the CRC, the CRC
    recomputed) points past the segment's end."""
    path = pdir / f"{661:020d}.log"
    data = path.read_bytes()
    position = t.batch_positions(data)[5]
    batch = _batch(data, position)
    fields = mut.v2_fields(batch)
    codec = mut.CODECS[fields["attributes"] & 7]
    records = mut.parse_v2_records(mut.decompress(codec, batch[61:]), fields["count"])
    assert records[-1][3][0] == "v"  # [length, attributes, timestamp delta, offset delta, ...]
    records[-1][3][1] = 100_000
    edited = mut.build_v2(fields, mut.compress(codec, mut.encode_v2_records(records)))
    path.write_bytes(data[:position] + edited + data[position + len(batch):])


def record_out_of_order(pdir: Path) -> None:
    """A middle batch of a closed segment whose first record's offset delta (CRC recomputed) is past
    its batch's last: the batch's first and last records are where they belong, one between is not
    (the seek map, keyed by offsets, then led reads astray)."""
    path = pdir / f"{192:020d}.log"
    data = path.read_bytes()
    position = t.batch_positions(data)[10]
    batch = _batch(data, position)
    fields = mut.v2_fields(batch)
    codec = mut.CODECS[fields["attributes"] & 7]
    records = mut.parse_v2_records(mut.decompress(codec, batch[61:]), fields["count"])
    assert len(records) > 2 and records[0][3][0] == "v"
    records[0][3][1] = fields["last_offset_delta"] + 250
    records[0], records[1] = records[1], records[0]  # the first record stays the batch's first offset
    edited = mut.build_v2(fields, mut.compress(codec, mut.encode_v2_records(records)))
    path.write_bytes(data[:position] + edited + data[position + len(batch):])


def _first_wrapper_remade(pdir: Path, inner_offsets: tuple[int, ...]) -> None:
    """The segment's first batch, a legacy (v0) compressed wrapper at offset 0, re-made (CRC
    recomputed) with its first inner message at each of `inner_offsets`."""
    path = pdir / f"{0:020d}.log"
    data = path.read_bytes()
    wrapper, end = mut.parse_legacy(data, 0)
    codec = mut.CODECS[wrapper["attributes"] & 7]
    assert wrapper["offset"] == 0 and wrapper["magic"] == 0 and codec != "none"
    inner, _ = mut.parse_legacy(mut.decompress(codec, wrapper["value"]), 0)
    inner_set = b"".join(mut.legacy_message(offset, 0, 0, -1, inner["key"], inner["value"]) for offset in inner_offsets)
    remade = mut.legacy_message(0, 0, wrapper["attributes"], -1, wrapper["key"], mut.compress(codec, inner_set))
    path.write_bytes(remade + data[end:])


def legacy_records_below_the_segment(pdir: Path) -> None:
    """A segment's first wrapper with inner messages at offsets -7 and 0: its first record is below
    the segment."""
    _first_wrapper_remade(pdir, (-7, 0))


def legacy_records_past_the_wrapper(pdir: Path) -> None:
    """A segment's first wrapper with its inner message at offset 100000, past the wrapper's offset
    and the log end (input 20261232:25358): the view took the wrapper's base offset, which only its
    records give, for a batch past its end, and `messages.jsonl` ended there without an error where
    `kfs cat` stops."""
    _first_wrapper_remade(pdir, (100000,))


def legacy_wrapper_overlapping_the_batch_before(pdir: Path) -> None:
    """A legacy (v1) compressed wrapper's offset (outside the CRC) lowered by one: its inner offsets
    are relative to it, so its first record takes the offset of the batch before's last."""
    path = pdir / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    positions = t.batch_positions(bytes(data))
    for before, position in pairwise(positions):
        header, _ = mut.parse_legacy(bytes(data), position)
        previous, _ = mut.parse_legacy(bytes(data), before)
        if header["magic"] == 1 and header["attributes"] & 7 and previous["offset"] >= 0 \
                and previous["attributes"] & 7 == 0:
            data[position:position + 8] = (header["offset"] - 1).to_bytes(8, "big")
            path.write_bytes(bytes(data))
            return
    raise AssertionError("no compressed v1 wrapper after an uncompressed message")


def last_segment_renamed_past_its_records(pdir: Path) -> None:
    """The active segment renamed to a base offset 1000 above its records: its first batch is below
    its base (damage), the log ends at that base, and the run of that segment holds no record."""
    os.rename(pdir / f"{1518:020d}.log", pdir / f"{2518:020d}.log")


def only_segment_renamed_past_its_records(pdir: Path) -> None:
    """The same for a partition's only segment: the log starts and ends at that base."""
    os.rename(pdir / f"{0:020d}.log", pdir / f"{7:020d}.log")


def negative_base_offset(pdir: Path) -> None:
    """A segment's first v2 batch's base offset (outside the CRC) set to -1: its first record is below
    the segment (a legacy wrapper's header says -1 for a base known only inside it; a v2 batch's not)."""
    path = pdir / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    data[0:8] = (-1).to_bytes(8, "big", signed=True)
    path.write_bytes(bytes(data))


CASES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "garbage-after-closed": ("orders-0", garbage_after_closed_segment),
    "appended-to-closed": ("orders-0", batch_appended_to_closed_segment),
    "appended-to-active": ("orders-0", batch_appended_to_active_segment),
    "base-offset-before-tail": ("orders-0", base_offset_before_the_active_tail),
    "record-outside-batch": ("orders-0", record_outside_its_batch),
    "legacy-overlap": ("legacy-0", legacy_wrapper_overlapping_the_batch_before),
    "record-out-of-order": ("web_clicks-1", record_out_of_order),
    "legacy-below-segment": ("legacy-0", legacy_records_below_the_segment),
    "legacy-past-wrapper": ("legacy-0", legacy_records_past_the_wrapper),
    "last-segment-renamed": ("orders-0", last_segment_renamed_past_its_records),
    "only-segment-renamed": ("legacy-0", only_segment_renamed_past_its_records),
    "negative-base-offset": ("payments-0", negative_base_offset),
}


def _damaged_logdir(tmp_path: Path, names: list[str]) -> Path:
    """One log dir holding each case as its own partition, `<case>-0`."""
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    shutil.copyfile(Path(LOGDIRS[0]) / "meta.properties", logdir / "meta.properties")
    for name in names:
        partition, damage = CASES[name]
        pdir = logdir / f"{name}-0"
        shutil.copytree(Path(golden_logdir(partition)) / partition, pdir)
        damage(pdir)
    return logdir


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_view_read_alone_or_after_a_stat_gives_what_kfs_cat_gives(name: str, tmp_path: Path) -> None:
    """In-process, both paths, both orders: a reader that maps the runs itself, and one after a size."""
    logdir = _damaged_logdir(tmp_path, [name])
    for path in t.paths():
        t.use_path(path)
        plog = t.open_partition(logdir, f"{name}-0")
        try:
            cat = t._cat(plog)
            assert cat[1] == "CorruptLogError", (path, cat[1])
            for size_first in (False, True):
                view = t._messages_jsonl(plog, size_first)
                assert view == cat, (path, size_first, len(cat[0]), cat[1], len(view[0]), view[1])
        finally:
            plog.close()


@needs_fuse
def test_cat_through_the_mount_stops_where_kfs_cat_stops(tmp_path: Path) -> None:
    logdir = _damaged_logdir(tmp_path, sorted(CASES))
    expected = {}
    for name in CASES:
        done = subprocess.run([sys.executable, "-m", "kfs.cli.main", "cat", str(logdir), f"{name}-0"],
                              capture_output=True, timeout=120)
        assert done.returncode == 1 and b"Traceback" not in done.stderr, (name, done.stderr)
        sentence = done.stderr.decode().strip().splitlines()[-1]  # (after the log's warnings, if any)
        assert re.search(r"\.log: corrupt batch at position \d+: ", sentence), sentence
        expected[name] = (done.stdout, sentence)
    with mounted(tmp_path, [str(logdir)], expect_errors=True) as mnt:
        for name, (stdout, _) in expected.items():
            view = mnt / f"{name}-0" / "messages.jsonl"
            size = os.stat(view).st_size
            done = subprocess.run(["cat", str(view)], capture_output=True, timeout=120)
            assert done.returncode != 0 and b"Input/output error" in done.stderr, name
            # every page before the one holding the damage, and nothing kfs cat does not print
            assert stdout.startswith(done.stdout) and len(done.stdout) > len(stdout) - 4096, \
                (name, len(done.stdout), len(stdout))
            assert size > len(stdout), (name, size, len(stdout))  # the size covers the damage's byte
    errors = "\n".join(daemon_errors(tmp_path / "mnt.log"))
    for name, (_, sentence) in expected.items():
        place = re.search(r"\S+\.log: corrupt batch at position \d+: ", sentence)
        assert place and place.group() in errors, (name, sentence)  # the same file and position in the log
