"""Time arguments: seconds as numbers, ``timedelta`` or ``datetime``."""

from __future__ import annotations

import datetime as _dt
from typing import Union

Seconds = Union[int, float, _dt.timedelta]
When = Union[int, float, _dt.datetime]


def seconds(name: str, value: Seconds | None) -> float | None:
    """A duration in seconds, or None."""
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds (int or float) or a timedelta")
    return float(value)


def epoch(name: str, value: When | None) -> float | None:
    """A point in time as seconds since the Unix epoch, or None. A naive
    ``datetime`` is taken as local time, like ``datetime.timestamp()``."""
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a datetime or seconds since the Unix epoch")
    return float(value)


def from_ms(ms: int | None) -> _dt.datetime | None:
    """Milliseconds since the epoch as an aware UTC ``datetime``."""
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)
