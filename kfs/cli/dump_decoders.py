"""`kfs dump --offsets-decoder | --transaction-log-decoder | --cluster-metadata-decoder`: the record
contents DumpLogSegments prints with its message parsers (tools/.../DumpLogSegments.java, Kafka 4.x).

    --offsets-decoder, --transaction-log-decoder   (CoordinatorRecordMessageParser)
        key: {"type":"<record type>","data":{...}} payload: {"version":"<version>","data":{...}}
        a tombstone's payload is <DELETE>; a record that does not decode prints
        key: Unknown record type T at offset O, skipping.   or   key: Error at offset O, skipping. <why>
    --cluster-metadata-decoder   (ClusterMetadataLogMessageParser; no key)
        payload: {"type":"TOPIC_RECORD","version":0,"data":{...}}   or   payload: Error at O, skipping. <why>

The JSON is Kafka's JSON converters' (kfs/internal_topics/render.py: kafka_json), the data kfs's one schema
interpreter's (kfs.internal_topics). Without a decoder, keys and values print as UTF-8 (StringDecoder).
"""

from __future__ import annotations

from collections.abc import Callable

from kfs.internal_topics import (
    CONSUMER_OFFSETS,
    TRANSACTION_STATE,
    DecodeError,
    decode_key,
    decode_metadata,
    decode_value,
)
from kfs.internal_topics.framing import UnknownRecordType, metadata_type_name
from kfs.internal_topics.render import kafka_json
from kfs.record import Record
from kfs.storage import KfsError

# (record) -> (key text or None, payload text or None), as DumpLogSegments' MessageParser.parse
MessageParser = Callable[[Record], "tuple[str | None, str | None]"]

DECODER_OPTIONS = {"offsets_decoder": CONSUMER_OFFSETS, "transaction_log_decoder": TRANSACTION_STATE,
                   "cluster_metadata_decoder": "__cluster_metadata"}


def string_parser(record: Record) -> tuple[str | None, str | None]:
    """Kafka's default StringDecoder: UTF-8, malformed input replaced."""
    key = None if record.key is None else bytes(record.key).decode("utf-8", "replace")
    value = None if record.value is None else bytes(record.value).decode("utf-8", "replace")
    return key, value


def coordinator_parser(topic: str) -> MessageParser:
    def parse(record: Record) -> tuple[str | None, str | None]:
        if record.key is None:
            raise KfsError(f"Failed to decode message at offset {record.offset} using the specified decoder "
                           "(message had a missing key)")
        try:
            key = decode_key(topic, record.key)
            value = decode_value(topic, record.key, record.value)
        except UnknownRecordType as e:
            return f"Unknown record type {e.record_type} at offset {record.offset}, skipping.", None
        except DecodeError as e:
            return f"Error at offset {record.offset}, skipping. {e}", None
        assert key is not None
        key_text = kafka_json({"type": str(key.version), "data": key.data})
        if value is None:
            return key_text, "<DELETE>"
        return key_text, kafka_json({"version": str(value.version), "data": value.data})
    return parse


def metadata_parser(record: Record) -> tuple[str | None, str | None]:
    try:
        value = decode_metadata(record.value)
    except DecodeError as e:
        return None, f"Error at {record.offset}, skipping. {e}"
    return None, kafka_json({"type": metadata_type_name(value.type), "version": value.version, "data": value.data})


def message_parser(offsets: bool, transaction_log: bool, cluster_metadata: bool) -> MessageParser | None:
    """The parser the options ask for (Kafka's order of precedence); None: print no contents."""
    if offsets:
        return coordinator_parser(CONSUMER_OFFSETS)
    if transaction_log:
        return coordinator_parser(TRANSACTION_STATE)
    if cluster_metadata:
        return metadata_parser
    return None
