"""Which topics were never compacted, as far as the KRaft metadata log among the log dirs says.

kfs.storage.damage's rule 2 (a closed segment's batches stop short of the next segment's base
offset) is sound only where the log cleaner cannot have made the gap. The `cleaner-offset-checkpoint`
says so per partition; where a log dir has none (a copy without it), a topic's `cleanup.policy` may:
a topic whose policy was set without `compact`, and never with it, in the `__cluster_metadata` log
(ConfigRecord, resource type TOPIC), has segments the cleaner never touched. A topic whose policy
is not in the log (the broker's static `log.cleanup.policy` decides it, which no log holds) is not
known, nor is any topic once a broker or cluster default there (resource type BROKER,
`log.cleanup.policy`) ever named `compact`. Records the metadata log no longer holds (taken into a
snapshot, `.checkpoint`) are not read: a policy set only there is not known.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Protocol

from kfs.record import Record
from kfs.storage.errors import KfsError

log = logging.getLogger("kfs")

METADATA_PARTITION = "__cluster_metadata-0"
_TOPIC, _BROKER = 2, 4  # ConfigResource.Type


class MetadataLog(Protocol):
    """What `read_policies` reads of the metadata partition (a `PartitionLog`)."""

    def log_start_offset(self) -> int: ...
    def log_end_offset(self) -> int: ...
    def records(self, start_offset: int | None = None) -> Iterator[Record]: ...


class TopicPolicies:
    """The topics the metadata log says were never compacted (see the module docstring)."""

    def __init__(self) -> None:
        self.delete_only: set[str] = set()  # cleanup.policy set, never with compact
        self.ever_compact: set[str] = set()
        self.default_ever_compact = False
        self.read_to = 0  # the offset after the last record taken in

    def never_compacted(self, topic: str) -> bool:
        return topic in self.delete_only and topic not in self.ever_compact and not self.default_ever_compact

    def take(self, record_type: str, data: dict) -> None:
        if record_type != "ConfigRecord":
            return
        resource_type, resource, name, value = (data.get("resourceType"), data.get("resourceName"),
                                                data.get("name"), data.get("value"))
        compact = value is not None and "compact" in str(value).split(",")
        if resource_type == _TOPIC and name == "cleanup.policy" and isinstance(resource, str):
            if compact:
                self.ever_compact.add(resource)
            elif value is not None:
                self.delete_only.add(resource)
        elif resource_type == _BROKER and name == "log.cleanup.policy" and compact:
            self.default_ever_compact = True


def read_policies(metadata: MetadataLog, known: TopicPolicies | None = None) -> TopicPolicies:
    """The policies of every topic from the metadata log's records: `known`'s (read from the same
    segments) and those of the records appended since, or all of them. None known when the log cannot
    be read to its end (a compact policy may be among the records past its damage). A record that
    does not decode (a record type kfs does not know) is passed over."""
    from kfs.internal_topics.framing import decode_metadata  # (kfs.internal_topics reads partitions: imported late)
    from kfs.internal_topics.reader import DecodeError

    policies = known if known is not None and known.read_to >= metadata.log_start_offset() else TopicPolicies()
    try:
        if policies.read_to >= metadata.log_end_offset():
            return policies
        for record in metadata.records(policies.read_to if policies.read_to else None):
            try:
                decoded = decode_metadata(record.value)
            except DecodeError:
                continue
            finally:
                policies.read_to = record.offset + 1
            policies.take(decoded.type, decoded.data)
    except KfsError as e:
        log.info("%s: topic configs not known (%s)", METADATA_PARTITION, e)
        return TopicPolicies()
    return policies
