"""Kafka's storage model, read-only: log dirs, partition logs, segments and their indexes.

See API.md beside this file for the calls every front end makes.
"""

from kfs.storage.errors import (
    BadSpec,
    CorruptLogError,
    KfsError,
    NoRecordAtOffset,
    NotALogDir,
    OffsetOutOfRange,
    TimestampNotFound,
    UnknownPartition,
    VanishedError,
)
from kfs.storage.location import Extent, Location
from kfs.storage.logdir import LogDirs, check_log_dirs, parse_partition_dir
from kfs.storage.partition import PartitionLog
from kfs.storage.record_stream import ControlRecord, CorruptBatch, batch_records
from kfs.storage.segment import LogSegment

__all__ = [
    "BadSpec", "ControlRecord", "CorruptBatch", "CorruptLogError", "Extent", "KfsError", "Location", "LogDirs",
    "LogSegment",
    "NoRecordAtOffset", "NotALogDir", "OffsetOutOfRange", "PartitionLog", "TimestampNotFound", "UnknownPartition",
    "VanishedError", "batch_records", "check_log_dirs", "parse_partition_dir",
]
