"""on_corrupt="skip": a corrupt batch becomes one `CorruptBatch` (an {"error": ...} line) and the
records after it are all still read — past the batch when its header reads (a CRC or record
error), else from the next offset index entry or the next segment (a garbage length field)."""

from __future__ import annotations

import json
import struct

from builders import make_log, partition_log
from conftest import run_kfs

from kfs.storage.record_stream import CorruptBatch


def _offsets_and_errors(plog) -> tuple[list[int], list[CorruptBatch]]:
    offsets, errors = [], []
    for record in plog.records(on_corrupt="skip"):
        if isinstance(record, CorruptBatch):
            errors.append(record)
        else:
            offsets.append(record.offset)
    return offsets, errors


def _all_offsets(written) -> list[int]:
    return [r[0] for seg in written for b in seg.batches for r in b.records]


def test_a_batch_with_a_bad_crc_is_one_error_and_every_other_record_is_read(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    bad = written[1].batches[4]
    log = directory / f"{written[1].base_offset:020d}.log"
    data = bytearray(log.read_bytes())
    data[data.index(b"value-", bad.position + 61) + 3] ^= 0x20
    log.write_bytes(bytes(data))
    offsets, errors = _offsets_and_errors(partition_log(directory))
    lost = {r[0] for r in bad.records}
    assert offsets == [o for o in _all_offsets(written) if o not in lost]
    assert [(e.path, e.position, e.offset) for e in errors] == [(str(log), bad.position, bad.base_offset)]
    assert "CRC" in errors[0].error


def test_a_garbage_length_resumes_at_the_next_index_entry(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    seg = written[0]
    bad = seg.batches[2]
    log = directory / f"{seg.base_offset:020d}.log"
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, bad.position + 8, 3)  # an impossible length: no way to the next batch
    log.write_bytes(bytes(data))
    offsets, errors = _offsets_and_errors(partition_log(directory))
    resume = next(p for _, p in seg.offset_index if p > bad.position)
    lost = {r[0] for b in seg.batches if bad.position <= b.position < resume for r in b.records}
    assert offsets == [o for o in _all_offsets(written) if o not in lost]
    assert [(e.path, e.position) for e in errors] == [(str(log), bad.position)]


def test_a_garbage_length_without_a_later_index_entry_resumes_at_the_next_segment(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    seg = written[0]
    bad = seg.batches[-1]
    log = directory / f"{seg.base_offset:020d}.log"
    data = bytearray(log.read_bytes())
    struct.pack_into(">i", data, bad.position + 8, 3)
    log.write_bytes(bytes(data))
    offsets, errors = _offsets_and_errors(partition_log(directory))
    assert offsets == [o for o in _all_offsets(written) if o not in {r[0] for r in bad.records}]
    assert len(errors) == 1


def test_kfs_cat_on_corrupt_skip_prints_an_error_line_and_goes_on(tmp_path) -> None:
    directory, written = make_log(tmp_path)
    bad = written[0].batches[1]
    log = directory / f"{written[0].base_offset:020d}.log"
    data = bytearray(log.read_bytes())
    data[data.index(b"value-", bad.position + 61) + 3] ^= 0x20
    log.write_bytes(bytes(data))
    failed = run_kfs("cat", str(tmp_path), directory.name)
    failed.stderr, failed.stdout = failed.stderr.decode(), failed.stdout.decode()
    assert failed.returncode != 0 and "Traceback" not in failed.stderr
    assert str(bad.position) in failed.stderr and str(log) in failed.stderr
    skipped = run_kfs("cat", str(tmp_path), directory.name, "--on-corrupt", "skip")
    skipped.stderr, skipped.stdout = skipped.stderr.decode(), skipped.stdout.decode()
    assert skipped.returncode == 0, skipped.stderr
    lines = [json.loads(line) for line in skipped.stdout.splitlines()]
    errors = [line for line in lines if "error" in line]
    assert [(e["path"], e["position"], e["offset"]) for e in errors] == [(str(log), bad.position, bad.base_offset)]
    assert [line["offset"] for line in lines if "error" not in line] == [
        o for o in _all_offsets(written) if o not in {r[0] for r in bad.records}]
