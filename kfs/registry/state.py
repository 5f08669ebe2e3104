"""The schema registry's state, rebuilt from its `_schemas` records as the registry itself rebuilds it.

Confluent Schema Registry (its `KafkaStore` reader and `KafkaStoreMessageHandler`) and Karapace
replay the compacted topic in offset order into a key-value store; kfs does the same, so that
`kfs schemas` lists what the registry would serve and every framed record finds its schema:

- a key is its parsed JSON (`keytype`, `subject`, `version`, ...): Karapace's older key field order
  is the same key; the last value of a key wins and a tombstone (null, or Karapace's empty value)
  removes it (a hard delete of a `SCHEMA` key);
- `"deleted": true` is a soft delete; a `DELETE_SUBJECT` record soft-deletes the subject's versions
  up to its `version`; a `CLEAR_SUBJECT` record drops the subject's soft-deleted versions;
- a `SCHEMA` value that reuses a known id for another schema text is ignored, as the registry
  ignores it (its validateUpdate);
- `CONFIG`, `MODE`, `NOOP`, `CONTEXT` and association records are read and play no part in
  decoding.

For decoding, an id resolves to the schema last registered under it whatever its deletion state
(`by_id`): a hard delete removes the version from the listing, not the id, since the record that
registered it may still be in the log (docs/spec.md section 9: old records stay readable).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("kfs")

SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")


class RegistryRecordError(ValueError):
    """A `_schemas` record the registry would not take: one sentence (logged, never raised to a reader)."""


@dataclass(frozen=True)
class Reference:
    """A schema reference: the name the schema imports it by, and the subject version holding it."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class SchemaVersion:
    """One registered subject version, as the registry's `SchemaValue` holds it."""

    subject: str
    version: int
    id: int
    type: str  # AVRO, PROTOBUF or JSON
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False
    guid: bytes | None = None  # the registry's GUID of the schema (its MD5), by which newer clients name it

    def listing(self) -> dict[str, Any]:
        """`kfs schemas --json`'s object for this version."""
        return {"subject": self.subject, "version": self.version, "id": self.id, "type": self.type,
                "deleted": self.deleted,
                "references": [{"name": r.name, "subject": r.subject, "version": r.version} for r in self.references],
                "schema": self.schema}


def parse_key(data: bytes | None) -> tuple[Any, ...]:
    """A `_schemas` key as a tuple that compares equal for the same key in any field order."""
    if data is None:
        raise RegistryRecordError("the key is null")
    try:
        key = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise RegistryRecordError(f"the key is not JSON ({e})") from None
    if not isinstance(key, dict) or not isinstance(key.get("keytype"), str):
        raise RegistryRecordError("the key has no keytype")
    keytype = key["keytype"]
    if keytype == "SCHEMA":
        subject, version = key.get("subject"), key.get("version")
        if not isinstance(subject, str) or not isinstance(version, int) or isinstance(version, bool):
            raise RegistryRecordError("a SCHEMA key without a subject and a version")
        return ("SCHEMA", subject, version)
    if keytype in ("CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT"):
        return (keytype, key.get("subject"))
    if keytype == "CONTEXT":
        return (keytype, key.get("tenant"), key.get("context"))
    if keytype in ("NOOP", "ASSOC"):
        return (keytype, json.dumps(key, sort_keys=True))
    raise RegistryRecordError(f"unknown keytype {keytype!r}")


def parse_value(data: bytes | None) -> dict[str, Any] | None:
    """A value as a JSON object; None for a tombstone (null, or Karapace's empty or `null` value)."""
    if data is None or data == b"":
        return None
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise RegistryRecordError(f"the value is not JSON ({e})") from None
    if value is None or value == "":
        return None
    if not isinstance(value, dict):
        raise RegistryRecordError("the value is not a JSON object")
    return value


def schema_version(value: dict[str, Any], key: tuple[Any, ...]) -> SchemaVersion:
    """A `SCHEMA` record's value (SchemaValue's fields; `schemaType` absent: AVRO)."""
    subject = value.get("subject", key[1])
    version, schema_id, text = value.get("version", key[2]), value.get("id"), value.get("schema")
    kind = value.get("schemaType") or "AVRO"
    if not isinstance(subject, str) or not isinstance(version, int) or not isinstance(schema_id, int) \
            or isinstance(version, bool) or isinstance(schema_id, bool) or not isinstance(text, str):
        raise RegistryRecordError("a SCHEMA value without subject, version, id and schema")
    if kind not in SCHEMA_TYPES:
        raise RegistryRecordError(f"unknown schemaType {kind!r}")
    references = []
    for ref in value.get("references") or []:
        if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) \
                or not isinstance(ref.get("subject"), str) or not _is_int(ref.get("version")):
            raise RegistryRecordError("a reference without name, subject and version")
        references.append(Reference(ref["name"], ref["subject"], ref["version"]))
    return SchemaVersion(subject, version, schema_id, kind, text, tuple(references), value.get("deleted") is True,
                         schema_guid(value, text, references))


def schema_guid(value: dict[str, Any], text: str, references: list[Reference]) -> bytes | None:
    """The schema's GUID as the registry computes it (MD5.ofSchema): the value's `md5` (base64) when
    it has one, else the MD5 of the schema text, each reference's name, subject and version (int32),
    then, where the value has them, a byte 1 and its `metadata`, a byte 1 and its `ruleSet`, in the
    order of the registry's Schema.updateHash (see _hash_metadata, _hash_rule_set). None where those
    are not the registry's shapes."""
    md5 = value.get("md5")
    if isinstance(md5, str):
        try:
            raw = base64.b64decode(md5, validate=True)
        except ValueError:
            return None
        return raw if len(raw) == 16 else None
    digest = hashlib.md5(text.encode("utf-8"), usedforsecurity=False)
    for ref in references:
        digest.update(ref.name.encode("utf-8") + ref.subject.encode("utf-8")
                      + (ref.version & 0xFFFFFFFF).to_bytes(4, "big"))
    try:
        if value.get("metadata") is not None:
            digest.update(b"\x01" + _hash_metadata(value["metadata"]))
        if value.get("ruleSet") is not None:
            digest.update(b"\x01" + _hash_rule_set(value["ruleSet"]))
    except (TypeError, AttributeError, ValueError):
        return None
    return digest.digest()


def _java_sorted(texts: Any) -> list[str]:
    """Strings in Java's natural order (a TreeSet's, a TreeMap's keys): by UTF-16 code units."""
    return sorted((_text(t) for t in texts), key=lambda t: t.encode("utf-16-be", "surrogatepass"))


def _text(x: object) -> str:
    if not isinstance(x, str):
        raise TypeError("not a string")
    return x


def _utf8(x: object) -> bytes:
    return _text(x).encode("utf-8", "surrogatepass")


def _hash_metadata(metadata: dict[str, Any]) -> bytes:
    """What Metadata.updateHash adds: each tag's name and its sorted values (tags sorted), each property's
    name and value (sorted by name), the sorted sensitive names."""
    out = bytearray()
    tags = metadata.get("tags") or {}
    for name in _java_sorted(tags):
        out += _utf8(name) + b"".join(_utf8(t) for t in _java_sorted(tags[name]))
    properties = metadata.get("properties") or {}
    for name in _java_sorted(properties):
        out += _utf8(name) + _utf8(properties[name])
    for name in _java_sorted(metadata.get("sensitive") or []):
        out += _utf8(name)
    return bytes(out)


def _hash_rule_set(rule_set: dict[str, Any]) -> bytes:
    """What RuleSet.updateHash adds: each migration, domain and encoding rule's fields (Rule.updateHash),
    then the `enableAt` environment's name."""
    out = bytearray()
    for kind in ("migrationRules", "domainRules", "encodingRules"):
        for rule in rule_set.get(kind) or []:
            out += _hash_rule(rule)
    if rule_set.get("enableAt") is not None:
        out += _utf8(rule_set["enableAt"])
    return bytes(out)


def _hash_rule(rule: dict[str, Any]) -> bytes:
    """Rule.updateHash: name, doc, kind (TRANSFORM unless given), mode (WRITEREAD unless given), type, the
    sorted tags, the params sorted by name, expr, onSuccess, onFailure (each where present), a byte 1 if
    disabled."""
    out = bytearray()
    for attr, default in (("name", None), ("doc", None), ("kind", "TRANSFORM"), ("mode", "WRITEREAD"),
                          ("type", None)):
        x = rule.get(attr)
        if x is None:
            x = default
        if x is not None:
            out += _utf8(x)
    out += b"".join(_utf8(t) for t in _java_sorted(rule.get("tags") or []))
    params = rule.get("params") or {}
    for name in _java_sorted(params):
        out += _utf8(name) + _utf8(params[name])
    for attr in ("expr", "onSuccess", "onFailure"):
        if rule.get(attr) is not None:
            out += _utf8(rule[attr])
    if rule.get("disabled") is True:
        out += b"\x01"
    return bytes(out)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass
class RegistryState:
    """The registry's subject versions and the schema behind every id seen (see the module doc)."""

    versions: dict[tuple[str, int], SchemaVersion] = field(default_factory=dict)
    by_id: dict[int, SchemaVersion] = field(default_factory=dict)
    by_guid: dict[bytes, SchemaVersion] = field(default_factory=dict)  # as by_id, by the schema's GUID
    # every subject version a record registered, deleted since or not: references resolve here, as
    # ids do, so a record stays readable after the schema it imports was deleted
    registered: dict[tuple[str, int], SchemaVersion] = field(default_factory=dict)
    skipped: int = 0  # records the registry would not take (each logged)
    sources: list[str] = field(default_factory=list)  # the directories and files it was read from
    _hash: Any = field(default_factory=hashlib.sha256)

    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None, where: str = "") -> None:
        """One record, in offset order. A record the registry would not take is logged and skipped."""
        self._hash.update(len(key_bytes or b"").to_bytes(8, "big") + (key_bytes or b""))
        self._hash.update((-1 if value_bytes is None else len(value_bytes)).to_bytes(8, "big", signed=True)
                          + (value_bytes or b""))
        try:
            key = parse_key(key_bytes)
            value = parse_value(value_bytes)
            self._apply(key, value)
        except RegistryRecordError as e:
            self.skipped += 1
            log.info("schema registry record%s skipped: %s", f" at {where}" if where else "", e)

    def _apply(self, key: tuple[Any, ...], value: dict[str, Any] | None) -> None:
        kind = key[0]
        if kind == "SCHEMA":
            subject_version = (key[1], key[2])
            if value is None:  # a hard delete
                self.versions.pop(subject_version, None)
                return
            schema = schema_version(value, key)
            known = self.by_id.get(schema.id)
            if known is not None and known.schema != schema.schema and known.type == schema.type \
                    and _context(known.subject) == _context(schema.subject):
                raise RegistryRecordError(f"schema id {schema.id} registered again with another schema")
            self.versions[subject_version] = schema
            self.registered[subject_version] = schema
            if _context(schema.subject) == "" or schema.id not in self.by_id:
                self.by_id[schema.id] = schema
                if schema.guid is not None:
                    self.by_guid[schema.guid] = schema
        elif value is None:
            return  # other tombstones change nothing that decoding or the listing use
        elif kind == "DELETE_SUBJECT":
            subject, up_to = value.get("subject", key[1]), value.get("version")
            if not isinstance(subject, str) or not isinstance(up_to, int) or isinstance(up_to, bool):
                raise RegistryRecordError("a DELETE_SUBJECT value without subject and version")
            for (s, v), schema in list(self.versions.items()):
                if s == subject and v <= up_to and not schema.deleted:
                    self.versions[(s, v)] = _soft_deleted(schema)
        elif kind == "CLEAR_SUBJECT":
            subject = value.get("subject", key[1])
            for (s, v), schema in list(self.versions.items()):
                if s == subject and schema.deleted:
                    del self.versions[(s, v)]

    def digest(self) -> str:
        """A digest of every record applied: decoded sizes counted with this state are keyed on it."""
        return self._hash.copy().hexdigest()[:32]

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (a Spark task gets the driver's registry: kfs.spark.broker_local): the running hash,
        which does not pickle, goes as its digest, and a copy's hash starts from that digest."""
        state = dict(self.__dict__)
        state["_hash"] = self.digest()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        digest = state.pop("_hash")
        self.__dict__.update(state)
        self._hash = hashlib.sha256(digest.encode())

    def listing(self) -> list[SchemaVersion]:
        """Every subject version, by subject then version."""
        return [self.versions[k] for k in sorted(self.versions)]

    def version(self, subject: str, version: int) -> SchemaVersion | None:
        """A subject version a reference names: listed, or registered by a record still in the log."""
        return self.versions.get((subject, version)) or self.registered.get((subject, version))

    def subject_of(self, schema_id: int, preferred: str | None = None) -> SchemaVersion | None:
        """The subject version naming `schema_id` in a framed line's `*_schema`: under `preferred`
        (the topic's `<topic>-value` / `-key` subject) if registered there, else the lowest
        (subject, version) holding it, else the version that registered it."""
        if preferred is not None:
            under = [s for (subj, _), s in self.versions.items() if subj == preferred and s.id == schema_id]
            if under:
                return min(under, key=lambda s: s.version)
        holders = sorted(k for k, s in self.versions.items() if s.id == schema_id)
        if holders:
            return self.versions[holders[0]]
        return self.by_id.get(schema_id)


def _soft_deleted(schema: SchemaVersion) -> SchemaVersion:
    return SchemaVersion(schema.subject, schema.version, schema.id, schema.type, schema.schema,
                         schema.references, True, schema.guid)


def _context(subject: str) -> str:
    """A qualified subject's context (`:.ctx:subject`); "" for the default context."""
    if subject.startswith(":."):
        end = subject.find(":", 2)
        if end > 0:
            return subject[2:end]
    return ""
