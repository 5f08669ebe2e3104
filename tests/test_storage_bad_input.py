"""Bad input never crashes kfs and never gives a wrong answer (docs/spec.md sections 1 and 7).

Truncated and corrupt batches, garbage, empty and lying indexes, files deleted mid-read, a
preallocated `.log`. Each case starts from a partition written by conftest's kafka-python writer and
compares with a brute-force scan of what was written (builders.Oracle).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import struct
from pathlib import Path

import pytest
from builders import PEAK, Oracle, make_log, partition_log

from kfs.storage import CorruptLogError, OffsetOutOfRange, TimestampNotFound, VanishedError


def _records(plog, start=None) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in plog.records(start)]


def assert_answers_like_oracle(plog, oracle: Oracle) -> None:
    assert (plog.log_start_offset(), plog.log_end_offset()) == (oracle.log_start, oracle.log_end)
    assert _records(plog) == oracle.records_from(oracle.log_start)
    for n in range(oracle.log_start, oracle.log_end):
        got = plog.locate_offset(n).as_dict()
        got.pop("index_entry")
        assert got == oracle.locate_offset(n), n
    for _, r in oracle.records[::3]:
        for t in (r[1] - 1, r[1], r[1] + 1):
            expected = oracle.locate_time(t)
            if expected is None:
                with pytest.raises(TimestampNotFound):
                    plog.locate_time(t)
                continue
            got = plog.locate_time(t).as_dict()
            got.pop("index_entry")
            assert got == expected, t
    with pytest.raises(TimestampNotFound):
        plog.locate_time(max(r[1] for _, r in oracle.records) + 1)


def _index_paths(directory: Path, suffix: str) -> list[Path]:
    return sorted(directory.glob(f"*{suffix}"))


# ---- the log itself -------------------------------------------------------------------------------------

def test_a_batch_cut_short_at_the_log_end_is_not_shown(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    last = written[-1].batches[-1]
    log = directory / f"{written[-1].base_offset:020d}.log"
    os.truncate(log, last.position + last.size // 2)
    plog = partition_log(directory)
    assert plog.log_end_offset() == last.base_offset
    assert _records(plog)[-1][0] == written[-1].batches[-2].last_offset
    with pytest.raises(OffsetOutOfRange):
        plog.locate_offset(last.base_offset)
    assert plog.info()["segments"][-1]["size"] == last.position


@pytest.mark.parametrize("cut", [1, 11, 12, 13, 16, 17, 30, 61])
def test_a_batch_being_written_shows_once_whole_however_few_of_its_bytes_are_there(tmp_path, cut: int) -> None:
    """A broker's append may be seen after any number of its bytes. With 12 to 16 of them (a length,
    no magic yet) the batch was taken for garbage: raw views showed the piece, and walks went on from
    inside it, so the segment read as corrupt for the daemon's life (found by tests/soak)."""
    directory, written = make_log(tmp_path)
    last = written[-1].batches[-1]
    log = directory / f"{written[-1].base_offset:020d}.log"
    whole = log.read_bytes()
    os.truncate(log, last.position + cut)
    plog = partition_log(directory)
    assert plog.log_end_offset() == last.base_offset
    assert plog.info()["segments"][-1]["size"] == last.position
    assert _records(plog)[-1][0] == written[-1].batches[-2].last_offset
    with open(log, "ab") as f:  # the rest of the batch lands
        f.write(whole[last.position + cut:])
    assert plog.log_end_offset() == last.last_offset + 1
    assert _records(plog) == Oracle(written).records_from(0)


def test_a_closed_segment_cut_mid_batch_is_an_error_after_the_records_before_it(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    cut = written[0].batches[5]
    os.truncate(directory / f"{written[0].base_offset:020d}.log", cut.position + 20)
    plog = partition_log(directory)
    oracle = Oracle(written)
    before = [r for b, r in oracle.records if b.segment_base_offset == 0 and b.position < cut.position]
    got = []
    with pytest.raises(CorruptLogError, match="ends inside the batch") as error:
        for record in plog.records():
            got.append((record.offset, record.timestamp, record.key, record.value, [tuple(h) for h in record.headers]))
    assert got == before and error.value.position == cut.position
    # an offset of the lost batches is the same error, not the next segment's record (tests/test_storage_damage.py)
    with pytest.raises(CorruptLogError):
        plog.locate_offset(cut.base_offset)


def test_garbage_in_the_middle_is_a_corrupt_log_error_naming_file_and_position(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    bad = written[1].batches[4]
    log = directory / f"{written[1].base_offset:020d}.log"
    with open(log, "r+b") as f:  # an impossible magic byte
        f.seek(bad.position + 16)
        f.write(b"\x07")
    plog = partition_log(directory)
    got = []
    with pytest.raises(CorruptLogError) as caught:
        for r in plog.records():
            got.append(r.offset)
    assert caught.value.path == str(log) and caught.value.position == bad.position
    assert str(log) in str(caught.value) and str(bad.position) in str(caught.value)
    assert got == [r[0] for b, r in Oracle(written).records if b.last_offset < bad.base_offset]
    # what comes before stays readable, by offset and by time
    assert plog.locate_offset(written[1].batches[3].base_offset).position == written[1].batches[3].position
    assert [r.offset for r in itertools.islice(plog.records(0), 3)] == [0, 1, 2]


def test_a_flipped_byte_inside_a_record_is_a_crc_error_not_a_wrong_value(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    bad = written[0].batches[3]
    log = directory / f"{written[0].base_offset:020d}.log"
    data = bytearray(log.read_bytes())
    at = data.index(b"value-", bad.position + 61) + 3  # inside a value: the record still parses
    data[at] ^= 0x20
    log.write_bytes(bytes(data))
    plog = partition_log(directory)
    got = []
    with pytest.raises(CorruptLogError) as caught:
        for r in plog.records():
            got.append(r.offset)
    assert caught.value.position == bad.position
    assert got == [r[0] for b, r in Oracle(written).records if b.last_offset < bad.base_offset]


def test_a_corrupt_compressed_batch_is_a_corrupt_log_error(tmp_path) -> None:
    directory, written = make_log(tmp_path, codec=1)
    bad = written[0].batches[2]
    log = directory / f"{written[0].base_offset:020d}.log"
    data = bytearray(log.read_bytes())
    data[bad.position + 61:bad.position + bad.size] = bytes(bad.size - 61)
    log.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError) as caught:
        list(partition_log(directory).records())
    assert caught.value.position == bad.position


def test_a_preallocated_log_with_a_zero_tail_ends_at_its_last_batch(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    with open(directory / f"{written[-1].base_offset:020d}.log", "ab") as f:
        f.write(bytes(1 << 20))
    plog = partition_log(directory)
    oracle = Oracle(written)
    assert_answers_like_oracle(plog, oracle)
    assert plog.info()["segments"][-1]["size"] == sum(b.size for b in written[-1].batches)
    with pytest.raises(OffsetOutOfRange):
        plog.locate_offset(oracle.log_end)


def test_a_preallocated_log_growing_in_place_is_followed(tmp_path) -> None:
    """A broker with log.preallocate=true appends into the zeros: the file's size does not change, and
    a reader that went by the size alone never saw a record appended after its first look."""
    directory, written = make_log(tmp_path)
    segment, last = written[-1], written[-1].batches[-1]
    path = directory / f"{segment.base_offset:020d}.log"
    whole = path.read_bytes()
    with open(path, "r+b") as f:  # the last batch not written yet, the file preallocated past it
        f.seek(last.position)
        f.write(bytes(len(whole) - last.position + (1 << 16)))
    plog = partition_log(directory)
    oracle = Oracle(written)
    assert plog.log_end_offset() == last.base_offset
    with open(path, "r+b") as f:  # the broker appends it, in place
        f.seek(last.position)
        f.write(whole[last.position:])
    assert plog.log_end_offset() == oracle.log_end
    assert _records(plog, last.base_offset) == oracle.records_from(last.base_offset)
    assert _records(plog) == oracle.records_from(oracle.log_start)


# ---- indexes ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("suffix", "damage"), [
    (".index", "zero-length"), (".index", "missing"), (".index", "garbage"), (".index", "garbage-torn"),
    (".timeindex", "zero-length"), (".timeindex", "missing"),
    (".timeindex", "garbage"), (".timeindex", "garbage-torn"),
])
def test_damaged_indexes_fall_back_to_scanning(tmp_path, suffix: str, damage: str) -> None:
    directory, written = make_log(tmp_path)
    rng = random.Random(damage + suffix)
    for path in _index_paths(directory, suffix):
        if damage == "missing":
            path.unlink()
        elif damage == "zero-length":
            path.write_bytes(b"")
        else:
            size = path.stat().st_size or 24
            path.write_bytes(rng.randbytes(size + (5 if damage == "garbage-torn" else 0)))
    assert_answers_like_oracle(partition_log(directory), Oracle(written))


def test_an_offset_index_pointing_past_the_log_or_to_wrong_positions_falls_back(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    for seg in written:
        entries = []
        for i, (offset, position) in enumerate(seg.offset_index):
            wrong = (position + 10**7, position + 7, seg.batches[-1].position, 0)[i % 4]  # past, mid-batch, later
            entries.append(struct.pack(">ii", offset - seg.base_offset, wrong))
        (directory / f"{seg.base_offset:020d}.index").write_bytes(b"".join(entries))
    assert_answers_like_oracle(partition_log(directory), Oracle(written))


def test_a_time_index_pointing_past_the_segment_falls_back(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    for seg in written:
        entries = [struct.pack(">qi", ts, offset - seg.base_offset + 10**6) for ts, offset in seg.time_index]
        (directory / f"{seg.base_offset:020d}.timeindex").write_bytes(b"".join(entries))
    assert_answers_like_oracle(partition_log(directory), Oracle(written))


def test_a_torn_time_index_is_treated_as_corrupt(tmp_path) -> None:
    directory, written = make_log(tmp_path, segments=2, peak=True)
    seg = written[0]
    peak = seg.batches[6]
    assert seg.time_index[-1] == (PEAK, peak.last_offset)  # only the time index's last entry records it
    timeindex = directory / f"{seg.base_offset:020d}.timeindex"
    timeindex.write_bytes(timeindex.read_bytes()[:-4])  # the last entry is torn
    plog = partition_log(directory)
    assert plog.info()["segments"][0]["largest_timestamp"] == PEAK
    got = plog.locate_time(PEAK).as_dict()
    assert (got["offset"], got["segment_base_offset"]) == (peak.last_offset, seg.base_offset)


# ---- files that vanish -----------------------------------------------------------------------------------

def test_a_segment_deleted_after_listing_is_vanished_or_skipped(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    plog = partition_log(directory)
    assert len(plog.segments()) == 3
    os.remove(directory / f"{written[1].base_offset:020d}.log")
    for call in (lambda: list(plog.records()), lambda: plog.locate_offset(written[1].batches[2].base_offset),
                 lambda: plog.locate_time(written[1].batches[2].max_timestamp), plog.info,
                 lambda: plog.locate_offset(written[2].batches[0].base_offset)):
        with contextlib.suppress(VanishedError):
            call()


def test_a_segment_deleted_while_records_are_read_is_vanished_or_skipped(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    plog = partition_log(directory)
    records = plog.records()
    offsets = [next(records).offset]
    for seg in written[1:]:
        os.remove(directory / f"{seg.base_offset:020d}.log")
    with contextlib.suppress(VanishedError):
        offsets += [r.offset for r in records]
    assert offsets == list(range(len(offsets)))


def test_the_first_segment_deleted_by_retention_moves_the_log_start(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    plog = partition_log(directory)
    plog.segments()
    for suffix in (".log", ".index", ".timeindex"):
        os.remove(directory / f"{written[0].base_offset:020d}{suffix}")
    plog.refresh(force=True)
    assert plog.log_start_offset() == written[1].base_offset
    with pytest.raises(OffsetOutOfRange):
        plog.locate_offset(0)
    assert _records(plog) == Oracle(written[1:]).records_from(written[1].base_offset)
