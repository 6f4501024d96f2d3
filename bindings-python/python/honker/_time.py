"""Time arguments: seconds as numbers, ``timedelta`` or ``datetime``."""

from __future__ import annotations

import datetime as _dt
import reprlib
from typing import Union

from .errors import InvalidArgument

Seconds = Union[int, float, _dt.timedelta]
When = Union[int, float, _dt.datetime]


def show(value: object) -> str:
    """A value in an error message: its repr, cut short and bounded in depth
    (a payload nested thousands deep made ``repr`` a RecursionError)."""
    return _repr.repr(value)


_repr = reprlib.Repr()
_repr.maxlevel = 4
_repr.maxstring = 80
_repr.maxother = 80


def _bad(message: str) -> InvalidArgument:
    # InvalidArgument, not TypeError: every bad input is a honker error
    # with a code (issue 53's fuzzing found TypeErrors here).
    return InvalidArgument("INVALID_ARGUMENT", message)


def seconds(name: str, value: Seconds | None) -> float | None:
    """A duration in seconds, or None."""
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(f"{name} must be seconds (int or float) or a timedelta, got {show(value)}")
    return float(value)


def epoch(name: str, value: When | None) -> float | None:
    """A point in time as seconds since the Unix epoch, or None. A naive
    ``datetime`` is taken as local time, like ``datetime.timestamp()``."""
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        try:
            return value.timestamp()
        except (ValueError, OverflowError, OSError) as e:  # year 1's local time
            raise _bad(f"{name} is out of range: {show(value)} ({e})") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(f"{name} must be a datetime or seconds since the Unix epoch, got {show(value)}")
    return float(value)


def from_ms(ms: int | None) -> _dt.datetime | None:
    """Milliseconds since the epoch as an aware UTC ``datetime``."""
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)
