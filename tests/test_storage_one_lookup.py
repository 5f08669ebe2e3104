"""A lookup reads its pages once (kfs.storage.log_file.one_lookup), and keeps nothing afterwards:
the next lookup reads the file again, so bytes changed in between are seen (here: a flipped byte
fails the CRC check instead of a remembered good copy being served)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from kfs.storage import CorruptLogError, LogDirs
from kfs.storage.log_file import LogFile

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "kafka-written")
PARTITION = "orders-0"


def golden(name: str) -> list[dict]:
    with open(os.path.join(FIXTURES, "golden", PARTITION, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def logdir(tmp_path):
    source = os.path.join(FIXTURES, "logdirs", "broker-a", PARTITION)
    shutil.copytree(source, tmp_path / PARTITION)
    return tmp_path


@pytest.fixture
def preads(monkeypatch) -> list[tuple[str, int, int]]:
    """Every pread a LogFile makes: (file, position, bytes read); a spy, the reads still happen."""
    seen: list[tuple[str, int, int]] = []
    original = LogFile._read

    def spy(self, position: int, length: int, ahead: int) -> bytes:
        data = original(self, position, length, ahead)
        seen.append((self.log_path, position, len(data)))
        return data

    monkeypatch.setattr(LogFile, "_read", spy)
    return seen


def test_a_value_lookup_reads_its_pages_once(logdir, preads) -> None:
    plog = LogDirs([str(logdir)]).partition(PARTITION)
    records = [r for r in golden("records.jsonl") if r["value"] is not None]
    plog.log_end_offset()  # the log end is known (a walk of the segment's tail, once)
    for record in records[::97]:
        preads.clear()
        value = plog.value_record("offset", str(record["offset"]))
        assert value.value == record["value"].encode()
        # The index entry's batch, the walk from it and the batch found: no byte is read twice.
        for i, (path, position, _length) in enumerate(preads):
            for other, start, n in preads[:i]:
                assert other != path or not start <= position < start + n, preads
        assert len(preads) <= 2, preads


def test_nothing_is_kept_between_lookups(logdir) -> None:
    plog = LogDirs([str(logdir)]).partition(PARTITION)
    batch = golden("batches.jsonl")[3]
    target = batch["base_offset"]
    assert plog.value_record("offset", str(target)).offset == target
    with open(os.path.join(logdir, PARTITION, f"{batch['segment_base_offset']:020d}.log"), "r+b") as f:
        f.seek(batch["position"] + batch["size"] - 1)
        last = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([last[0] ^ 0xFF]))
    with pytest.raises(CorruptLogError, match="CRC"):
        plog.value_record("offset", str(target))
