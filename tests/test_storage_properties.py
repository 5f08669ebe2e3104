"""Property tests: random log dirs, written with kafka-python's batch builder, against brute-force oracles.

Each example writes a partition of several segments (every codec, random batch sizes, gaps in
offsets between and inside batches as compaction leaves, out-of-order timestamps) with sparse indexes
laid out by Kafka's rule (conftest.write_segment), then damages some indexes in ways kfs must survive:
preallocated with a zero tail, missing, empty, a torn last entry (offset index only: a torn time index
is test_storage_bad_input's), fewer entries (offset index only: a time index that lost entries loses
the largest timestamp Kafka would find in it too). The oracle is the list of records the test wrote,
scanned by brute force.

Assumption of the time oracle: the time index is exact as Kafka writes it (each entry the largest
timestamp so far with an offset of its batch), or absent; then Kafka's ListOffsets answer is the first
record, in offset order, with timestamp >= T in the first segment whose largest timestamp is >= T.
"""

from __future__ import annotations

import bisect
import os
import random
import tempfile
from dataclasses import dataclass

import pytest
from builders import Oracle
from conftest import WrittenSegment, v2_batch, write_segment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfs.storage import LogDirs, NoRecordAtOffset, OffsetOutOfRange, TimestampNotFound
from kfs.storage.index import OffsetIndex, TimeIndex

T0 = 1_600_000_000_000
CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd (kafka-python's codec numbers = Kafka's)
OFFSET_INDEX_MODES = ("exact", "exact", "prealloc", "missing", "empty", "torn", "fewer")
TIME_INDEX_MODES = ("exact", "exact", "prealloc", "missing", "empty")
LOG_SETTINGS = settings(max_examples=int(os.environ.get("KFS_HYPOTHESIS_EXAMPLES", "40")), deadline=None,
                        suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True, scope="module")
def _walk_marks_every_few_batches():
    """Segments whose offset index is missing, empty or unusable are looked up from the marks their
    tail walk left (kfs.storage.walk_marks.WalkMarks); marks every 100 bytes put several in each
    drawn segment, so the oracle checks lookups from them too."""
    from kfs.storage import walk_marks

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk_marks, "MARK_BYTES", 100)
        yield


@dataclass
class Layout:
    """What a drawn example is: segments of appends of batches of records, and how to damage the indexes."""

    segments: list[list[list[tuple[int, list]]]]  # segment -> append -> (codec, records)
    segment_bases: list[int]
    index_interval_bytes: int
    offset_index_modes: list[str]
    time_index_modes: list[str]
    seed: int


@st.composite
def layouts(draw) -> Layout:
    n_segments = draw(st.integers(1, 4))
    payload = st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=20).map(str.encode))
    header = st.tuples(st.sampled_from(["trace-id", "h", "ü"]), st.one_of(st.none(), st.binary(max_size=8)))
    next_offset = draw(st.integers(0, 3)) * 1000
    timestamp = T0
    segments, bases = [], []
    for s in range(n_segments):
        base_lag = draw(st.integers(0, 2))  # the segment's base may be below its first batch (compaction)
        empty_active = s == n_segments - 1 and s > 0 and draw(st.integers(0, 5)) == 0
        log_end = next_offset  # a segment rolls at the log end or later: its base is >= it
        appends = []
        for _ in range(0 if empty_active else draw(st.integers(1, 6))):
            batches = []
            for _ in range(draw(st.integers(1, 3))):
                next_offset += draw(st.sampled_from([0, 0, 0, 1, 3]))  # gap before the batch
                records = []
                for _ in range(draw(st.integers(1, 8))):
                    next_offset += draw(st.sampled_from([0, 0, 0, 1, 2]))  # gap inside the batch
                    timestamp += draw(st.integers(-40, 60))  # out of order now and then
                    records.append((next_offset, timestamp, draw(payload), draw(payload),
                                    draw(st.lists(header, max_size=2))))
                    next_offset += 1
                batches.append((draw(st.sampled_from(CODECS)), records))
            appends.append(batches)
        first = appends[0][0][1][0][0] if appends else next_offset
        base = max(first - base_lag, log_end)
        segments.append(appends)
        bases.append(base)
    return Layout(segments, bases, draw(st.sampled_from([0, 64, 256, 1024])),
                  [draw(st.sampled_from(OFFSET_INDEX_MODES)) for _ in segments],
                  [draw(st.sampled_from(TIME_INDEX_MODES)) for _ in segments], draw(st.integers(0, 2**32)))


def _damage(path: str, mode: str, entry_size: int, rng: random.Random) -> None:
    data = open(path, "rb").read()  # noqa: SIM115
    if mode == "missing":
        os.remove(path)
        return
    if mode == "empty":
        data = b""
    elif mode == "prealloc":
        data += bytes(entry_size * rng.randint(1, 300))
    elif mode == "torn":
        data = data[:-rng.randint(1, entry_size - 1)] if data else data  # the last entry cut short
    elif mode == "fewer":
        data = data[:entry_size * rng.randint(0, len(data) // entry_size)]
    with open(path, "wb") as f:
        f.write(data)


def _expected_index(entries: list, mode: str, entry_size: int, on_disk: int) -> list:
    if mode in ("missing", "empty") or on_disk % entry_size:
        return []  # a torn index is corrupt (Kafka's sanityCheck): not used at all
    return entries[:min(len(entries), on_disk // entry_size)]


def write_layout(directory: str, layout: Layout) -> list[WrittenSegment]:
    rng = random.Random(layout.seed)
    written = []
    for i, (appends, base) in enumerate(zip(layout.segments, layout.segment_bases, strict=True)):
        built = [[(v2_batch(records[0][0], records, codec), records) for codec, records in append]
                 for append in appends]
        seg = write_segment(directory, base, built, layout.index_interval_bytes,
                            closed=i < len(layout.segments) - 1)
        stem = os.path.join(directory, f"{base:020d}")
        _damage(stem + ".index", layout.offset_index_modes[i], 8, rng)
        _damage(stem + ".timeindex", layout.time_index_modes[i], 12, rng)
        written.append(seg)
    return written


def _as_tuple(record) -> tuple:
    return (record.offset, record.timestamp, record.key, record.value, [tuple(h) for h in record.headers])


def _open(directory: str):
    return LogDirs([os.path.dirname(directory)]).partition(os.path.basename(directory))


@LOG_SETTINGS
@given(layouts())
def test_random_logs_answer_like_a_brute_force_scan(layout: Layout) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = os.path.join(tmp, "topic.x-7")
        os.mkdir(directory)
        written = write_layout(directory, layout)
        oracle = Oracle(written)
        plog = _open(directory)
        assert (plog.log_start_offset(), plog.log_end_offset()) == (oracle.log_start, oracle.log_end)

        # every offset from below the log start to past the log end
        for n in range(oracle.log_start - 2, oracle.log_end + 3):
            if not oracle.log_start <= n < oracle.log_end:
                with pytest.raises(OffsetOutOfRange):
                    plog.locate_offset(n)
                continue
            location = plog.locate_offset(n)
            got = location.as_dict()
            index_entry = got.pop("index_entry")
            assert got == oracle.locate_offset(n), n
            seg_i = [s.base_offset for s in written].index(location.segment_base_offset)
            seg = written[seg_i]
            entries = _expected_index(seg.offset_index, layout.offset_index_modes[seg_i], 8,
                                      _size(directory, seg.base_offset, ".index"))
            slot = bisect.bisect_right([o for o, _ in entries], n) - 1
            assert index_entry == (list(entries[slot]) if slot >= 0 else None), n

        # the record at every offset (a `.value`), mostly found in one index interval's walk
        # (PartitionLog._indexed_record); a gap is NoRecordAtOffset
        at = {r[0]: r for _, r in oracle.records}
        for n in range(oracle.log_start, oracle.log_end):
            if n in at:
                assert _as_tuple(plog.record_at(n)) == at[n], n
            else:
                with pytest.raises(NoRecordAtOffset):
                    plog.record_at(n)

        # records from a sample of offsets, including the ends and gaps
        rng = random.Random(layout.seed)
        targets = {oracle.log_start, oracle.log_end - 1, oracle.log_end}
        targets.update(rng.randint(oracle.log_start, oracle.log_end) for _ in range(6))
        for n in sorted(targets):
            assert [_as_tuple(r) for r in plog.records(n)] == oracle.records_from(n), n
        with pytest.raises(OffsetOutOfRange):
            list(plog.records(oracle.log_end + 1))

        # every record's timestamp, one below and one above
        stamps = sorted({r[1] + d for _, r in oracle.records for d in (-1, 0, 1)})
        for t in [*stamps[::max(1, len(stamps) // 120)], stamps[0] - 1000, stamps[-1] + 1]:
            expected = oracle.locate_time(t)
            if expected is None:
                with pytest.raises(TimestampNotFound):
                    plog.locate_time(t)
            else:
                got = plog.locate_time(t).as_dict()
                got.pop("index_entry")
                assert got == expected, t

        # the summary and the index entries as the files hold them
        info = plog.info()
        for seg, s_info, om, tm in zip(written, info["segments"], layout.offset_index_modes, layout.time_index_modes,
                                       strict=True):
            segment = plog.floor_segment(seg.base_offset)
            assert s_info["base_offset"] == seg.base_offset
            assert s_info["size"] == sum(b.size for b in seg.batches)
            assert s_info["largest_timestamp"] == max((b.max_timestamp for b in seg.batches), default=-1)
            expected_offsets = _expected_index(seg.offset_index, om, 8, _size(directory, seg.base_offset, ".index"))
            expected_times = _expected_index(seg.time_index, tm, 12, _size(directory, seg.base_offset, ".timeindex"))
            assert segment.offset_index_entries() == expected_offsets
            assert segment.time_index_entries() == expected_times
            assert s_info["offset_index_entries"] == len(expected_offsets)
        plog.close()


def _size(directory: str, base: int, suffix: str) -> int:
    try:
        return os.path.getsize(os.path.join(directory, f"{base:020d}{suffix}"))
    except FileNotFoundError:
        return 0


# ---- the index search alone -----------------------------------------------------------------------------

@st.composite
def index_files(draw) -> tuple[int, list[int], list[int], int, int]:
    """(base offset, strictly increasing keys, values, zero tail entries, seed) of an index."""
    n = draw(st.sampled_from([0, 1, 2, 3, 100, 682, 683, 684, 1023, 1024, 1025, 1026, 1500, 3000]))
    seed = draw(st.integers(0, 2**32))
    rng = random.Random(seed)
    keys, key = [], rng.randint(1, 50)
    for _ in range(n):
        keys.append(key)
        key += rng.choice([1, 1, 2, 7, 1000])
    values = sorted(rng.sample(range(1, 50 * n + 10), n))
    return draw(st.sampled_from([0, 5, 2**31])), keys, values, draw(st.sampled_from([0, 0, 1, 50, 4000])), seed


def _targets(keys: list[int], rng: random.Random) -> list[int]:
    if not keys:
        return [-1, 0, 1, 10**12]
    picks = [keys[0] - 1, keys[0], keys[-1], keys[-1] + 1, 0, -5, keys[-1] + 10**6]
    tail = keys[-1025:]  # the first warm entry and around it: the warm/cold boundary
    picks += [tail[0] - 1, tail[0], tail[0] + 1] + [k + d for k in rng.sample(keys, min(200, len(keys)))
                                                     for d in (-1, 0, 1)]
    picks += [k + d for k in keys[-300:] for d in (-1, 0)]  # recent targets
    return picks


@settings(max_examples=80, deadline=None)
@given(index_files())
def test_offset_index_lookup_equals_bisect(spec) -> None:
    base, relative, positions, zero_tail, seed = spec
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{base:020d}.index")
        with open(path, "wb") as f:
            f.write(b"".join(int.to_bytes(r, 4, "big") + int.to_bytes(p, 4, "big")
                             for r, p in zip(relative, positions, strict=True)) + bytes(8 * zero_tail))
        index = OffsetIndex(path, base)
        keys = [base + r for r in relative]
        assert index.entry_count() == len(keys)
        assert index.entries() == list(zip(keys, positions, strict=True))
        for target in _targets(keys, random.Random(seed)):
            slot = bisect.bisect_right(keys, target) - 1
            assert index.lookup(target) == ((keys[slot], positions[slot]) if slot >= 0 else None), target
        index.close()


@settings(max_examples=80, deadline=None)
@given(index_files())
def test_time_index_lookup_equals_bisect(spec) -> None:
    base, relative_offsets, _, zero_tail, seed = spec
    rng = random.Random(seed)
    stamps = sorted(rng.sample(range(T0, T0 + 10**9), len(relative_offsets)))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{base:020d}.timeindex")
        with open(path, "wb") as f:
            f.write(b"".join(int.to_bytes(t, 8, "big") + int.to_bytes(r, 4, "big")
                             for t, r in zip(stamps, relative_offsets, strict=True)) + bytes(12 * zero_tail))
        index = TimeIndex(path, base)
        offsets = [base + r for r in relative_offsets]
        assert index.entry_count() == len(stamps)
        assert index.last_entry() == ((stamps[-1], offsets[-1]) if stamps else None)
        for target in _targets(stamps, rng):
            slot = bisect.bisect_right(stamps, target) - 1
            assert index.lookup(target) == ((stamps[slot], offsets[slot]) if slot >= 0 else None), target
        index.close()


def test_a_growing_preallocated_index_is_followed() -> None:
    """A live index fills its zero tail: a second look sees the new entries (and only whole ones)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{0:020d}.index")
        entries = [(i * 3 + 1, i * 100 + 7) for i in range(2000)]
        raw = b"".join(r.to_bytes(4, "big") + p.to_bytes(4, "big") for r, p in entries)
        with open(path, "wb") as f:
            f.write(raw[:8 * 1500] + bytes(8 * 1000))
        index = OffsetIndex(path, 0)
        assert index.entry_count() == 1500
        assert index.lookup(10**9) == entries[1499]
        with open(path, "r+b") as f:
            f.write(raw[:8 * 1800])
        assert index.entry_count() == 1800
        assert index.lookup(10**9) == entries[1799]
        assert index.lookup(entries[1600][0]) == entries[1600]
        index.close()
