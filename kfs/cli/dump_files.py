"""`kfs dump` of the files beside the segments: producer-state snapshots, and the checkpoint files of
log dirs and partitions (which kafka-dump-log.sh does not read; kfs prints them in its manner).

    <offset>.snapshot            ProducerStateManager.readSnapshot, printed as DumpLogSegments does:
                                 producerId: P producerEpoch: E coordinatorEpoch: C currentTxnFirstOffset:
                                 OptionalLong[..] lastTimestamp: T [firstSequence: .. lastSequence: ..
                                 lastOffset: .. offsetDelta: .. timestamp: ..]
    *-checkpoint                 CheckpointFile: a version line (0), a count line, one entry per line;
                                 leader-epoch-checkpoint entries are `epoch startOffset`
                                 (LeaderEpochCheckpointFile), the others `topic partition offset`
                                 (OffsetCheckpointFile: recovery-point-, replication-, log-start-, cleaner-)
    partition.metadata           `version: 0` then `topic_id: <uuid>` (PartitionMetadataFile)

A file that does not read as Kafka reads it gets Kafka's sentence on stderr, as DumpLogSegments does
for a corrupt snapshot, and the dump goes on with the next file.
"""

from __future__ import annotations

import base64
import os
import re
import struct

from kfs.cli.dump_common import INT32_MAX, Out
from kfs.internal_topics import DecodeError
from kfs.internal_topics.reader import read_message
from kfs.internal_topics.schemas.storage import STORAGE

SNAPSHOT_SUFFIX = ".snapshot"
PARTITION_METADATA = "partition.metadata"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_PRODUCER_SNAPSHOT = STORAGE["ProducerSnapshot"]
_ENTRIES_OFFSET = 6  # int16 version, uint32 CRC: the CRC covers what follows
_WHITESPACE = re.compile(r"\s+")


def is_checkpoint_file(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith("-checkpoint") or name == PARTITION_METADATA


def dump_producer_snapshot(path: str, out: Out, err: Out) -> None:
    """`DumpLogSegments.dumpProducerIdSnapshot`."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        version = struct.unpack_from(">h", data, 0)[0]
        if version not in _PRODUCER_SNAPSHOT.versions:
            err(f"Snapshot contained an unknown file version {version}\n")
            return
        snapshot, _end = read_message(_PRODUCER_SNAPSHOT, data, version, 2)
    except (struct.error, DecodeError) as error:
        err(f"Snapshot failed schema validation: {error}\n")
        return
    from crc32c import crc32c  # (here: the package imports importlib.metadata, ~13 ms of every kfs command)

    computed = crc32c(data[_ENTRIES_OFFSET:])
    if snapshot["crc"] != computed:
        err(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {snapshot['crc']}. Computed crc: {computed}\n")
        return
    for e in snapshot["producerEntries"]:
        first_offset = e["currentTxnFirstOffset"]
        line = (f"producerId: {e['producerId']} producerEpoch: {e['epoch']} coordinatorEpoch: {e['coordinatorEpoch']} "
                f"currentTxnFirstOffset: {_optional_long(first_offset if first_offset >= 0 else None)} "
                f"lastTimestamp: {e['timestamp']}")
        if e["lastOffset"] >= 0:  # the entry's batch metadata (ProducerStateManager.readSnapshot)
            first_sequence = _decrement_sequence(e["lastSequence"], e["offsetDelta"])
            line += (f" firstSequence: {first_sequence} lastSequence: {e['lastSequence']} "
                     f"lastOffset: {e['lastOffset']} offsetDelta: {e['offsetDelta']} timestamp: {e['timestamp']}")
        out(line + "\n")


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """`DefaultRecordBatch.decrementSequence`: sequences wrap at Integer.MAX_VALUE."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def dump_checkpoint(path: str, out: Out, err: Out) -> None:
    """A `*-checkpoint` file or `partition.metadata`, entry by entry."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    name = os.path.basename(path)
    try:
        if name == PARTITION_METADATA:
            out(_partition_metadata(path, lines))
        else:
            out(_checkpoint(path, lines, epochs=name == LEADER_EPOCH_CHECKPOINT))
    except ValueError as e:
        err(f"{e}\n")


def _checkpoint(path: str, lines: list[str], epochs: bool) -> str:
    if not lines:
        return "version: 0 entries: 0\n"  # CheckpointFile reads an empty file as no entries
    version = _int(path, lines[0])
    if version != 0:
        raise ValueError(f"Unrecognised version:{version}, expected version: 0 in checkpoint file at: {path}")
    if len(lines) < 2:
        return f"version: {version} entries: 0\n"
    expected = _int(path, lines[1])
    text = []
    for line in lines[2:]:
        parts = _WHITESPACE.split(line)
        if epochs and len(parts) == 2:
            text.append(f"epoch: {_int(path, parts[0])} startOffset: {_int(path, parts[1])}\n")
        elif not epochs and len(parts) == 3:
            text.append(f"topic: {parts[0]} partition: {_int(path, parts[1])} offset: {_int(path, parts[2])}\n")
        else:
            raise ValueError(f"Malformed line in checkpoint file [{path}]: {line}")
    if len(text) != expected:
        raise ValueError(f"Expected [{expected}] entries in checkpoint file [{path}], but found only [{len(text)}]")
    return f"version: {version} entries: {expected}\n" + "".join(text)


def _partition_metadata(path: str, lines: list[str]) -> str:
    fields = [_WHITESPACE.split(line) for line in lines[:2]]
    if len(fields) < 2 or len(fields[0]) != 2 or len(fields[1]) != 2:
        raise ValueError(f"Malformed line in checkpoint file [{path}]: {lines[len(fields) - 1] if lines else ''}")
    version, topic_id = _int(path, fields[0][1]), fields[1][1]
    if version < 0:
        raise ValueError(f"Unrecognized version of partition metadata file + ({path}): {version}")
    try:
        raw = base64.urlsafe_b64decode(topic_id + "==")
    except ValueError:
        raw = b""
    if len(raw) != 16 or raw == bytes(16):
        raise ValueError(f"Invalid topic ID in partition metadata file ({path})")
    return f"version: {version} topicId: {topic_id}\n"


def _int(path: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"Malformed line in checkpoint file [{path}]: {text}") from None
