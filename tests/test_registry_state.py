"""The registry's state rebuilt from `_schemas` records as Confluent Schema Registry's KafkaStore
reader (and Karapace) replay them: keys by content, last value wins, tombstones, soft deletes,
DELETE_SUBJECT, CLEAR_SUBJECT, records that play no part, records the registry would not take."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conftest import run_kfs, v2_batch, write_segment

from kfs.registry import Registry
from kfs.registry.decode import PayloadError
from kfs.registry.state import RegistryState

AVRO_INT = json.dumps({"type": "record", "name": "R", "fields": [{"name": "v", "type": "int"}]})
AVRO_STR = json.dumps({"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]})


def key(subject: str, version: int, karapace: bool = False) -> bytes:
    if karapace:
        return json.dumps({"subject": subject, "version": version, "magic": 1, "keytype": "SCHEMA"}).encode()
    return json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1},
                      separators=(",", ":")).encode()


def value(subject: str, version: int, schema_id: int, schema: str = AVRO_INT, deleted: bool = False,
          **extra: object) -> bytes:
    return json.dumps({"subject": subject, "version": version, "id": schema_id, **extra, "schema": schema,
                       "deleted": deleted}).encode()


def listing(state: RegistryState) -> list[tuple[str, int, int, bool]]:
    return [(s.subject, s.version, s.id, s.deleted) for s in state.listing()]


def test_last_value_wins_in_any_key_field_order() -> None:
    state = RegistryState()
    state.apply(key("a-value", 1), value("a-value", 1, 1))
    state.apply(key("a-value", 1, karapace=True), value("a-value", 1, 1, deleted=True))
    assert listing(state) == [("a-value", 1, 1, True)]


def test_hard_delete_removes_the_version_but_old_records_decode() -> None:
    state = RegistryState()
    state.apply(key("a-value", 1), value("a-value", 1, 7))
    state.apply(key("a-value", 1), value("a-value", 1, 7, deleted=True))
    state.apply(key("a-value", 1), None)
    state.apply(key("a-value", 1, karapace=True), b"")  # Karapace's empty tombstone: the same
    assert listing(state) == []
    text, schema = Registry(state).decode(b"\x00\x00\x00\x00\x07\x54", "a-value")
    assert json.loads(text) == {"v": 42}
    assert json.loads(schema) == {"id": 7, "subject": "a-value", "version": 1, "type": "AVRO"}


def test_delete_subject_soft_deletes_up_to_its_version_and_clear_subject_drops_them() -> None:
    state = RegistryState()
    for v in (1, 2, 3):
        state.apply(key("s", v), value("s", v, 10 + v))
    state.apply(b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}', b'{"subject":"s","version":2}')
    assert listing(state) == [("s", 1, 11, True), ("s", 2, 12, True), ("s", 3, 13, False)]
    state.apply(b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}', b'{"subject":"s"}')
    assert listing(state) == [("s", 3, 13, False)]
    assert sorted(state.by_id) == [11, 12, 13]  # every id still decodes


def test_records_without_a_part_in_decoding_are_read_and_ignored() -> None:
    state = RegistryState()
    for k, v in [(b'{"keytype":"NOOP","magic":0}', None),
                 (b'{"keytype":"CONFIG","magic":0}', b'{"compatibilityLevel":"BACKWARD"}'),
                 (b'{"keytype":"CONFIG","subject":"x","magic":0}', None),
                 (b'{"keytype":"MODE","magic":0}', b'{"mode":"IMPORT"}'),
                 (b'{"keytype":"CONTEXT","tenant":"default","context":".c"}', b'{}')]:
        state.apply(k, v)
    assert listing(state) == [] and state.skipped == 0


def test_records_the_registry_would_not_take_are_skipped() -> None:
    state = RegistryState()
    state.apply(key("a", 1), value("a", 1, 1))
    for k, v in [(b"not json", b"{}"), (None, b"{}"), (b'{"magic":1}', b"{}"),
                 (b'{"keytype":"SCHEMA","subject":"b"}', b"{}"), (key("b", 1), b"[1]"), (key("b", 1), b"{bad"),
                 (key("c", 1), value("c", 1, 1, AVRO_STR)),  # a known id for another schema
                 (key("d", 1), value("d", 1, 2, schemaType="XML")),
                 (b'{"keytype":"WHAT"}', b"{}")]:
        state.apply(k, v)
    assert state.skipped == 9
    assert listing(state) == [("a", 1, 1, False)]


def test_schema_types_and_references() -> None:
    state = RegistryState()
    state.apply(key("leaf", 1), value("leaf", 1, 1, json.dumps(
        {"type": "record", "name": "Leaf", "namespace": "n", "fields": [{"name": "x", "type": "long"}]})))
    state.apply(key("root-value", 1), value("root-value", 1, 2, json.dumps(
        {"type": "record", "name": "Root", "namespace": "n", "fields": [{"name": "leaf", "type": "n.Leaf"}]}),
        schemaType="AVRO", references=[{"name": "n.Leaf", "subject": "leaf", "version": 1}]))
    state.apply(key("j-value", 1), value("j-value", 1, 3, '{"type":"object"}', schemaType="JSON"))
    state.apply(key("dangling-value", 1), value("dangling-value", 1, 4, AVRO_INT,
                                                references=[{"name": "x", "subject": "nowhere", "version": 9}]))
    registry = Registry(state)
    assert json.loads(registry.decode(b"\x00\x00\x00\x00\x02\x0e", "root-value")[0]) == {"leaf": {"x": 7}}
    assert json.loads(registry.decode(b'\x00\x00\x00\x00\x03{"a": [1, 2.5]}', "j-value")[0]) == {"a": [1, 2.5]}
    try:
        registry.decode(b"\x00\x00\x00\x00\x04\x02", "dangling-value")
        raise AssertionError("a dangling reference decoded")
    except PayloadError as e:
        assert "schema id 4" in str(e) and "nowhere" in str(e)
    assert [s.listing()["references"] for s in state.listing() if s.subject == "root-value"] == \
        [[{"name": "n.Leaf", "subject": "leaf", "version": 1}]]


def test_digest_follows_every_record() -> None:
    a, b = RegistryState(), RegistryState()
    a.apply(key("a", 1), value("a", 1, 1))
    b.apply(key("a", 1), value("a", 1, 1))
    assert a.digest() == b.digest()
    b.apply(b'{"keytype":"NOOP","magic":0}', None)
    assert a.digest() != b.digest()


def test_a_later_schema_makes_an_old_record_decodable(tmp_path: Path) -> None:
    """`kfs cat` rebuilds the state from the log as it is: a record written before its schema was
    registered (or with a registry topic copied later) decodes once the schema is there."""
    logdir = tmp_path / "logdir"
    (logdir / "t-0").mkdir(parents=True)
    (logdir / "_schemas-0").mkdir()
    (logdir / "meta.properties").write_text("version=1\nnode.id=1\n")
    records = [(0, 1000, None, b"\x00\x00\x00\x00\x05\x54", [])]
    write_segment(str(logdir / "t-0"), 0, [[(v2_batch(0, records), records)]], closed=False)
    noop = [(0, 1000, b'{"keytype":"NOOP","magic":0}', None, [])]
    write_segment(str(logdir / "_schemas-0"), 0, [[(v2_batch(0, noop), noop)]], closed=False)
    line = json.loads(run_kfs("cat", str(logdir), "t-0").stdout)
    assert line["value_decode_error"] == "schema id 5: not in the schema registry"
    os.remove(logdir / "_schemas-0" / f"{0:020d}.log")
    schema = [(0, 1000, key("t-value", 1), value("t-value", 1, 5), [])]
    write_segment(str(logdir / "_schemas-0"), 0, [[(v2_batch(0, schema), schema)]], closed=False)
    line = json.loads(run_kfs("cat", str(logdir), "t-0").stdout)
    assert line["value"] == {"v": 42} and line["value_schema"]["subject"] == "t-value"


def test_long_keys_are_not_taken_for_framed(tmp_path: Path) -> None:
    """A key of Kafka's LongSerializer (8 bytes, the first five zero below 2^32) beside framed values:
    id 0 is no registry's, so the key keeps section 3's rendering without a key_decode_error."""
    logdir = tmp_path / "logdir"
    (logdir / "t-0").mkdir(parents=True)
    (logdir / "_schemas-0").mkdir()
    (logdir / "meta.properties").write_text("version=1\nnode.id=1\n")
    records = [(0, 1000, (23).to_bytes(8, "big"), b"\x00\x00\x00\x00\x05\x54", [])]
    write_segment(str(logdir / "t-0"), 0, [[(v2_batch(0, records), records)]], closed=False)
    schema = [(0, 1000, key("t-value", 1), value("t-value", 1, 5), [])]
    write_segment(str(logdir / "_schemas-0"), 0, [[(v2_batch(0, schema), schema)]], closed=False)
    line = json.loads(run_kfs("cat", str(logdir), "t-0").stdout)
    assert line["value"] == {"v": 42} and line["key"] == "\x00" * 7 + "\x17"  # (valid UTF-8: a string)
    assert "key_decode_error" not in line and "key_schema" not in line


# `_schemas` values without `md5`, with metadata and rule sets, and the GUID Confluent Schema Registry gives
# each: printed by its own entity classes (Metadata, RuleSet, Rule, SchemaReference and their updateHash,
# from confluentinc/schema-registry 794611bd86d) through fixtures/schema-registry/java/SchemaGuid.java
GUID_VALUES = [
    ({"schema": '"string"'}, "095d71cf-1255-6b9d-5e33-0ad575b3df5d"),
    ({"schema": '{"type":"string"}', "metadata": {"properties": {"owner": "team-b", "app": "x"}}},
     "3838fb55-bae5-f476-5b05-f8fb3e20e916"),
    ({"schema": '"long"', "references": [{"name": "r.avsc", "subject": "r", "version": 2}],
      "metadata": {"tags": {"f.b": ["PII", "A"], "f.a": ["Z"]},
                   "properties": {"é": "1", "z": "2", "\U0001f600": "3", "\ufffd": "4"}, "sensitive": ["s2", "s1"]},
      "ruleSet": {"domainRules": [{"name": "checkLen", "kind": "CONDITION", "mode": "WRITE", "type": "CEL",
                                   "expr": "size(message.x) < 10", "tags": ["b", "a"],
                                   "params": {"k2": "v2", "k1": "v1"}, "onFailure": "DLQ", "disabled": True}],
                  "migrationRules": [{"name": "up", "mode": "UPGRADE", "type": "JSONATA", "expr": "$"}]}},
     "16f8d644-4875-37ab-08f4-1139457ae710"),
    ({"schema": '"int"', "metadata": {}}, "1d1d1f70-2ee5-5e03-8ce5-4f3b6703c50f"),
    ({"schema": '"int"', "ruleSet": {"encodingRules": [{"name": "enc", "type": "ENCRYPT",
                                                        "params": {"encrypt.kek.name": "k"}}], "enableAt": "CLIENT"}},
     "2bcfa194-b70e-e237-4ac2-35f51e25109d"),
]


def test_guids_of_schemas_with_metadata_and_rule_sets_are_the_registrys() -> None:
    """A value without `md5` is named by the GUID the registry computes (MD5.ofSchema): its text and
    references, then its metadata (tags, properties, sensitive names, sorted as Java sorts strings: by
    UTF-16 code units, so U+1F600 before U+FFFD) and rule set (each rule's fields, defaults for kind and
    mode); a payload framed with that GUID decodes."""
    import uuid

    state = RegistryState()
    for version, (extra, guid) in enumerate(GUID_VALUES, start=1):
        fields = {k: v for k, v in extra.items() if k != "schema"}
        state.apply(key("g-value", version), value("g-value", version, 10 + version, extra["schema"], **fields))
        assert state.versions[("g-value", version)].guid == uuid.UUID(guid).bytes
    text, schema = Registry(state).decode(b"\x01" + uuid.UUID(GUID_VALUES[1][1]).bytes + b"\x06abc", "g-value")
    assert json.loads(text) == "abc"
    assert json.loads(schema)["id"] == 12
