"""`kfs dump`: Kafka's DumpLogSegments output, checked against the Kafka-written fixtures.

Runs the real `kfs` command. The golden answers (fixtures/kafka-written/golden/<partition>/) were
computed by Kafka's own classes; see fixtures/kafka-written/README.md.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import shutil
import struct
import subprocess

import pytest
from conftest import kfs_command

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "kafka-written")
GOLDEN = os.path.join(FIXTURES, "golden")
LOGDIRS = os.path.join(FIXTURES, "logdirs")
PARTITIONS = sorted(os.listdir(GOLDEN))
SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")
FIELD = re.compile(r"(\w+): (\S+)")


def kfs_dump(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*kfs_command(), "dump", *args], capture_output=True, text=True, errors="replace",
                          timeout=120)


def partition_dir(name: str) -> str:
    (found,) = glob.glob(os.path.join(LOGDIRS, "*", name))
    return found


def segment_files(name: str, suffix: str) -> dict[int, str]:
    directory = partition_dir(name)
    files = {}
    for entry in os.listdir(directory):
        match = SEGMENT_LOG.match(entry.replace(suffix, ".log")) if entry.endswith(suffix) else None
        if match:
            files[int(match.group(1))] = os.path.join(directory, entry)
    return dict(sorted(files.items()))


def golden_lines(name: str, file: str) -> list[dict]:
    with open(os.path.join(GOLDEN, name, file)) as f:
        return [json.loads(line) for line in f if line.strip()]


def golden_indexes(name: str) -> dict[int, dict]:
    with open(os.path.join(GOLDEN, name, "indexes.json")) as f:
        return {int(base): value for base, value in json.load(f).items()}


def fields(line: str) -> dict[str, str]:
    return dict(FIELD.findall(line))


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def expected_batch_fields(batch: dict) -> dict[str, str]:
    """What DumpLogSegments.printBatchLevel prints for one batch of batches.jsonl, in its order."""
    if batch["magic"] >= 2:
        horizon = batch["delete_horizon_ms"]
        base_sequence = batch["base_sequence"]
        expected = {
            "baseOffset": str(batch["base_offset"]),
            "lastOffset": str(batch["last_offset"]),
            "count": str(batch["record_count"]),
            "baseSequence": str(base_sequence),
            "lastSequence": str(-1 if base_sequence < 0
                                else base_sequence + batch["last_offset"] - batch["base_offset"]),
            "producerId": str(batch["producer_id"]),
            "producerEpoch": str(batch["producer_epoch"]),
            "partitionLeaderEpoch": str(batch["partition_leader_epoch"]),
            "isTransactional": java_bool(batch["is_transactional"]),
            "isControl": java_bool(batch["is_control"]),
            "deleteHorizonMs": "OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]",
        }
    else:
        expected = {"offset": str(batch["last_offset"])}
    expected.update({
        "position": str(batch["position"]),
        batch["timestamp_type"]: str(batch["max_timestamp"]),
        "size": str(batch["size"]),
        "magic": str(batch["magic"]),
        "compresscodec": batch["compression"],
        "crc": str(batch["crc"]),
        "isvalid": java_bool(batch["is_valid"]),
    })
    return expected


def batch_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("baseOffset: ", "offset: "))]


# ---- .log ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PARTITIONS)
def test_every_batch_line_equals_the_golden_batch(name: str) -> None:
    golden = golden_lines(name, "batches.jsonl")
    for base, path in segment_files(name, ".log").items():
        result = kfs_dump(path)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[:2] == [f"Dumping {path}", f"Log starting offset: {base}"]
        expected = [expected_batch_fields(b) for b in golden if b["segment_base_offset"] == base]
        dumped = [fields(line) for line in batch_lines(result.stdout)]
        assert dumped == expected
        # Field names and order exactly as printBatchLevel prints them.
        assert [list(d) for d in dumped] == [list(e) for e in expected]


@pytest.mark.parametrize("name", PARTITIONS)
def test_deep_iteration_lists_every_record_and_control_record(name: str) -> None:
    batches = golden_lines(name, "batches.jsonl")
    records = {r["offset"]: r for r in golden_lines(name, "records.jsonl")}
    controls = {c["offset"]: c for c in golden_lines(name, "control.jsonl")}
    seen: dict[int, str] = {}
    counts: list[int] = []
    for path in segment_files(name, ".log").values():
        result = kfs_dump("--deep-iteration", path)
        assert result.returncode == 0, result.stderr
        for line in result.stdout.splitlines()[2:]:
            if line.startswith("| "):
                counts[-1] += 1
                seen[int(fields(line)["offset"])] = line
            elif line.startswith(("baseOffset: ", "offset: ")):
                counts.append(0)
    assert counts == [b["record_count"] for b in batches]  # one line per record of each batch
    # records.jsonl starts at the log start offset (metrics_raw-0 moved it into the first segment).
    log_start = min([*records, *controls])
    assert {o for o in seen if o >= log_start} == set(records) | set(controls)
    for offset, r in records.items():
        line = fields(seen[offset])
        assert line[r["timestamp_type"]] == str(r["timestamp"])
        for size, value in (("keySize", r["key"]), ("valueSize", r["value"])):
            if value is None:
                assert line[size] == "-1"
            elif isinstance(value, str):
                assert line[size] == str(len(value.encode()))
        if r["timestamp_type"] != "NoTimestampType" and "sequence" in line:
            keys = re.search(r"headerKeys: \[(.*?)\]", seen[offset]).group(1)
            assert keys == ",".join(h[0] for h in r["headers"])
    for offset, c in controls.items():
        line = seen[offset]
        if c["control"] in ("COMMIT", "ABORT"):
            assert line.endswith(f" endTxnMarker: {c['control']} coordinatorEpoch: {c['coordinator_epoch']}")
        elif c["control"] == "LEADER_CHANGE":
            assert " LeaderChange: {" in line


def test_payments_control_records_print_the_end_txn_marker() -> None:
    controls = golden_lines("payments-0", "control.jsonl")
    out = "\n".join(kfs_dump("--deep-iteration", p).stdout for p in segment_files("payments-0", ".log").values())
    for c in controls:
        assert f"| offset: {c['offset']} CreateTime: {c['timestamp']} keySize: 4 valueSize: 6 sequence: -1 " \
               f"headerKeys: [] endTxnMarker: {c['control']} coordinatorEpoch: {c['coordinator_epoch']}" in out


def test_leader_change_control_record_prints_kafkas_json() -> None:
    (path,) = segment_files("__cluster_metadata-0", ".log").values()
    out = kfs_dump("--deep-iteration", path).stdout
    assert re.search(r'^\| offset: 0 CreateTime: \d+ keySize: 4 valueSize: \d+ sequence: -1 headerKeys: \[\] '
                     r'LeaderChange: \{"version":0,"leaderId":-?\d+,"voters":\[.*\],"grantingVoters":\[.*\]\}$',
                     out, re.M)


def test_print_data_log_prints_keys_and_payloads_as_kafkas_string_decoder() -> None:
    records = {r["offset"]: r for r in golden_lines("orders-0", "records.jsonl")}
    for path in segment_files("orders-0", ".log").values():
        for line in kfs_dump("--print-data-log", path).stdout.splitlines():
            if not line.startswith("| "):
                continue
            r = records[int(fields(line)["offset"])]
            tail = ""
            if r["key"] is not None:
                tail += f" key: {r['key']}"
            if r["value"] is not None:
                tail += f" payload: {r['value']}"
            assert line.endswith(tail) and (tail == "" or "headerKeys: [" in line.split(tail)[0])


def test_skip_record_metadata_prints_only_contents() -> None:
    path = next(iter(segment_files("orders-0", ".log").values()))
    lines = [line for line in kfs_dump("--print-data-log", "--skip-record-metadata", path).stdout.splitlines()
             if line.startswith("|")]
    assert lines and all(line.startswith("| key: ") or line.startswith("| payload: ") or line == "|"
                         for line in lines)


def test_legacy_records_print_their_own_crc_and_validity() -> None:
    (path,) = segment_files("legacy-0", ".log").values()
    result = kfs_dump("--deep-iteration", path)
    assert result.returncode == 0, result.stderr
    legacy_batch = None
    for line in result.stdout.splitlines()[2:]:
        f = fields(line)
        if line.startswith("offset: "):
            legacy_batch = f
        elif line.startswith("baseOffset: "):
            legacy_batch = None
        elif legacy_batch is not None:
            assert f["isValid"] == "true"
            if legacy_batch["compresscodec"] == "none":
                assert f["crc"] == legacy_batch["crc"]  # an uncompressed message is its own record
            assert "sequence" not in f


def test_non_consecutive_offsets_are_reported_with_deep_iteration() -> None:
    (path,) = [p for b, p in segment_files("inventory-2", ".log").items() if b == 0]
    result = kfs_dump("--deep-iteration", path)
    err = result.stderr.splitlines()
    assert err[0] == f"Non-consecutive offsets in {os.path.abspath(path)}"
    # dumpLog takes the first record's offset as it is, then reports each gap compaction left.
    end = max(b["last_offset"] for b in golden_lines("inventory-2", "batches.jsonl") if b["segment_base_offset"] == 0)
    offsets = sorted(r["offset"] for r in golden_lines("inventory-2", "records.jsonl") if r["offset"] <= end)
    gaps = [f"  {a} is followed by {b}" for a, b in itertools.pairwise(offsets) if b != a + 1]
    assert gaps and sorted(err[1:]) == sorted(gaps)


def test_print_data_log_reports_the_same_gaps_as_deep_iteration() -> None:
    """`--print-data-log` takes the batch-at-a-time path; its gap report must be the record-at-a-time one."""
    (path,) = [p for b, p in segment_files("inventory-2", ".log").items() if b == 0]
    deep, data = kfs_dump("--deep-iteration", path), kfs_dump("--deep-iteration", "--print-data-log", path)
    assert data.returncode == 0, data.stderr
    assert data.stderr.startswith("Non-consecutive offsets in ") and data.stderr == deep.stderr


def test_a_crc_mismatch_with_print_data_log_prints_its_batch_line_then_one_sentence(tmp_path) -> None:
    files = copy_segment(tmp_path, "orders-0", 0)
    batches = [b for b in golden_lines("orders-0", "batches.jsonl") if b["segment_base_offset"] == 0]
    with open(files[".log"], "r+b") as f:
        f.seek(batches[2]["position"] + batches[2]["size"] - 1)
        last = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([last[0] ^ 0xFF]))  # a flipped byte in the last record: the CRC no longer matches
    result = kfs_dump("--deep-iteration", "--print-data-log", files[".log"])
    assert_one_sentence(result, files[".log"], "CRC")
    lines = batch_lines(result.stdout)
    assert len(lines) == 3 and fields(lines[2])["isvalid"] == "false"


def test_max_bytes_reads_only_the_batches_within_it() -> None:
    golden = golden_lines("orders-0", "batches.jsonl")
    path = segment_files("orders-0", ".log")[0]
    limit = golden[2]["position"] + golden[2]["size"] + 10
    result = kfs_dump("--max-bytes", str(limit), path)
    assert len(batch_lines(result.stdout)) == 3
    assert "invalid bytes" not in result.stdout


# ---- indexes ------------------------------------------------------------------------------------

def dumped_pairs(stdout: str, first: str, second: str) -> list[list[int]]:
    pairs = []
    for line in stdout.splitlines():
        if line.startswith(f"{first}: "):
            f = fields(line)
            pairs.append([int(f[first]), int(f[second])])
    return pairs


def dump_sections(*paths: str) -> dict[str, str]:
    """One `kfs dump` of many files; each file's output (after its "Dumping" line) by path."""
    result = kfs_dump(*paths)
    assert result.returncode == 0, result.stderr
    sections: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        if line.startswith("Dumping "):
            current = sections.setdefault(line[len("Dumping "):], [])
        else:
            current.append(line + "\n")
    assert list(sections) == list(paths)
    return {path: "".join(lines) for path, lines in sections.items()}


@pytest.mark.parametrize("name", PARTITIONS)
def test_index_dumps_equal_the_golden_entries(name: str) -> None:
    golden = golden_indexes(name)
    offset_indexes = segment_files(name, ".index")
    time_indexes = segment_files(name, ".timeindex")
    txn_indexes = segment_files(name, ".txnindex")
    out = dump_sections(*offset_indexes.values(), *time_indexes.values(), *txn_indexes.values())
    for base, path in offset_indexes.items():
        expected = golden[base]["offset_index"]
        if expected:
            assert dumped_pairs(out[path], "offset", "position") == expected
        else:
            assert out[path] == f"{path} is empty.\n"
    for base, path in time_indexes.items():
        dumped = dumped_pairs(out[path], "timestamp", "offset")
        expected = golden[base]["time_index"]
        if golden[base]["time_index_file_bytes"] > 12 * len(dumped):
            # A live (preallocated) time index: the golden entries are the broker's in-memory ones;
            # the file may also hold the entry LogSegment.close appends past the last offset index
            # entry. A dump shows the file, as Kafka's does.
            offsets = golden[base]["offset_index"]
            last_indexed = offsets[-1][0] if offsets else base - 1
            assert dumped[:len(expected)] == expected and len(dumped) - len(expected) <= 1
            assert all(offset > last_indexed for _, offset in dumped[len(expected):])
        else:
            assert dumped == expected
    for base, path in txn_indexes.items():
        expected = [f"version: 0 producerId: {t['producer_id']} firstOffset: {t['first_offset']} "
                    f"lastOffset: {t['last_offset']} lastStableOffset: {t['last_stable_offset']}"
                    for t in golden[base]["txn_index"]]
        assert out[path].splitlines() == expected


def kafka_index_mismatches(name: str, base: int) -> dict[int, int]:
    """What DumpLogSegments' check finds: the batch at an entry's position must end at its offset.

    The broker indexes an append of several batches with the append's last offset and its first
    batch's position (LogSegment.append), so the check flags those entries: Kafka's own tool
    reports them too (audit.events-v2-3 appends several batches at once, the cleaner of inventory-2
    copies several batches per append).
    """
    by_position = {b["position"]: b for b in golden_lines(name, "batches.jsonl") if b["segment_base_offset"] == base}
    return {offset: by_position[position]["last_offset"]
            for offset, position in golden_indexes(name)[base]["offset_index"]
            if by_position[position]["last_offset"] != offset}


def parse_mismatch_report(stderr: str) -> dict[str, dict[int, int]]:
    report: dict[str, dict[int, int]] = {}
    current = None
    for line in stderr.splitlines():
        if line.startswith("Mismatches in :"):
            current = report.setdefault(line[len("Mismatches in :"):], {})
        else:
            match = re.fullmatch(r"  Index offset: (\d+), log offset: (-?\d+)", line)
            assert match and current is not None, line
            current[int(match.group(1))] = int(match.group(2))
    return report


@pytest.mark.parametrize("name", PARTITIONS)
def test_verify_index_only_reports_what_kafkas_check_reports(name: str) -> None:
    indexes = list(segment_files(name, ".index").items())
    result = kfs_dump("--verify-index-only", *[p for _, p in indexes])
    assert result.returncode == 0, result.stderr
    golden = golden_indexes(name)
    expected_stdout = []
    for base, path in indexes:
        expected_stdout.append(f"Dumping {path}")
        if not golden[base]["offset_index"]:
            expected_stdout.append(f"{path} is empty.")
    assert result.stdout.splitlines() == expected_stdout  # only the problems, on stderr
    expected = {os.path.abspath(p): kafka_index_mismatches(name, base) for base, p in indexes}
    assert parse_mismatch_report(result.stderr) == {p: m for p, m in expected.items() if m}
    if name not in ("audit.events-v2-3", "inventory-2"):
        assert result.stderr == ""


@pytest.mark.parametrize("name", PARTITIONS)
def test_verify_index_only_finds_nothing_wrong_in_kafkas_time_indexes(name: str) -> None:
    paths = list(segment_files(name, ".timeindex").values())
    result = kfs_dump("--verify-index-only", *paths)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"Dumping {p}" for p in paths]
    assert result.stderr == ""


def copy_segment(tmp_path, name: str, base: int) -> dict[str, str]:
    copies = {}
    for suffix in (".log", ".index", ".timeindex"):
        source = os.path.join(partition_dir(name), f"{base:020d}{suffix}")
        copies[suffix] = str(tmp_path / os.path.basename(source))
        shutil.copyfile(source, copies[suffix])
    return copies


def test_verify_index_only_reports_a_corrupted_offset_index_entry(tmp_path) -> None:
    files = copy_segment(tmp_path, "orders-0", 0)
    entries = golden_indexes("orders-0")[0]["offset_index"]
    batches = [b for b in golden_lines("orders-0", "batches.jsonl") if b["segment_base_offset"] == 0]
    wrong = next(b for b in batches if b["position"] != entries[1][1])  # another batch's position
    with open(files[".index"], "r+b") as f:
        f.seek(8 * 1 + 4)
        f.write(struct.pack(">i", wrong["position"]))
    result = kfs_dump("--verify-index-only", files[".index"])
    assert result.returncode == 0
    assert result.stdout == f"Dumping {files['.index']}\n"
    assert result.stderr == (f"Mismatches in :{os.path.abspath(files['.index'])}\n"
                             f"  Index offset: {entries[1][0]}, log offset: {wrong['last_offset']}\n")


def test_an_index_entry_past_the_log_is_a_mismatch_not_a_crash(tmp_path) -> None:
    files = copy_segment(tmp_path, "orders-0", 0)
    entries = golden_indexes("orders-0")[0]["offset_index"]
    with open(files[".index"], "r+b") as f:
        f.seek(4)
        f.write(struct.pack(">i", os.path.getsize(files[".log"]) + 100))
    result = kfs_dump("--verify-index-only", files[".index"])
    assert result.returncode == 0
    assert f"  Index offset: {entries[0][0]}, log offset: -1\n" in result.stderr


def test_verify_index_only_reports_a_corrupted_time_index(tmp_path) -> None:
    files = copy_segment(tmp_path, "orders-0", 0)
    entries = golden_indexes("orders-0")[0]["time_index"]
    with open(files[".timeindex"], "r+b") as f:
        f.seek(12 * 2)
        f.write(struct.pack(">q", entries[0][0] - 1))  # earlier than entry 0: wrong and out of order
    result = kfs_dump("--verify-index-only", files[".timeindex"])
    path = os.path.abspath(files[".timeindex"])
    assert result.returncode == 0
    assert result.stderr == (f"Found timestamp mismatch in :{path}\n"
                             f"  Index timestamp: {entries[0][0] - 1}, log timestamp: {entries[2][0]}\n"
                             f"Found out of order timestamp in :{path}\n"
                             f"  Index timestamp: {entries[0][0] - 1}, Previously indexed timestamp: "
                             f"{entries[1][0]}\n")


def test_time_index_offset_that_is_not_a_batch_end_is_not_found(tmp_path) -> None:
    files = copy_segment(tmp_path, "orders-0", 0)
    entries = golden_indexes("orders-0")[0]["time_index"]
    with open(files[".timeindex"], "r+b") as f:
        f.seek(12 * 1 + 8)
        f.write(struct.pack(">i", entries[1][1] - 1))
    result = kfs_dump("--verify-index-only", files[".timeindex"])
    assert result.stderr.splitlines()[0] == "The following indexed offsets are not found in the log."
    assert result.stderr.splitlines()[1] == f"Indexed offset: {entries[1][1] - 1}, found log offset: {entries[1][1]}"


def test_index_sanity_check_passes_closed_indexes() -> None:
    paths = [p for suffix in (".index", ".timeindex") for b, p in segment_files("payments-0", suffix).items()]
    result = kfs_dump("--index-sanity-check", *paths)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if not line.startswith("Dumping")] == \
        [f"{p} passed sanity check." for p in paths]


def test_index_sanity_check_fails_a_live_time_index_as_the_broker_would_after_a_crash() -> None:
    """Kafka's startup check sees every slot of a preallocated index: the zero tail's last slot is
    timestamp 0, earlier than the first entry. kfs reports Kafka's message and why it happens."""
    live = segment_files("orders-0", ".timeindex")[1518]
    result = kfs_dump("--index-sanity-check", segment_files("orders-0", ".index")[1518], live)
    assert result.returncode == 1
    assert f"{segment_files('orders-0', '.index')[1518]} passed sanity check." in result.stdout
    assert result.stderr.startswith(f"kfs: Corrupt time index found, time index file ({os.path.abspath(live)}) "
                                    f"has non-zero size but the last timestamp is 0 which is less than the "
                                    f"first timestamp 1526384734225")
    assert "preallocated: 3 entries" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_live_index_lists_only_the_entries_before_its_zero_tail() -> None:
    result = kfs_dump(segment_files("orders-0", ".index")[1518])
    assert dumped_pairs(result.stdout, "offset", "position") == golden_indexes("orders-0")[1518]["offset_index"]


# ---- errors -------------------------------------------------------------------------------------

def assert_one_sentence(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("kfs: ")
    for word in words:
        assert word in result.stderr


def test_missing_file_is_one_sentence_and_nothing_is_dumped(tmp_path) -> None:
    good = segment_files("orders-0", ".log")[0]
    result = kfs_dump(good, str(tmp_path / "00000000000000000000.log"))
    assert_one_sentence(result, "no such file")
    assert result.stdout == ""


def test_unknown_suffix_is_one_sentence(tmp_path) -> None:
    other = tmp_path / "00000000000000000000.cleaned"
    other.write_bytes(b"")
    assert_one_sentence(kfs_dump(str(other)), str(other), ".log")


def test_a_name_without_a_base_offset_is_one_sentence(tmp_path) -> None:
    other = tmp_path / "segment.log"
    shutil.copyfile(segment_files("orders-0", ".log")[0], other)
    assert_one_sentence(kfs_dump(str(other)), "base offset")


def test_no_files_is_one_sentence() -> None:
    assert_one_sentence(kfs_dump())


def test_corrupt_batch_prints_the_batches_before_it_then_one_sentence(tmp_path) -> None:
    files = copy_segment(tmp_path, "orders-0", 0)
    batches = [b for b in golden_lines("orders-0", "batches.jsonl") if b["segment_base_offset"] == 0]
    with open(files[".log"], "r+b") as f:
        f.seek(batches[3]["position"] + 8)
        f.write(struct.pack(">i", 3))  # an impossible batch length
    result = kfs_dump(files[".log"])
    assert_one_sentence(result, files[".log"], f"position {batches[3]['position']}")
    assert [fields(line) for line in batch_lines(result.stdout)] == [expected_batch_fields(b) for b in batches[:3]]


def test_a_batch_cut_short_is_reported_as_trailing_invalid_bytes(tmp_path) -> None:
    files = copy_segment(tmp_path, "orders-0", 0)
    batches = [b for b in golden_lines("orders-0", "batches.jsonl") if b["segment_base_offset"] == 0]
    with open(files[".log"], "r+b") as f:
        f.truncate(batches[-1]["position"] + 20)
    result = kfs_dump(files[".log"])
    assert result.returncode == 0
    assert len(batch_lines(result.stdout)) == len(batches) - 1
    assert result.stdout.splitlines()[-1] == "Found 20 invalid bytes at the end of 00000000000000000000.log"


def test_files_option_takes_kafkas_comma_separated_list() -> None:
    index, timeindex = segment_files("payments-0", ".index")[0], segment_files("payments-0", ".timeindex")[0]
    result = kfs_dump("--files", f"{index},{timeindex}")
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("Dumping")] == \
        [f"Dumping {index}", f"Dumping {timeindex}"]
