"""A `.value` lookup's compiled parts (index_slot, find_v2_batch, v2_record_at) give what Python gives.

Both only accept what every check of the Python walk accepts and decline the rest to it, so a
lookup must answer the same record, or fail with the same error, with them and without them: on
Kafka's own logs, on random logs with random damage to their bytes, and with a batch reaching past
the compiled walk's first read. And they must be the path lookups take (a fast path that always
declined would pass the rest)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
from pathlib import Path

import pytest
from builders import make_log
from conftest import GOLDEN_PARTITIONS, LOGDIRS, v2_batch, write_segment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kfs.storage.index as index_module
import kfs.storage.partition as partition_module
import kfs.storage.segment as segment_module
from kfs._native import record as native_record
from kfs._native import storage as native_storage
from kfs.storage import LogDirs, NoRecordAtOffset
from kfs.storage.index import OffsetIndex, TimeIndex

pytestmark = pytest.mark.skipif(native_storage.find_v2_batch is None or native_record.crc32c is None
                                or native_record.crc32c(b"") is None,
                                reason="the compiled extension (with a CRC-32C instruction) is not here")


def _answers(logdirs: list[str], partition: str, offsets: list[int], compiled: bool,
             monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """What record_at gives at each offset: the record's fields, or the error's class and message."""
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(segment_module, "_find_v2_batch", None)
            m.setattr(partition_module, "_v2_record_at", None)
            m.setattr(index_module, "_index_slot", None)
        dirs = LogDirs(logdirs)
        try:
            plog = dirs.partition(partition)
            answers = []
            for offset in offsets:
                try:
                    r = plog.record_at(offset)
                    answers.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                                    [tuple(h) for h in r.headers]))
                except Exception as e:  # the verdict itself is what is compared
                    answers.append((type(e).__name__, str(e)))
            return answers
        finally:
            dirs.close()


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_kafka_written_logs_answer_alike(partition: str, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = LogDirs(LOGDIRS)
    plog = dirs.partition(partition)
    offsets = list(range(plog.log_start_offset() - 1, plog.log_end_offset() + 1))
    dirs.close()
    assert _answers(LOGDIRS, partition, offsets, True, monkeypatch) == \
        _answers(LOGDIRS, partition, offsets, False, monkeypatch)


class _Spy:
    """Counts a compiled function's answers by kind (tuple/int/NoneType, Record/bool/NoneType), and
    for v2_record_at the codecs of the batches it declined."""

    def __init__(self, function) -> None:
        self.function = function
        self.kinds: dict[str, int] = {}
        self.declined_codecs: set[int] = set()

    def __call__(self, *args):
        answer = self.function(*args)
        kind = type(answer).__name__ if not isinstance(answer, bool) else "bool"
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if answer is None and self.function is native_storage.v2_record_at:
            self.declined_codecs.add(args[0][22] & 7)
        return answer


@pytest.mark.parametrize("partition", GOLDEN_PARTITIONS)
def test_lookups_take_the_compiled_walk(partition: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On Kafka's own logs the interval walk is what most lookups take, and the record is made by the
    compiled path for every uncompressed or lz4 batch (gzip, snappy and zstd are records_of's)."""
    find, record_at = _Spy(native_storage.find_v2_batch), _Spy(native_storage.v2_record_at)
    monkeypatch.setattr(segment_module, "_find_v2_batch", find)
    monkeypatch.setattr(partition_module, "_v2_record_at", record_at)
    dirs = LogDirs(LOGDIRS)
    plog = dirs.partition(partition)
    offsets = range(plog.log_start_offset(), plog.log_end_offset())
    for offset in offsets:
        with contextlib.suppress(NoRecordAtOffset):  # markers and compacted offsets
            plog.record_at(offset)
    dirs.close()
    assert not record_at.declined_codecs & {0, 3}, record_at.declined_codecs
    if partition == "orders-0":  # (offsets past a segment's last index entry take the general path)
        assert find.kinds.get("tuple", 0) >= 0.6 * len(offsets), find.kinds
        assert record_at.kinds.get("Record", 0) >= 0.3 * len(offsets), record_at.kinds


def test_a_batch_past_the_first_read_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of ~9 KiB, indexed every 4 KiB: the batch at an interval's end reaches past the first
    read (the interval and a page), so the walk asks for more and answers from the second read."""
    directory = tmp_path / "big.values-0"
    directory.mkdir()
    rng = random.Random(3)
    appends, offset = [], 0
    for _ in range(12):
        records = []
        for _ in range(3):
            value = bytes(rng.randrange(256) for _ in range(3000))
            records.append((offset, 1_700_000_000_000 + offset, b"k%d" % offset, value, []))
            offset += 1
        appends.append([(v2_batch(records[0][0], records), records)])
    write_segment(str(directory), 0, appends, 4096, closed=False)
    find = _Spy(native_storage.find_v2_batch)
    monkeypatch.setattr(segment_module, "_find_v2_batch", find)
    compiled = _answers([str(tmp_path)], directory.name, list(range(offset)), True, monkeypatch)
    assert find.kinds.get("int", 0) > 0 and find.kinds.get("tuple", 0) > 0, find.kinds
    monkeypatch.undo()
    assert compiled == _answers([str(tmp_path)], directory.name, list(range(offset)), False, monkeypatch)
    assert [a[0] for a in compiled] == list(range(offset))


DAMAGE = st.lists(st.tuples(st.sampled_from(["flip", "zeros", "byte", "truncate"]), st.integers(0, 2**31),
                            st.integers(1, 300)), min_size=1, max_size=3)


def _damage(path: Path, kind: str, where: int, length: int) -> None:
    data = bytearray(path.read_bytes())
    if not data:
        return
    at = where % len(data)
    if kind == "flip":
        data[at] ^= 1 << (length % 8)
    elif kind == "zeros":
        data[at:at + length] = bytes(len(data[at:at + length]))
    elif kind == "byte":
        data[at] = length % 256
    else:
        del data[at:]
    path.write_bytes(bytes(data))


@settings(max_examples=int(os.environ.get("KFS_HYPOTHESIS_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=DAMAGE, codec=st.sampled_from([0, 3]), segment=st.integers(0, 2))
def test_damaged_logs_answer_alike(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                                   damage: list, codec: int, segment: int) -> None:
    """Bits flipped, bytes zeroed or changed, a file cut short, in any segment: record or error, the
    same with the compiled walk as without it."""
    root = tmp_path_factory.mktemp("damaged")
    directory, written = make_log(root, codec=codec)
    log = directory / f"{written[segment].base_offset:020d}.log"
    for kind, where, length in damage:
        _damage(log, kind, where, length)
    offsets = list(range(0, 3 * 60 + 1))
    assert _answers([str(root)], directory.name, offsets, True, monkeypatch) == \
        _answers([str(root)], directory.name, offsets, False, monkeypatch)
    shutil.rmtree(root)


@settings(max_examples=int(os.environ.get("KFS_HYPOTHESIS_EXAMPLES", "40")) * 5, deadline=None)
@given(entry_size=st.sampled_from([8, 12]), entries=st.sampled_from([1, 2, 3, 682, 683, 684, 1023, 1024, 1025, 3000]),
       base=st.sampled_from([0, 5, 2**31, 2**62]), ordered=st.booleans(), seed=st.integers(0, 2**32))
def test_index_slot_is_the_python_search_slot_for_slot(entry_size: int, entries: int, base: int, ordered: bool,
                                                         seed: int) -> None:
    """index_slot against SegmentIndex's own search, on ordered indexes and on garbage (a damaged
    index is searched all the same: the slot it lands on must be the Python search's)."""
    rng = random.Random(seed)
    keys = [rng.randrange(-2**31, 2**31) if entry_size == 8 else rng.randrange(-2**63, 2**63) for _ in range(entries)]
    if ordered:
        keys.sort()
    width = 4 if entry_size == 8 else 8
    mapping = b"".join(k.to_bytes(width, "big", signed=True) + bytes(entry_size - width) for k in keys) + bytes(64)
    index = (OffsetIndex if entry_size == 8 else TimeIndex)("unused", base)
    index._map, index._entries = mapping, entries  # the search reads the mapping as a buffer, nothing else
    key = [base + k if entry_size == 8 else k for k in keys]
    targets = [rng.choice(key) + d for d in (-1, 0, 1) for _ in range(20)] + [min(key) - 1, max(key) + 1]
    for target in targets:
        compiled = native_storage.index_slot(mapping, entries, entry_size, base, target)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(index_module, "_index_slot", None)
            assert index._largest_lower_bound_slot(target) == compiled, target


def test_a_segment_named_past_int64_takes_the_python_walk(tmp_path: Path) -> None:
    """A file name is 20 digits, an offset an int64: a segment named past 2^63 (a hostile or broken
    copy) is looked up by the Python walk, which says what is wrong, not by an OverflowError."""
    partition = tmp_path / "orders-0"
    shutil.copytree(os.path.join(LOGDIRS[0], "orders-0"), partition)
    huge = 99999999999999999999
    for suffix in (".log", ".index", ".timeindex"):
        os.rename(partition / f"{0:020d}{suffix}", partition / f"{huge}{suffix}")
    dirs = LogDirs([str(tmp_path)])
    plog = dirs.partition("orders-0")
    segment = plog.floor_segment(huge)
    assert segment is not None and segment.base_offset == huge
    for target in range(huge, huge + 313, 7):  # (inside the index: its entries are past 2^63 too)
        assert segment.indexed_batch(target) is None
    dirs.close()
