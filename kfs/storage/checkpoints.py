"""A log dir's offset checkpoint files (Kafka's `OffsetCheckpointFile`), re-read when they change.

- `log-start-offset-checkpoint`: where DeleteRecords moved each partition's log start.
- `cleaner-offset-checkpoint`: where the log cleaner's last pass over each compacted partition
  ended (its first dirty offset). `LogCleanerManager` creates the file in every log dir when the
  broker starts with the cleaner enabled (the default), so its presence says that any compaction
  of a partition would be recorded there: a partition it does not list was never compacted.
"""

from __future__ import annotations

import logging
import os
import threading

from kfs.storage.files import NotARegularFile, read_regular, refusal

log = logging.getLogger("kfs")

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


class OffsetCheckpointFile:
    """One checkpoint file, parsed again only when its mtime or size changes.

        0                      version
        N                      number of entries
        <topic> <partition> <offset>   N lines
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int, int, int] | None = None
        self._offsets: dict[tuple[str, int], int] | None = None
        self._lock = threading.Lock()

    def entries(self) -> dict[tuple[str, int], int] | None:
        """(topic, partition) -> offset; None when the file does not exist, or is not a regular file
        (a FIFO, a directory, a symbolic link: never opened, taken as missing, and said once)."""
        with self._lock:
            try:
                st = os.lstat(self.path)
            except OSError:
                self._stamp, self._offsets = None, None
                return None
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode)
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    found = refusal(self.path, st.st_mode)
                    if found is not None:
                        raise found
                    self._offsets = _parse_checkpoint(read_regular(self.path, _MAX_CHECKPOINT_BYTES))
                except (NotARegularFile, OSError) as e:
                    reason = e if isinstance(e, NotARegularFile) else f"{self.path}: {e.strerror or e}"
                    log.warning("%s; kfs goes on as if it were missing", reason)
                    self._offsets = None
            return self._offsets


class CheckpointReader:
    """The checkpoint files of one log dir."""

    def __init__(self, logdir: str) -> None:
        self._log_start = OffsetCheckpointFile(os.path.join(logdir, LOG_START_OFFSET_CHECKPOINT))
        self._cleaner = OffsetCheckpointFile(os.path.join(logdir, CLEANER_OFFSET_CHECKPOINT))

    @property
    def path(self) -> str:
        return self._log_start.path

    def log_start_offset(self, topic: str, partition: int) -> int | None:
        entries = self._log_start.entries()
        return entries.get((topic, partition)) if entries is not None else None

    def cleaned_up_to(self, topic: str, partition: int) -> int | None:
        """The offset below which the log cleaner may have removed records: 0 when the partition was
        never compacted; None when unknown (no cleaner-offset-checkpoint: a copy without it, or a
        broker running without the cleaner)."""
        entries = self._cleaner.entries()
        return entries.get((topic, partition), 0) if entries is not None else None


_MAX_CHECKPOINT_BYTES = 64 << 20  # a line per partition of the log dir: far more than any broker's


def _parse_checkpoint(data: bytes) -> dict[tuple[str, int], int]:
    offsets: dict[tuple[str, int], int] = {}
    lines = data.decode("utf-8", errors="replace").splitlines()
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            offsets[(parts[0], int(parts[1]))] = int(parts[2])
    return offsets
