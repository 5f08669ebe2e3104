"""Structure-aware mutators: v2 batches, legacy v0/v1 messages, index files and partition directories.

A byte flip in a batch only ever tests the CRC check: the batch is then refused before any decoder
sees it. These mutators parse what they damage (header fields, varints of each record, compressed
payloads, inner messages of legacy wrappers), change one structure, re-encode it (recompressing with
the batch's codec) and then recompute the length fields and the CRC, so the damage reaches the
decoders. Every mutator draws from a `random.Random` only: an input is reproducible from its seed.
"""

from __future__ import annotations

import gzip
import random
import struct
import zlib

import cramjam
import crc32c
import lz4.frame
import zstandard

# ---- interesting values ----------------------------------------------------------------------------

INT_EDGES = (0, 1, -1, 2, -2, 7, 8, 63, 64, 127, 128, 255, 256, 2**14 - 1, 2**14, 2**15 - 1, 2**15, 2**16,
             2**31 - 2, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32 - 1, 2**32, 2**53, 2**62,
             2**63 - 1, -(2**63), 2**63 - 2)


def interesting(rnd: random.Random, near: int | None = None, bits: int = 64) -> int:
    """An edge value, a value near `near`, or a random one, fitting a signed `bits`-bit field."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    r = rnd.random()
    if near is not None and r < 0.4:
        v = near + rnd.choice((-1, 1, -2, 2, -7, 7, -128, 128, rnd.randrange(-1000, 1000)))
    elif r < 0.8:
        v = rnd.choice(INT_EDGES)
    else:
        v = rnd.randrange(lo, hi + 1)
    return min(max(v, lo), hi)


def zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63) if -(2**63) <= v < 2**63 else (v << 1 if v >= 0 else (-v << 1) - 1)


def varint(v: int, overlong: int = 0) -> bytes:
    """The zigzag varint of v (any size: a 70-bit value gives 10 bytes), padded with `overlong` 0x80s."""
    u = (v << 1) if v >= 0 else ((-v) << 1) - 1
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u or overlong:
            out.append(b | 0x80)
            if not u:
                overlong -= 1
                if not overlong:
                    out.append(0)
                    return bytes(out)
        else:
            out.append(b)
            return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


# ---- byte-level mutations ---------------------------------------------------------------------------

def mutate_bytes(rnd: random.Random, data: bytes, rounds: int = 1) -> bytes:
    """Flips, arithmetic on 1/2/4/8-byte integers, inserts, deletes, duplicated and truncated ranges."""
    b = bytearray(data)
    for _ in range(rounds):
        op = rnd.randrange(8)
        n = len(b)
        if op == 0 and n:
            b[rnd.randrange(n)] ^= 1 << rnd.randrange(8)
        elif op == 1 and n:
            b[rnd.randrange(n)] = rnd.choice((0, 0xFF, 0x7F, 0x80, 0x81, rnd.randrange(256)))
        elif op == 2 and n >= 8:
            width = rnd.choice((2, 4, 8))
            at = rnd.randrange(n - width + 1)
            fmt = {2: ">h", 4: ">i", 8: ">q"}[width]
            old = struct.unpack_from(fmt, b, at)[0]
            struct.pack_into(fmt, b, at, interesting(rnd, old, width * 8))
        elif op == 3:
            at = rnd.randrange(n + 1)
            b[at:at] = rnd.randbytes(rnd.choice((1, 2, 4, 8, rnd.randrange(1, 64))))
        elif op == 4 and n:
            at = rnd.randrange(n)
            del b[at:at + rnd.choice((1, 2, 4, rnd.randrange(1, 64)))]
        elif op == 5 and n:
            at = rnd.randrange(n)
            end = min(n, at + rnd.randrange(1, 128))
            dest = rnd.randrange(n + 1)
            b[dest:dest] = b[at:end]
        elif op == 6 and n:
            del b[rnd.randrange(n):]
        elif op == 7 and n:
            at = rnd.randrange(n)
            b[at:at + 8] = rnd.randbytes(min(8, n - at))
    return bytes(b)


# ---- compression ------------------------------------------------------------------------------------

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_ZSTD_C = zstandard.ZstdCompressor(write_content_size=False)


def compress(codec: str, data: bytes, rnd: random.Random | None = None) -> bytes:
    """`data` as Kafka's producers compress it (snappy: xerial framing or one raw block)."""
    if codec == "none":
        return data
    if codec == "gzip":
        return gzip.compress(data, compresslevel=1)
    if codec == "snappy":
        raw = bytes(cramjam.snappy.compress_raw(data))
        if rnd is not None and rnd.random() < 0.3:
            return raw
        return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw)) + raw
    if codec == "lz4":
        return lz4.frame.compress(data, block_linked=bool(rnd and rnd.random() < 0.5), content_checksum=False)
    if codec == "zstd":
        return _ZSTD_C.compress(data)
    raise ValueError(codec)


def decompress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    if codec == "gzip":
        return zlib.decompress(data, 31)
    if codec == "snappy":
        if data[:8] == b"\x82SNAPPY\x00":
            out, pos = [], 16
            while pos < len(data):
                (n,) = struct.unpack_from(">i", data, pos)
                out.append(bytes(cramjam.snappy.decompress_raw(data[pos + 4:pos + 4 + n])))
                pos += 4 + n
            return b"".join(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == "lz4":
        return lz4.frame.decompress(data)
    if codec == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    raise ValueError(codec)


def mutate_compressed(rnd: random.Random, codec: str, payload: bytes) -> bytes:
    """Damage inside a compressed payload: its framing fields first, else its bytes."""
    b = bytearray(payload)
    r = rnd.random()
    if codec == "snappy" and b[:8] == b"\x82SNAPPY\x00" and len(b) >= 20 and r < 0.4:
        struct.pack_into(">i", b, 16, interesting(rnd, struct.unpack_from(">i", b, 16)[0], 32))
        return bytes(b)
    if codec == "snappy" and r < 0.6:
        # the raw block's preamble: its claimed uncompressed length
        start = 20 if b[:8] == b"\x82SNAPPY\x00" else 0
        claimed = rnd.choice((0, 1, 2**32 - 1, 2**31, 2**30, rnd.randrange(1 << 32)))
        pre = bytearray()
        while True:
            byte = claimed & 0x7F
            claimed >>= 7
            pre.append(byte | (0x80 if claimed else 0))
            if not claimed:
                break
        try:
            _, end = _uvarint(bytes(b), start)
        except ValueError:
            end = start
        b[start:end] = pre
        return bytes(b)
    if codec == "lz4" and len(b) >= 11 and r < 0.4:
        which = rnd.randrange(3)
        if which == 0:
            b[4] = rnd.randrange(256)  # FLG
        elif which == 1:
            b[5] = rnd.randrange(256)  # BD
        else:
            at = 7 + (8 if b[4] & 0x08 else 0)
            if at + 4 <= len(b):
                struct.pack_into("<I", b, at, rnd.choice((0, 0x80000000 | rnd.randrange(1 << 20),
                                                          rnd.randrange(1 << 32))))
        return bytes(b)
    if r < 0.7:
        return mutate_bytes(rnd, bytes(b), rnd.randrange(1, 4))
    if r < 0.85:
        return bytes(b) + bytes(b)  # two frames / members back to back
    return bytes(b[:rnd.randrange(len(b) + 1)])


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("bad varint")
        c = data[pos]
        pos += 1
        result |= (c & 0x7F) << shift
        if c < 0x80:
            return result, pos
        shift += 7


# ---- v2 record batches ------------------------------------------------------------------------------

V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_FIELDS = ("base_offset", "length", "leader_epoch", "magic", "crc", "attributes", "last_offset_delta",
             "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "count")
V2_BITS = (64, 32, 32, 8, 32, 16, 32, 64, 64, 64, 16, 32, 32)


def parse_v2_records(data: bytes, count: int) -> list[list]:
    """The records section as editable fields: each record is a list of [kind, value] where kind is
    'v' (zigzag varint), 'b' (raw bytes) or 'u8', and record[0] is the Length varint."""
    out = []
    pos = 0
    for _ in range(count):
        length, pos = read_varint(data, pos)
        end = pos + length
        fields: list[list] = [["len", length], ["u8", data[pos]]]
        pos += 1
        for _ in range(2):
            v, pos = read_varint(data, pos)
            fields.append(["v", v])
        for _ in range(2):
            n, pos = read_varint(data, pos)
            fields.append(["v", n])
            if n >= 0:
                fields.append(["b", data[pos:pos + n]])
                pos += n
        n, pos = read_varint(data, pos)
        fields.append(["v", n])
        for _ in range(max(0, n)):
            k, pos = read_varint(data, pos)
            fields.append(["v", k])
            fields.append(["b", data[pos:pos + k]])
            pos += k
            v, pos = read_varint(data, pos)
            fields.append(["v", v])
            if v >= 0:
                fields.append(["b", data[pos:pos + v]])
                pos += v
        if pos != end or pos > len(data):
            raise ValueError("not a well-formed record")
        out.append(fields)
    if pos != len(data):
        raise ValueError("bytes after the records")
    return out


def encode_v2_records(records: list[list], keep_lengths: set[int] = frozenset()) -> bytes:  # type: ignore[assignment]
    out = bytearray()
    for i, fields in enumerate(records):
        body = bytearray()
        for kind, value in fields[1:]:
            if kind == "v":
                body += varint(value)
            elif kind == "vo":  # an overlong varint: (value, padding)
                body += varint(value[0], value[1])
            elif kind == "u8":
                body.append(value & 0xFF)
            else:
                body += value
        length = fields[0][1] if i in keep_lengths else len(body)
        out += varint(length) + body
    return bytes(out)


def mutate_v2_records(rnd: random.Random, records: list[list], donors: list[list]) -> tuple[list[list], set[int]]:
    """One structural change to the records: a varint set to an edge value (its length field recomputed
    or not), an overlong varint, a key/value/header resized, records dropped/duplicated/spliced."""
    records = [list(map(list, r)) for r in records]
    keep: set[int] = set()
    op = rnd.randrange(9)
    if not records or op == 8:
        if donors:
            records.insert(rnd.randrange(len(records) + 1), list(map(list, rnd.choice(donors))))
        return records, keep
    i = rnd.randrange(len(records))
    rec = records[i]
    if op in (0, 1):  # a varint field to an edge value, the record's Length still right
        slots = [j for j, f in enumerate(rec) if f[0] == "v"]
        if slots:
            j = rnd.choice(slots)
            rec[j][1] = interesting(rnd, rec[j][1])
    elif op == 2:  # the record's Length field wrong
        rec[0][1] = interesting(rnd, rec[0][1], 32)
        keep.add(i)
    elif op == 3:  # an overlong (but equal-valued) varint: Kafka's reader takes up to 5/10 bytes
        slots = [j for j, f in enumerate(rec) if f[0] == "v"]
        if slots:
            j = rnd.choice(slots)
            rec[j] = ["vo", (rec[j][1], rnd.randrange(1, 10))]
    elif op == 4:  # a key, value or header byte field resized without its length
        slots = [j for j, f in enumerate(rec) if f[0] == "b"]
        if slots:
            j = rnd.choice(slots)
            v = rec[j][1]
            rec[j][1] = v[:rnd.randrange(len(v) + 1)] if v and rnd.random() < 0.5 else v + rnd.randbytes(
                rnd.randrange(1, 9))
    elif op == 5:
        del records[i]
    elif op == 6:
        records.insert(i, list(map(list, rec)))
    elif op == 7:  # invalid UTF-8 or odd bytes in a key, value or header
        slots = [j for j, f in enumerate(rec) if f[0] == "b"]
        if slots:
            j = rnd.choice(slots)
            rec[j][1] = rnd.choice((b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\x80", b"\x00", b'"\\\n', b"\xe2\x82"))
            rec[j - 1][1] = len(rec[j][1]) if rec[j - 1][0] == "v" else rec[j - 1][1]
    return records, keep


def v2_fields(batch: bytes) -> dict:
    return dict(zip(V2_FIELDS, V2_HEADER.unpack_from(batch, 0), strict=True))


def build_v2(fields: dict, payload: bytes, fix_length: bool = True, fix_crc: bool = True) -> bytes:
    f = dict(fields)
    if fix_length:
        f["length"] = 61 - 12 + len(payload)
    head = bytearray(V2_HEADER.pack(*(f[k] & 0xFFFFFFFF if k == "crc" else _wrap(f[k], bits)
                                      for k, bits in zip(V2_FIELDS, V2_BITS, strict=True))))
    batch = head + payload
    if fix_crc:
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _wrap(v: int, bits: int) -> int:
    """v as the signed `bits`-bit value with the same low bits."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def mutate_v2(rnd: random.Random, batch: bytes, donors: list[list]) -> bytes:
    """A v2 batch with one or two structural changes, CRC recomputed (nearly always)."""
    f = v2_fields(batch)
    codec = CODECS[f["attributes"] & 7] if f["attributes"] & 7 < 5 else "none"
    payload = batch[61:]
    fix_length, fix_crc = True, rnd.random() < 0.97
    try:
        section = decompress(codec, payload)
        records = parse_v2_records(section, f["count"])
    except Exception:
        section, records = payload, None
    for _ in range(rnd.choice((1, 1, 1, 2, 3))):
        r = rnd.random()
        if r < 0.45 and records is not None:
            records, keep = mutate_v2_records(rnd, records, donors)
            section = encode_v2_records(records, keep)
            if rnd.random() < 0.5:
                f["count"] = len(records)
        elif r < 0.55:
            section = mutate_bytes(rnd, section, rnd.randrange(1, 4))
            records = None
        elif r < 0.75:
            name = rnd.choice(("count", "count", "last_offset_delta", "base_timestamp", "max_timestamp",
                               "base_offset", "producer_id", "producer_epoch", "base_sequence", "leader_epoch"))
            bits = V2_BITS[V2_FIELDS.index(name)]
            f[name] = interesting(rnd, f[name], bits)
        elif r < 0.85:
            # attributes: codec bits (incl. 5-7), timestamp type, transactional, control, delete horizon
            bit = rnd.choice((0, 1, 2, 3, 4, 5, 6, 7, 15))
            f["attributes"] = _wrap(f["attributes"] ^ (1 << bit), 16) if bit else rnd.randrange(-(2**15), 2**15)
            if rnd.random() < 0.5 and 0 < f["attributes"] & 7 < 5:
                codec = CODECS[f["attributes"] & 7]  # recompress below with the codec the header names
        elif r < 0.92:
            f["length"] = interesting(rnd, f["length"], 32)
            fix_length = False
        else:
            codec = rnd.choice(CODECS)
            f["attributes"] = (f["attributes"] & ~7) | CODECS.index(codec)
    new_payload = compress(codec, section, rnd) if codec in CODECS else section
    if codec != "none" and rnd.random() < 0.25:
        new_payload = mutate_compressed(rnd, codec, new_payload)
    return build_v2(f, new_payload, fix_length=fix_length, fix_crc=fix_crc)


# ---- legacy v0/v1 messages --------------------------------------------------------------------------

def legacy_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None,
                   value: bytes | None, crc: bool = True) -> bytes:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    c = zlib.crc32(body) if crc else 0
    return struct.pack(">qiI", offset, 4 + len(body), c) + bytes(body)


def parse_legacy(data: bytes, pos: int = 0) -> tuple[dict, int]:
    offset, size, _crc, magic, attributes = struct.unpack_from(">qiIbb", data, pos)
    end = pos + 12 + size
    at = pos + 18
    timestamp = -1
    if magic == 1:
        (timestamp,) = struct.unpack_from(">q", data, at)
        at += 8
    fields: list[bytes | None] = []
    for _ in range(2):
        (n,) = struct.unpack_from(">i", data, at)
        at += 4
        fields.append(None if n < 0 else data[at:at + n])
        at += max(n, 0)
    if at != end or end > len(data):
        raise ValueError("not a well-formed message")
    return {"offset": offset, "magic": magic, "attributes": attributes, "timestamp": timestamp,
            "key": fields[0], "value": fields[1]}, end


def mutate_legacy(rnd: random.Random, data: bytes) -> bytes:
    """A legacy message (or compressed wrapper) with its fields or inner messages changed, CRC recomputed."""
    try:
        msg, _ = parse_legacy(data)
    except Exception:
        return mutate_bytes(rnd, data)
    codec_id = msg["attributes"] & 7
    codec = CODECS[codec_id] if codec_id < 5 else "none"
    r = rnd.random()
    if codec != "none" and msg["value"] is not None and r < 0.6:
        try:
            inner_set = decompress(codec, msg["value"])
            inner = []
            pos = 0
            while pos < len(inner_set):
                m, pos = parse_legacy(inner_set, pos)
                inner.append(m)
        except Exception:
            inner = None
        if inner:
            op = rnd.randrange(7)
            i = rnd.randrange(len(inner))
            m = inner[i]
            raw_size = None
            if op == 0:
                m["offset"] = interesting(rnd, m["offset"])
            elif op == 1:
                m["attributes"] = rnd.choice((1, 2, 3, 4, 8, rnd.randrange(-128, 128)))  # nested compression
            elif op == 2:
                m["magic"] = rnd.choice((0, 1, 2, -1, 5))
            elif op == 3:
                del inner[i]
            elif op == 4:
                inner.insert(i, dict(m))
            elif op == 5:
                raw_size = interesting(rnd, 30, 32)
            else:
                m["value"] = None if rnd.random() < 0.3 else (m["value"] or b"") + rnd.randbytes(3)
            parts = []
            for j, x in enumerate(inner):
                enc = bytearray(legacy_message(x["offset"], x["magic"] if x["magic"] in (0, 1) else 1,
                                               x["attributes"], x["timestamp"], x["key"], x["value"]))
                if x["magic"] not in (0, 1):
                    enc[16] = x["magic"] & 0xFF
                if raw_size is not None and j == i:
                    struct.pack_into(">i", enc, 8, raw_size)
                parts.append(bytes(enc))
            new_set = b"".join(parts)
            value = compress(codec, new_set, rnd)
            if rnd.random() < 0.2:
                value = mutate_compressed(rnd, codec, value)
            msg["value"] = value
    elif r < 0.75:
        msg["attributes"] = rnd.choice((0, 1, 2, 3, 4, 5, 7, 8, 9, rnd.randrange(-128, 128)))
    elif r < 0.85:
        which = rnd.choice(("key", "value"))
        v = msg[which]
        msg[which] = None if v is not None and rnd.random() < 0.3 else (v or b"")[:rnd.randrange(len(v or b"") + 1)]
    elif r < 0.92:
        msg["offset"] = interesting(rnd, msg["offset"])
    else:
        msg["timestamp"] = interesting(rnd, msg["timestamp"])
    out = bytearray(legacy_message(msg["offset"], msg["magic"], msg["attributes"], msg["timestamp"],
                                   msg["key"], msg["value"]))
    if rnd.random() < 0.1:  # the key/value length fields wrong, CRC still right
        at = 18 if msg["magic"] == 0 else 26
        if rnd.random() < 0.5 and len(out) >= at + 4:
            struct.pack_into(">i", out, at, interesting(rnd, struct.unpack_from(">i", out, at)[0], 32))
        struct.pack_into(">I", out, 12, zlib.crc32(bytes(out[16:])))
    if rnd.random() < 0.05:
        struct.pack_into(">i", out, 8, interesting(rnd, len(out) - 12, 32))
    return bytes(out)


def mutate_batch(rnd: random.Random, batch: bytes, donors: list[list]) -> bytes:
    """One batch of any magic, changed by the mutator for its format (or byte-level, rarely)."""
    if len(batch) < 17 or rnd.random() < 0.05:
        return mutate_bytes(rnd, batch, rnd.randrange(1, 4))
    if batch[16] == 2 and len(batch) >= 61:
        return mutate_v2(rnd, batch, donors)
    return mutate_legacy(rnd, batch)


# ---- index files ------------------------------------------------------------------------------------

def mutate_index(rnd: random.Random, data: bytes, entry_size: int, positions: list[int], offsets: list[int],
                 timestamps: list[int], base_offset: int) -> bytes:
    """An .index (8-byte entries) or .timeindex (12-byte entries) with plausible-but-wrong entries:
    positions inside batches or at other batches, offsets and timestamps of other batches, entries
    out of order, dropped, duplicated, zeroed, or the file cut mid-entry."""
    entries = [bytearray(data[i:i + entry_size]) for i in range(0, len(data) - len(data) % entry_size, entry_size)]
    op = rnd.randrange(12)
    if not entries and op < 9:
        op = 9
    if op == 0:  # a position inside a batch, or at another batch
        e = rnd.choice(entries)
        if entry_size == 8:
            p = rnd.choice(positions) if rnd.random() < 0.5 else rnd.randrange(max(1, positions[-1] + 200))
            struct.pack_into(">i", e, 4, p + rnd.choice((0, 0, 1, -1, 12, 17, 61)))
        else:
            struct.pack_into(">q", e, 0, rnd.choice(timestamps) + rnd.choice((0, 0, -1, 1)))
    elif op == 1:  # an offset of another batch
        e = rnd.choice(entries)
        o = rnd.choice(offsets) + rnd.choice((0, 0, 1, -1)) - base_offset
        struct.pack_into(">i", e, 0 if entry_size == 8 else 8, max(-(2**31), min(2**31 - 1, o)))
    elif op == 2 and len(entries) > 1:  # two entries swapped
        i, j = rnd.sample(range(len(entries)), 2)
        entries[i], entries[j] = entries[j], entries[i]
    elif op == 3:
        random_entries = rnd.sample(entries, len(entries))
        entries = random_entries
    elif op == 4:
        del entries[rnd.randrange(len(entries)):]  # a shorter index (entries dropped from the end)
    elif op == 5:
        del entries[rnd.randrange(len(entries))]
    elif op == 6:
        i = rnd.randrange(len(entries))
        entries.insert(i, bytearray(entries[i]))
    elif op == 7:
        entries[rnd.randrange(len(entries))] = bytearray(entry_size)
    elif op == 8:
        e = rnd.choice(entries)
        e[:] = mutate_bytes(rnd, bytes(e))[:entry_size].ljust(entry_size, b"\0")
    elif op == 9:  # extra entries past the real ones (or in an empty index)
        for _ in range(rnd.randrange(1, 4)):
            if entry_size == 8:
                e = struct.pack(">ii", rnd.choice(offsets) - base_offset, rnd.choice(positions) + rnd.choice((0, 5)))
            else:
                e = struct.pack(">qi", rnd.choice(timestamps), rnd.choice(offsets) - base_offset)
            entries.append(bytearray(e))
    elif op == 10:  # preallocated: a zero tail
        entries += [bytearray(entry_size)] * rnd.randrange(1, 40)
    out = b"".join(entries)
    if op == 11:
        out = mutate_bytes(rnd, out, rnd.randrange(1, 3))  # may cut mid-entry
    return out


def mutate_txn_index(rnd: random.Random, data: bytes, offsets: list[int]) -> bytes:
    """A .txnindex (34-byte entries: version int16, producer id, first, last, last stable offset)."""
    entries = [bytearray(data[i:i + 34]) for i in range(0, len(data) - len(data) % 34, 34)]
    op = rnd.randrange(5)
    if op == 0 or not entries:
        entries.append(bytearray(struct.pack(">hqqqq", rnd.choice((0, 1, -1)), rnd.choice((0, 1, 1000, -1)),
                                             rnd.choice(offsets), rnd.choice(offsets), rnd.choice(offsets))))
    elif op == 1:
        e = rnd.choice(entries)
        at = rnd.choice((0, 2, 10, 18, 26))
        if at == 0:
            struct.pack_into(">h", e, 0, interesting(rnd, 0, 16))
        else:
            struct.pack_into(">q", e, at, interesting(rnd, struct.unpack_from(">q", e, at)[0]))
    elif op == 2:
        del entries[rnd.randrange(len(entries))]
    out = b"".join(entries)
    if op >= 3:
        out = mutate_bytes(rnd, out)
    return out
