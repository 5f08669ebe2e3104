"""What every part of `kfs dump` shares: the file kinds, segment files by name, and the problems
DumpLogSegments collects while dumping and prints to stderr at the end."""

from __future__ import annotations

import os
from collections.abc import Callable

from kfs.storage import KfsError, LogSegment

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

RECORD_INDENT = "|"
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # DumpLogSegments' --max-message-size default
INT32_MAX = 2**31 - 1
NO_SEQUENCE = -1

Out = Callable[[str], object]


def file_suffix(path: str) -> str:
    name = os.path.basename(path)
    return name[name.rfind("."):] if "." in name else ""


def base_offset_of_file(path: str) -> int:
    """The segment's base offset, from its name, as `UnifiedLog.offsetFromFile` reads it."""
    stem = os.path.basename(path).split(".")[0]
    if not stem.isdigit():
        raise KfsError(f"{path}: not a segment file name (<base offset>{file_suffix(path)})")
    return int(stem)


def sibling_file(path: str, suffix: str) -> str:
    name = os.path.basename(path)
    return os.path.join(os.path.dirname(path), name.split(".")[0] + suffix)


def segment_of_file(log_path: str) -> LogSegment:
    """A LogSegment for this very file (its name need not be the 20-digit form)."""
    return LogSegment(os.path.dirname(log_path) or ".", base_offset_of_file(log_path), log_path=log_path,
                      follow_links=True)  # (the files a user names are read, links or not)


def java_bool(value: bool) -> str:
    return "true" if value else "false"


def increment_sequence(sequence: int, increment: int) -> int:
    """`DefaultRecordBatch.incrementSequence`: sequences wrap at Integer.MAX_VALUE."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


# ---- what is reported after the dump ----------------------------------------------------------

class Problems:
    """The index and offset problems DumpLogSegments collects, printed to stderr after every file."""

    def __init__(self) -> None:
        self.index_mismatches: dict[str, dict[int, int]] = {}   # index offset -> log offset
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.time_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, dict[int, int]] = {}    # previous offset -> next offset

    def report(self, err: Out) -> None:
        for path, mismatches in self.index_mismatches.items():
            if mismatches:
                err(f"Mismatches in :{path}\n")
                for index_offset in sorted(mismatches, reverse=True):  # Kafka's TreeMap(reverseOrder())
                    err(f"  Index offset: {index_offset}, log offset: {mismatches[index_offset]}\n")
        for path, found in self.time_mismatches.items():
            err(f"Found timestamp mismatch in :{path}\n")
            for index_timestamp, log_timestamp in found:
                err(f"  Index timestamp: {index_timestamp}, log timestamp: {log_timestamp}\n")
        for path, found in self.time_out_of_order.items():
            err(f"Found out of order timestamp in :{path}\n")
            for index_timestamp, previous in found:
                err(f"  Index timestamp: {index_timestamp}, Previously indexed timestamp: {previous}\n")
        for found in self.time_not_found.values():
            err("The following indexed offsets are not found in the log.\n")
            for index_offset, log_offset in found:
                err(f"Indexed offset: {index_offset}, found log offset: {log_offset}\n")
        for path, pairs in self.non_consecutive.items():
            err(f"Non-consecutive offsets in {path}\n")
            for previous in sorted(pairs):
                err(f"  {previous} is followed by {pairs[previous]}\n")
