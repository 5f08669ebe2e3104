"""How users write offsets and times: `268`, `earliest`, `latest`, `-K`; milliseconds or ISO-8601."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from kfs.storage.errors import BadSpec

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MILLISECOND = dt.timedelta(milliseconds=1)
_DECIMAL = re.compile(r"^[0-9]+$")
_FROM_END = re.compile(r"^-[0-9]+$")
_INT64_MAX = (1 << 63) - 1
_INT_DIGITS = 4300  # Python's int() reads no longer decimal string (sys.get_int_max_str_digits)


def _number(digits: str) -> int:
    """A string of decimal digits as a number; one longer than Python's int() reads is 2^63 - 1, past
    every offset and time a log holds (Kafka's are int64s; kcat's -o and strtoll saturate there too)."""
    significant = digits.lstrip("0")
    if len(significant) > _INT_DIGITS:
        return _INT64_MAX
    return int(significant or "0")


def resolve_offset_spec(spec: str, log_start_offset: Callable[[], int], log_end_offset: Callable[[], int]) -> int:
    """The offset a name stands for; range checks are the lookup's job (it resolves gaps too).

    The log's ends are asked for only when the name needs them: the log end comes from the live
    segment's index and tail, which a plain offset in a closed segment never touches."""
    if _DECIMAL.match(spec):
        return _number(spec)
    if spec == "earliest":
        return log_start_offset()
    if spec == "latest":
        return log_end_offset() - 1
    if _FROM_END.match(spec):
        return log_end_offset() - _number(spec[1:])  # like kcat's `-o -K`: K before the log end
    raise BadSpec(f"'{spec}' is not an offset (use a number, earliest, latest or -K)")


def parse_time_spec(spec: str) -> int:
    """Milliseconds since the epoch, from a number of milliseconds or an ISO-8601 time (no zone = UTC)."""
    if _DECIMAL.match(spec):
        return _number(spec)
    text = spec.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise BadSpec(f"'{spec}' is not a time (use milliseconds since the epoch or ISO-8601 "
                      "such as 2018-05-15T11:45:18.288Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return (when - _EPOCH) // _MILLISECOND


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def iso_ms(ms: int) -> str:
    """2024-05-01T12:00:00.123Z, or the number itself where it is no time (-1); a time past what a date
    shows (year 9999: a commit timestamp is any int64 its writer chose) is its number, said to be out
    of range, so that one such value never breaks a table or an error message."""
    if ms < 0:
        return str(ms)
    try:
        when = _EPOCH + dt.timedelta(milliseconds=ms)
    except OverflowError:
        return f"{ms} (out of range)"
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
