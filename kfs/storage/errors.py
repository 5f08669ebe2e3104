"""Errors of the storage layer. Every front end turns these into one clear sentence or an errno."""

from __future__ import annotations


class KfsError(Exception):
    """Base of every error kfs reports to a user."""


class NotALogDir(KfsError):
    """A path given as a log dir that is not one; the message says what it is and what a log dir is."""


class UnknownPartition(KfsError):
    pass


class OffsetOutOfRange(KfsError):
    """Kafka's OFFSET_OUT_OF_RANGE: below the log start offset or at/after the log end offset."""


class TimestampNotFound(KfsError):
    """ListOffsets found no record with a timestamp at or after the target."""


class NoRecordAtOffset(KfsError):
    """An exact lookup (a `.value`) hit a gap: compaction, a control record or a deleted range."""


class BadSpec(KfsError):
    """An offset or time written in a form kfs does not understand."""


class CorruptLogError(KfsError):
    """A batch that cannot be read. Names the file and byte position; data before it stays readable."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt batch at position {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


class VanishedError(KfsError):
    """A segment file was deleted (retention, compaction swap) between listing and reading."""
