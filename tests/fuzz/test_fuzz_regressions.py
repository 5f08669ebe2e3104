"""What the campaign found, kept as tests: damaged indexes over an intact log must give the answers
of a brute-force scan of the log, and damage outside the CRC must be an error, the same for `kfs cat`
and the mount's `messages.jsonl`, never a silently shorter or different log.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import fuzz_targets as t
import pytest

from kfs.storage import OffsetOutOfRange, TimestampNotFound


def _entries(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def _inside(data: bytes, shift: int) -> bytes:
    """Every .index entry's position moved `shift` bytes into its batch."""
    return b"".join(struct.pack(">ii", o, p + shift) for o, p in (struct.unpack(">ii", e) for e in _entries(data, 8)))


def _next_batch(positions: list[int]) -> Callable[[bytes], bytes]:
    """Every .index entry pointed at the batch after its own: a real batch, at the wrong offset."""
    def damage(data: bytes) -> bytes:
        out = []
        for e in _entries(data, 8):
            o, p = struct.unpack(">ii", e)
            later = [q for q in positions if q > p]
            out.append(struct.pack(">ii", o, later[0] if later else p))
        return b"".join(out)
    return damage


def _offsets_lowered(data: bytes) -> bytes:
    entries = (struct.unpack(">ii", e) for e in _entries(data, 8))
    return b"".join(struct.pack(">ii", max(0, o - 3), p) for o, p in entries)


DAMAGE = {
    "position inside the batch +1": (".index", lambda positions: lambda d: _inside(d, 1)),
    "position inside the batch +17": (".index", lambda positions: lambda d: _inside(d, 17)),
    "position at the next batch": (".index", _next_batch),
    "offsets lowered (legacy wrappers)": (".index", lambda positions: _offsets_lowered),
    "time index reversed": (".timeindex", lambda positions: lambda d: b"".join(reversed(_entries(d, 12)))),
    "time index last entry dropped": (".timeindex", lambda positions: lambda d: d[:-12]),
    "time index first entry last": (".timeindex", lambda positions: lambda d: d[12:] + d[:12]),
}


@pytest.mark.parametrize("partition", ["legacy-0", "audit.events-v2-3", "web_clicks-1"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_every_lookup_on_a_damaged_index_equals_a_scan_of_the_log(partition: str, damage: str,
                                                                  tmp_path: Path) -> None:
    truth = t.truth(partition)
    logdir = t.copy_partition(partition, tmp_path)
    suffix, make = DAMAGE[damage]
    for f in sorted((logdir / partition).glob("*" + suffix)):
        base = int(f.name.split(".")[0])
        positions = [b.position for b in truth.batches if b.segment == base]
        f.write_bytes(make(positions)(f.read_bytes()))
    plog = t.open_partition(logdir, partition)
    try:
        assert plog.log_end_offset() == truth.log_end
        for segment in plog.segments():
            assert plog.largest_timestamp(segment) == truth.largest_ts[segment.base_offset]
        for target in range(truth.log_start - 2, truth.log_end + 3):
            try:
                got = t._location_tuple(plog.locate_offset(target))
            except OffsetOutOfRange:
                got = None
            assert got == truth.offset_lookup(target), target
        for stamp in truth.timestamps[::3]:
            for target in (stamp - 1, stamp, stamp + 1):
                try:
                    loc = plog.locate_time(target)
                    got = (loc.segment_base_offset, loc.offset, loc.timestamp)
                except TimestampNotFound:
                    got = None
                assert got == truth.time_lookup(target), target
    finally:
        plog.close()


def _damaged_last_segment(tmp_path: Path, partition: str, edit: Callable[[bytearray, int], None]) -> Path:
    """The partition with a middle batch of its last segment edited outside the CRC."""
    logdir = t.copy_partition(partition, tmp_path)
    log = sorted((logdir / partition).glob("*.log"))[-1]
    data = bytearray(log.read_bytes())
    positions = t.batch_positions(bytes(data))
    edit(data, positions[len(positions) // 2])
    log.write_bytes(bytes(data))
    return logdir


EDITS = {
    "base offset 2^32": lambda data, p: struct.pack_into(">q", data, p, 2**32),
    "base offset near 2^63": lambda data, p: struct.pack_into(">q", data, p, 2**63 - 5),
    "length 2^31-1": lambda data, p: struct.pack_into(">i", data, p + 8, 2**31 - 1),
    # the batch's offsets moved past the next batch's first: they go back there
    "base offset + 5": lambda data, p: struct.pack_into(">q", data, p, struct.unpack_from(">q", data, p)[0] + 5),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("partition", ["orders-0", "web_clicks-1"])
def test_damage_outside_the_crc_is_the_same_error_for_cat_and_messages_jsonl(edit: str, partition: str,
                                                                             tmp_path: Path) -> None:
    logdir = _damaged_last_segment(tmp_path, partition, EDITS[edit])
    for path in t.paths():
        t.use_path(path)
        plog = t.open_partition(logdir, partition)
        try:
            cat = t._cat(plog)
            view = t._messages_jsonl(plog)
        finally:
            plog.close()
        assert cat[1] == "CorruptLogError", (path, cat[1])
        assert cat == view, (path, len(cat[0]), cat[1], len(view[0]), view[1])
    done = subprocess.run([sys.executable, "-m", "kfs.cli.main", "cat", str(logdir), partition], capture_output=True,
                          timeout=120)
    assert done.returncode == 1 and done.stdout == cat[0], done.stderr
    assert len(done.stderr.decode().strip().splitlines()) >= 1 and b"Traceback" not in done.stderr


@pytest.mark.parametrize("partition", ["orders-0", "audit.events-v2-3"])
def test_offsets_that_go_back_stop_messages_jsonl_where_a_reader_met_them(partition: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Input 11:9221: the read after the one that met the damage resumed from the seek map's last
    line, whose offset the edited batch holds: a walk from the index entry at or below it starts at
    the next batch, past the two that go back, and `messages.jsonl` went on where `kfs cat` stops."""
    from kfs.views import runs

    monkeypatch.setattr(runs, "MAP_INTERVAL", 1)  # every line a seek-map entry: the resume is at the last one
    logdir = _damaged_last_segment(tmp_path, partition, EDITS["base offset + 5"])
    for path in t.paths():
        t.use_path(path)
        plog = t.open_partition(logdir, partition)
        try:
            cat, view = t._cat(plog), t._messages_jsonl(plog)
        finally:
            plog.close()
        assert cat[1] == "CorruptLogError", (path, cat[1])
        assert cat == view, (path, len(cat[0]), cat[1], len(view[0]), view[1])


def _log_start_past_log_end_reads(logdir: Path, partition: str) -> list[tuple[str, tuple, tuple]]:
    """(path, `kfs cat`'s, `messages.jsonl`'s) on the C and pure-Python paths, of a partition whose
    log start is checkpointed past its log end."""
    found = []
    for path in t.paths():
        t.use_path(path)
        plog = t.open_partition(logdir, partition)
        try:
            assert plog.log_start_offset() > plog.log_end_offset()
            found.append((path, t._cat(plog), t._messages_jsonl(plog)))
        finally:
            plog.close()
    return found


def test_a_log_start_past_a_damaged_log_end_is_the_damage(tmp_path: Path) -> None:
    """Inputs 22:22955 and 22:24874: metrics_raw-0's log start offset is checkpointed at 5000000367;
    with its last segment's file gone and its first renamed one past its first batch (5000000360 under
    the name 5000000361), that segment's records end the log at its base offset, below the log start.
    `messages.jsonl` met the damage; `kfs cat` said the log start was out of range. Both name the damage."""
    partition = "metrics_raw-0"
    logdir = t.copy_partition(partition, tmp_path)
    pdir = logdir / partition
    (pdir / f"{5000000866:020d}.log").unlink()
    (pdir / f"{5000000360:020d}.log").rename(pdir / f"{5000000361:020d}.log")
    for path, cat, view in _log_start_past_log_end_reads(logdir, partition):
        assert cat == (b"", "CorruptLogError") and view == cat, (path, cat, view)
    done = subprocess.run([sys.executable, "-m", "kfs.cli.main", "cat", str(logdir), partition], capture_output=True,
                          timeout=120)
    assert done.returncode == 1 and b"is below the segment's base offset" in done.stderr, done.stderr


def test_an_index_entry_at_a_whole_batch_inside_a_record_value_is_not_trusted(tmp_path: Path) -> None:
    """A record's value may hold a complete batch, CRC and all (a topic of raw Kafka batches): an index
    entry pointing there passes the header, CRC and offset checks, but the batches after it do not
    lead to the next entry, so the lookup scans instead of answering from inside a record."""
    from conftest import offset_index_bytes, v2_batch, write_segment

    from kfs.storage import LogDirs

    inner = v2_batch(0, [(0, 1_700_000_000_000, b"k", b"inner", [])])
    pdir = tmp_path / "logdir" / "raw-0"
    pdir.mkdir(parents=True)
    appends = [[(v2_batch(i, [(i, 1_700_000_000_000 + i, b"key", inner if i % 2 else b"plain-%d" % i, [])]),
                 [(i, 1_700_000_000_000 + i, b"key", b"", [])])] for i in range(40)]
    seg = write_segment(str(pdir), 0, appends, index_interval_bytes=100)
    log = (pdir / f"{0:020d}.log").read_bytes()
    entries = list(seg.offset_index)
    assert len(entries) > 4
    # Point one entry at the inner batch inside the value of the batch it names (offset 2k+1).
    k = len(entries) // 2
    offset, _position = entries[k]
    holder = next(b for b in seg.batches if b.base_offset >= offset and b.base_offset % 2 == 1)
    inside = log.index(inner, holder.position)
    entries[k] = (holder.base_offset, inside)
    (pdir / f"{0:020d}.index").write_bytes(offset_index_bytes(entries, 0))
    plog = LogDirs([str(tmp_path / "logdir")]).partition("raw-0")
    for target in range(40):
        loc = plog.locate_offset(target)
        batch = next(b for b in seg.batches if b.last_offset >= target)
        assert (loc.position, loc.batch_base_offset, loc.offset) == (batch.position, batch.base_offset, target)
    assert [r.offset for r in plog.records(holder.base_offset)] == list(range(holder.base_offset, 40))
    assert plog.log_end_offset() == 40


def test_skipping_a_hole_in_a_closed_segment_ends(tmp_path: Path) -> None:
    """Found as a hang (campaign input 20261125:1436: a hole in a closed segment whose index has
    entries past it): `on_corrupt="skip"` resynced to an entry past the complete batches and met the
    same error forever. The input is remade from its seed, and must finish with its error line."""
    import fuzz_campaign

    _, rnd = fuzz_campaign.target_of(20261125, 1436, fuzz_campaign.parse_mix("record=60,index=25,partition=15"))
    partition, logdir = t.make_partition_input(rnd, tmp_path)
    plog = t.open_partition(logdir, partition)
    try:
        records = []
        for record in plog.records(on_corrupt="skip"):
            records.append(record)
            assert len(records) < 100_000, "skipping does not end"
    finally:
        plog.close()
    errors = [r for r in records if hasattr(r, "error")]
    assert errors and len(records) > len(errors)


def _txn_entries(path: Path) -> list[tuple]:
    data = path.read_bytes()
    return [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)]


TXN_DAMAGE = {
    "an entry dropped": lambda entries: entries[1:],
    "an entry over committed batches": lambda entries: [*entries, (0, entries[0][1], 0, 10_000, 10_000)],
    "an entry's producer changed": lambda entries: [(v, pid + 1, f, last, lso) for v, pid, f, last, lso in entries],
}


@pytest.mark.parametrize("damage", sorted(TXN_DAMAGE))
def test_read_committed_over_a_damaged_txnindex_follows_the_markers(damage: str, tmp_path: Path) -> None:
    """A .txnindex is outside any CRC: damaged, read_committed hid committed records or showed aborted
    ones with exit 0 (the campaign's oracle: 70 of 1,500 damaged indexes). The records must be those
    the log's own markers say (fuzz_targets.Truth, which reads no .txnindex), through the API, `kfs cat`
    and a mount with isolation=read_committed."""
    import json

    from mounts import mounted

    logdir = t.copy_partition("payments-0", tmp_path)
    for path in sorted((logdir / "payments-0").glob("*.txnindex")):
        entries = _txn_entries(path)
        if entries:
            path.write_bytes(b"".join(struct.pack(">hqqqq", *e) for e in TXN_DAMAGE[damage](entries)))
    expected = t.truth("payments-0").read_committed()
    assert 0 < len(expected) < sum(len(b.records) for b in t.truth("payments-0").batches if not b.is_control)
    plog = t.open_partition(logdir, "payments-0")
    try:
        assert [r.offset for r in plog.records(isolation="read_committed")] == expected
    finally:
        plog.close()
    done = subprocess.run([sys.executable, "-m", "kfs.cli.main", "cat", "--isolation", "read_committed", str(logdir),
                           "payments-0"], capture_output=True, timeout=120)
    assert done.returncode == 0 and [json.loads(line)["offset"] for line in done.stdout.splitlines()] == expected
    assert b"does not match the segment's transaction markers" in done.stderr  # the damage is named
    with mounted(tmp_path, [str(logdir)], expect_errors=True, isolation="read_committed") as mnt:
        lines = (mnt / "payments-0" / "messages.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["offset"] for line in lines] == expected


def test_a_log_start_past_an_undamaged_log_end_reads_nothing_and_says_so(tmp_path: Path) -> None:
    """Input 20261233:15134: metrics_raw-0 with its last segment gone and its first cut to 49 bytes (a
    batch being written: no damage), its log start checkpointed at 5000000367, past the log end
    5000000360. `messages.jsonl` was empty and `kfs cat` said OffsetOutOfRange; both read nothing now,
    and `kfs cat` says why."""
    partition = "metrics_raw-0"
    logdir = t.copy_partition(partition, tmp_path)
    pdir = logdir / partition
    (pdir / f"{5000000866:020d}.log").unlink()
    first = pdir / f"{5000000360:020d}.log"
    first.write_bytes(first.read_bytes()[:49])
    for path, cat, view in _log_start_past_log_end_reads(logdir, partition):
        assert cat == (b"", None) and view == cat, (path, cat, view)
    done = subprocess.run([sys.executable, "-m", "kfs.cli.main", "cat", str(logdir), partition], capture_output=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout == b"", done.stderr
    assert b"log start offset 5000000367" in done.stderr and b"past the log end offset 5000000360" in done.stderr
