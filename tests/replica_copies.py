"""Brokers' log dirs holding copies of one partition, written in Python for the `kfs replicas` tests.

A copy is a list of batches (leader epoch, base offset, records, tag): each record is key `k<offset>`
and value `<tag>-<offset>`, so copies written by different leaders differ in their bytes (and CRCs)
where their tags differ. The partition leader epoch sits outside the CRC (bytes 12-15 of a v2 batch),
as the leader stamps it on append.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
from conftest import v2_batch, write_segment

TOPIC, PARTITION = "orders", 0
NAME = f"{TOPIC}-{PARTITION}"
T0 = 1_700_000_000_000


@dataclass
class Batch:
    epoch: int
    base: int
    count: int
    tag: str = "a"
    offsets: list[int] | None = None  # the offsets a compacted batch still holds (default: all of them)

    def bytes(self) -> tuple[bytes, list]:
        offsets = self.offsets if self.offsets is not None else list(range(self.base, self.base + self.count))
        records: list[tuple[int, int, bytes | None, bytes | None, list]] = [
            (o, T0 + o, b"k%d" % o, f"{self.tag}-{o}".encode(), []) for o in offsets]
        data = bytearray(v2_batch(self.base, records))
        if self.offsets is not None:  # a cleaned batch keeps its last offset delta (lastOffsetDelta at byte 23)
            struct.pack_into(">i", data, 23, self.base + self.count - 1 - self.base)
            struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
        struct.pack_into(">i", data, 12, self.epoch)
        return bytes(data), records


@dataclass
class CopySpec:
    broker: int
    batches: list[Batch]
    high_watermark: int | None = None
    epoch_checkpoint: list[tuple[int, int]] | None = None  # None: no file
    topic_id: str | None = "AAAAAAAAAAAAAAAAAAAAAA"
    cleaned_to: int | None = 0  # cleaner-offset-checkpoint entry; None: no file
    meta: bool = True
    segment_every: int = 0  # roll a segment every N batches (0: one segment)
    extra: dict[str, str] = field(default_factory=dict)


def write_copy(root: Path, spec: CopySpec, logdir_name: str | None = None) -> Path:
    """The broker's log dir under `root` holding its copy of orders-0; its path."""
    logdir = root / (logdir_name or f"broker-{spec.broker}")
    partition = logdir / NAME
    partition.mkdir(parents=True)
    if spec.meta:
        (logdir / "meta.properties").write_text(f"#\nversion=1\nnode.id={spec.broker}\ncluster.id=test-cluster\n")
    if spec.high_watermark is not None:
        (logdir / "replication-offset-checkpoint").write_text(f"0\n1\n{TOPIC} {PARTITION} {spec.high_watermark}\n")
    if spec.cleaned_to is not None:
        entries = [f"{TOPIC} {PARTITION} {spec.cleaned_to}"] if spec.cleaned_to else []
        (logdir / "cleaner-offset-checkpoint").write_text(f"0\n{len(entries)}\n" + "".join(e + "\n" for e in entries))
    if spec.epoch_checkpoint is not None:
        (partition / "leader-epoch-checkpoint").write_text(
            f"0\n{len(spec.epoch_checkpoint)}\n" + "".join(f"{e} {s}\n" for e, s in spec.epoch_checkpoint))
    if spec.topic_id is not None:
        (partition / "partition.metadata").write_text(f"version: 0\ntopic_id: {spec.topic_id}\n")
    for name, text in spec.extra.items():
        (logdir / name).write_text(text)
    groups = [spec.batches]
    if spec.segment_every:
        groups = [spec.batches[i:i + spec.segment_every] for i in range(0, len(spec.batches), spec.segment_every)]
    for group in groups:
        base = group[0].base if group else 0
        write_segment(str(partition), base, [[b.bytes()] for b in group], 4096, closed=group is not groups[-1])
    return logdir


def run_of(epoch: int, start: int, end: int, tag: str = "a", per_batch: int = 5) -> list[Batch]:
    """Batches of `per_batch` records covering offsets [start, end) at one epoch."""
    return [Batch(epoch, o, min(per_batch, end - o), tag) for o in range(start, end, per_batch)]
