"""Decoded keys and values as JSON: kfs's JSON lines (docs/spec.md section 8), and Kafka's own text.

In JSON lines a key or value is `{"type": NAME, "version": V, "data": {...}}`, written like the rest
of the line (`", "` and `": "`, UTF-8 kept), bytes as section 3 shows them: a string when UTF-8,
else `{"base64": "..."}`.

`kafka_json` writes what Jackson's `ObjectNode.toString()` writes for the node Kafka's generated
JsonConverter builds (DumpLogSegments prints it): no spaces, UTF-8 kept, bytes as standard
padded base64 strings (Jackson's BinaryNode), doubles as Java's `Double.toString`.
"""

from __future__ import annotations

import base64
import json
import math
from decimal import Decimal
from typing import Any

from kfs.internal_topics.framing import Decoded


def _section3_bytes(value: object) -> object:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    raise TypeError(f"cannot render {type(value).__name__}")


_JSONL = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_section3_bytes)  # made once: C-encoded


def jsonl(decoded: Decoded | None) -> str:
    """A decoded key or value as it appears in a JSON line; `null` for None."""
    if decoded is None:
        return "null"
    try:
        data = _JSONL.encode(decoded.data)
    except ValueError:  # a float64 that is NaN or infinite: a string, as Jackson quotes them
        data = json.dumps(_quote_non_finite(decoded.data), ensure_ascii=False, default=_section3_bytes)
    # Schema names are identifiers: no escaping needed.
    return '{"type": "' + decoded.type + '", "version": ' + str(decoded.version) + ', "data": ' + data + "}"


def _jackson_bytes(value: object) -> object:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot render {type(value).__name__}")


def java_double(x: float) -> str:
    """Java's Double.toString: the shortest digits that round-trip (as Python's repr), written plain
    for 1e-3 <= |x| < 1e7 and as d.dddE<n> outside."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    _sign, digit_tuple, exponent = Decimal(repr(x)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    exponent = int(exponent) + len("".join(map(str, digit_tuple))) - 1  # of the first digit
    sign = "-" if x < 0 else ""
    if 1e-3 <= abs(x) < 1e7:
        if exponent >= 0:
            whole, fraction = digits[:exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1:]
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def kafka_json(obj: Any) -> str:
    """`obj` (decoded data, or a wrapper around it) as Jackson prints Kafka's JSON converters' output."""
    floats: list[str] = []
    text = json.dumps(_mark_floats(obj, floats), ensure_ascii=False, separators=(",", ":"), default=_jackson_bytes)
    for i, java in enumerate(floats):
        text = text.replace(f'"\\u0000{i}\\u0000"', java, 1)
    return text


def _mark_floats(obj: Any, floats: list[str]) -> Any:
    """Floats replaced by markers that kafka_json swaps for Java's text (json writes Python's)."""
    if isinstance(obj, float):
        java = java_double(obj)
        floats.append(java if math.isfinite(obj) else f'"{java}"')  # Jackson quotes NaN and the infinities
        return f"\0{len(floats) - 1}\0"
    if isinstance(obj, dict):
        return {k: _mark_floats(v, floats) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mark_floats(v, floats) for v in obj]
    return obj


def _quote_non_finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return java_double(obj)
    if isinstance(obj, dict):
        return {k: _quote_non_finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_quote_non_finite(v) for v in obj]
    return obj
