"""Kafka's internal topics read alone as typed columns (kfs.spark.internal_types): each row's `key_decoded`
and `value_decoded` hold, field for field, what `kfs cat` prints for that record (docs/spec.md section 8),
in a struct per record type typed by Kafka's schemas; the Parquet export holds the same; a read of
several internal topics keeps the JSON text.

The oracle is `kfs cat`'s JSON lines of the Kafka-written fixtures (tests/fixtures/internal-topics: the
records Kafka's own serdes wrote, consumer-protocol subscriptions, KIP-848 records, transactions and
the metadata log; internal-topics-undecodable: records that do not decode)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from conftest import run_kfs
from pyspark.sql.types import ArrayType, BinaryType, DataType, StructType
from spark_session import local_spark

FIXTURES = Path(__file__).parent / "fixtures"
INTERNAL = str(FIXTURES / "internal-topics" / "logdirs" / "broker-a")
UNDECODABLE = str(FIXTURES / "internal-topics-undecodable" / "logdirs" / "broker-a")
TOPICS = ["__consumer_offsets", "__transaction_state", "__cluster_metadata"]


@pytest.fixture(scope="session")
def spark():
    yield from local_spark("kfs-internal-typed")


def read(spark, path: str, **options: str):
    return spark.read.format("kfs").options(**options).load(path)


def cat_lines(logdir: str, partition: str) -> list[dict]:
    result = run_kfs("cat", logdir, partition)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def expected_lines(logdir: str, topic: str) -> list[tuple[int, dict]]:
    return [(int(p.name.rpartition("-")[2]), line) for p in sorted(Path(logdir).glob(f"{topic}-*"))
            for line in cat_lines(logdir, p.name)]


def section3(raw: bytes | bytearray) -> Any:
    """Bytes as a JSON line shows them: a string when UTF-8, else {"base64": ...}."""
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(bytes(raw)).decode("ascii")}


def assert_same(typed: Any, shown: Any, data_type: DataType, where: str) -> None:
    """`typed` (a Spark value of `data_type`) holds what the JSON `shown` holds, field for field: every field
    the JSON has, equal; every other field of the struct null (absent from the record's version)."""
    if isinstance(data_type, StructType):
        names = data_type.fieldNames()
        if len(names) == 2 and names[0] == "bytes":  # (subscription / assignment: decoded, or bytes)
            assert typed is not None, where
            if isinstance(shown, dict) and "base64" not in shown:
                assert typed["bytes"] is None, where
                assert_same(typed[names[1]], shown, data_type[names[1]].dataType, f"{where}.{names[1]}")
            else:
                assert typed[names[1]] is None and section3(typed["bytes"]) == shown, where
            return
        if shown is None:
            assert typed is None, where
            return
        assert isinstance(shown, dict) and typed is not None, where
        assert set(shown) <= set(names), f"{where}: fields {set(shown) - set(names)} are not in the type"
        for field in data_type.fields:
            if field.name in shown:
                assert_same(typed[field.name], shown[field.name], field.dataType, f"{where}.{field.name}")
            else:
                assert typed[field.name] is None, f"{where}.{field.name}: {typed[field.name]!r}, absent in the JSON"
    elif isinstance(data_type, ArrayType):
        if shown is None:
            assert typed is None, where
            return
        assert typed is not None and len(typed) == len(shown), where
        for i, (t, s) in enumerate(zip(typed, shown, strict=True)):
            assert_same(t, s, data_type.elementType, f"{where}[{i}]")
    elif isinstance(data_type, BinaryType):
        assert (None if typed is None else section3(typed)) == shown, where
    else:
        assert typed == shown and type(typed) is type(shown), f"{where}: {typed!r} != {shown!r}"


def assert_part(typed: Any, shown: dict | None, data_type: StructType, where: str) -> None:
    """A typed key or value against the JSON line's {"type", "version", "data"} (or null)."""
    if shown is None:
        assert typed is None, where
        return
    assert typed is not None, where
    assert (typed["type"], typed["version"]) == (shown["type"], shown["version"]), where
    for member in data_type.fieldNames()[2:]:
        if member != shown["type"]:
            assert typed[member] is None, f"{where}: member {member} is set for a {shown['type']}"
    if shown["type"] not in data_type.fieldNames():  # (a record type without fields has no member)
        assert shown["data"] == {}, where
        return
    assert_same(typed[shown["type"]], shown["data"], data_type[shown["type"]].dataType, f"{where}.{shown['type']}")


@pytest.mark.parametrize("logdir", [INTERNAL, UNDECODABLE], ids=["kafka-written", "undecodable"])
@pytest.mark.parametrize("topic", TOPICS)
def test_an_internal_topic_alone_reads_typed_field_for_field(spark, logdir, topic):
    expected = expected_lines(logdir, topic)
    if not expected:
        pytest.skip(f"no {topic} in this fixture")
    df = read(spark, logdir, subscribe=topic)
    key_type, value_type = df.schema["key_decoded"].dataType, df.schema["value_decoded"].dataType
    assert isinstance(key_type, StructType) and isinstance(value_type, StructType)
    assert value_type.fieldNames()[:2] == ["type", "version"]
    rows = {(r["partition"], r["offset"]): r for r in df.collect()}
    assert len(rows) == len(expected)
    seen_types = set()
    for partition, line in expected:
        row, where = rows[(partition, line["offset"])], f"{topic}-{partition}@{line['offset']}"
        assert row["value_decode_error"] == line.get("decode_error"), where
        if "decode_error" in line:
            assert row["key_decoded"] is None and row["value_decoded"] is None, where
            continue
        assert_part(row["key_decoded"], line["key"], key_type, f"{where} key")
        assert_part(row["value_decoded"], line["value"], value_type, f"{where} value")
        seen_types.add(line["value"]["type"] if line["value"] else None)
    if logdir == INTERNAL and topic == "__consumer_offsets":  # (what the comparison covered)
        assert {"OffsetCommitValue", "GroupMetadataValue", None} <= seen_types, seen_types


def test_several_internal_topics_keep_the_json_text(spark):
    df = read(spark, INTERNAL, subscribe="__consumer_offsets,__transaction_state")
    assert df.schema["value_decoded"].dataType.simpleString() == "string"
    rows = {(r["topic"], r["partition"], r["offset"]): r for r in df.collect()}
    for topic in ("__consumer_offsets", "__transaction_state"):
        for partition, line in expected_lines(INTERNAL, topic):
            got = rows[(topic, partition, line["offset"])]["value_decoded"]
            assert (json.loads(got) if got else None) == line["value"]
    assert "value_decoded" not in read(spark, INTERNAL).columns  # (not with ordinary topics in the read)


def test_last_commit_by_group_from_typed_fields(spark):
    """The operator's first question, asked of typed fields: each (group, topic, partition)'s last committed
    offset, equal to the answer computed from `kfs cat`'s JSON lines."""
    from pyspark.sql import functions as F

    df = read(spark, INTERNAL, subscribe="__consumer_offsets")
    commits = df.where(F.col("key_decoded.type") == "OffsetCommitKey").where(F.col("value_decoded").isNotNull())
    key = F.col("key_decoded.OffsetCommitKey")
    got = {(r["group"], r["t"], r["p"]): r["last"]
           for r in commits.groupBy(key["group"].alias("group"), key["topic"].alias("t"), key["partition"].alias("p"))
           .agg(F.max_by("value_decoded.OffsetCommitValue.offset", F.struct("partition", "offset")).alias("last"))
           .collect()}
    expected: dict[tuple[str, str, int], tuple[tuple[int, int], int]] = {}
    for partition, line in expected_lines(INTERNAL, "__consumer_offsets"):
        if (line.get("key") or {}).get("type") == "OffsetCommitKey" and line["value"] is not None:
            k = line["key"]["data"]
            where = (partition, line["offset"])
            previous = expected.get((k["group"], k["topic"], k["partition"]))
            if previous is None or previous[0] < where:
                expected[(k["group"], k["topic"], k["partition"])] = (where, line["value"]["data"]["offset"])
    assert got == {k: v for k, (_, v) in expected.items()} and got


def test_a_query_of_one_field_reads_it_pruned(spark):
    """With kfs's JVM front the read is planned with the one field the query reads: its values equal
    the whole read's."""
    df = read(spark, INTERNAL, subscribe="__consumer_offsets")
    one = {(r["partition"], r["offset"]): r["o"]
           for r in df.selectExpr("partition", "offset", "value_decoded.OffsetCommitValue.offset AS o").collect()}
    whole = {(r["partition"], r["offset"]): (r["value_decoded"]["OffsetCommitValue"]["offset"]
                                            if r["value_decoded"] and r["value_decoded"]["OffsetCommitValue"] else None)
             for r in df.collect()}
    assert one == whole and any(v is not None for v in one.values())


def test_export_writes_an_internal_topic_typed(spark, tmp_path):
    from kfs.spark.jobs import export

    out = tmp_path / "parquet"
    export([INTERNAL], str(out), spark=spark)
    for topic in TOPICS:
        frame = spark.read.parquet(str(out / f"topic={topic}"))
        value_type = frame.schema["value_decoded"].dataType
        assert isinstance(value_type, StructType)
        rows = {(r["partition"], r["offset"]): r for r in frame.collect()}
        for partition, line in expected_lines(INTERNAL, topic):
            row = rows[(partition, line["offset"])]
            if "decode_error" not in line:
                assert_part(row["value_decoded"], line["value"], value_type, f"{topic}-{partition}@{line['offset']}")
