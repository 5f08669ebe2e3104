"""Where a lookup landed, and the file ranges a raw view serves: the values every front end passes around."""

from __future__ import annotations

from dataclasses import dataclass, field

from kfs.storage.errors import CorruptLogError


@dataclass(frozen=True)
class Location:
    """Where a lookup landed: the batch (by segment and position) and the record found in it or after."""

    segment_base_offset: int
    index_entry: tuple[int, int] | None
    position: int
    batch_base_offset: int
    batch_last_offset: int
    offset: int | None
    timestamp: int | None
    file_id: int | None = None  # the inode of the segment file `position` is in (not in as_dict)

    def as_dict(self) -> dict:
        return {
            "segment_base_offset": self.segment_base_offset,
            "index_entry": list(self.index_entry) if self.index_entry else None,
            "position": self.position,
            "batch_base_offset": self.batch_base_offset,
            "batch_last_offset": self.batch_last_offset,
            "offset": self.offset,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True)
class Extent:
    """A byte range [start, end) of one segment file; `file_id`: the inode it was measured in (a
    file under that name later is another one: the log cleaner swapped it).

    `damage` (the reason of its CorruptLogError) marks where a damaged closed segment's complete
    batches end: the extent covers what follows them in the file (nothing, when batches are missing
    at a batch boundary), and a read that reaches it fails instead of silently going on to the next
    segment; `error` is the error to raise there (`damage_error`)."""

    path: str
    start: int
    end: int
    segment_base_offset: int
    file_id: int | None = None
    damage: str | None = None
    error: CorruptLogError | None = field(default=None, compare=False, repr=False)

    def damage_error(self) -> CorruptLogError:
        """What a read reaching this damage extent raises: the segment's own error (for a `.log` that
        is not a regular file, the sentence that says so), else one made from `damage`."""
        return self.error if self.error is not None else CorruptLogError(self.path, self.start, self.damage or "")
