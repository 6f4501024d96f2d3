"""Arguments checked before the native call, so that a bad one is an
:class:`InvalidArgument` naming the parameter and what it got — not the
``OverflowError``/``TypeError``/``AttributeError`` the conversion would raise.
Ranges are the native types'; the meaning (a positive id, at least one
attempt) is checked by core, the same on every surface."""

from __future__ import annotations

from typing import Any

from ._time import Seconds, seconds, show
from .errors import InvalidArgument

U32 = (0, 2**32 - 1)
# max_attempts: core's range (limits::MAX_ATTEMPTS), told in core's words;
# tests/test_errors.py fails if the two drift apart.
ATTEMPTS = (1, 1000)
I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)
SIZE = (0, 2**63 - 1)


def _bad(message: str) -> InvalidArgument:
    return InvalidArgument("INVALID_ARGUMENT", message)


def integer(name: str, value: Any, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"{name} must be an int, got {type(value).__name__} {show(value)}")
    lo, hi = bounds
    if not lo <= value <= hi:
        raise _bad(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def optional_integer(name: str, value: Any, bounds: tuple[int, int]) -> int | None:
    return None if value is None else integer(name, value, bounds)


def duration(name: str, value: Seconds) -> float:
    """A duration that must be given (``seconds`` lets None through)."""
    s = seconds(name, value)
    if s is None:
        raise _bad(f"{name} must be a duration, got None")
    return s


def wait(value: Seconds) -> float:
    """A reader's wait between checks: positive (0 would make iterating spin)."""
    s = duration("wait", value)
    if not s > 0:
        raise _bad(f"wait must be positive, got {show(value)} (next(wait=0) polls once)")
    return s


def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _bad(f"{name} must be a str, got {type(value).__name__} {show(value)}")
    return value


def number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(f"{name} must be a number, got {show(value)}")
    return float(value)


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _bad(f"{name} must be a bool, got {show(value)}")
    return value


def optional_text(name: str, value: Any) -> str | None:
    return None if value is None else text(name, value)


def items(name: str, value: Any) -> list:
    """An iterable's items as a list (an enqueue_many's payloads)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise _bad(f"{name} must be a list (or another iterable), got {show(value)}")
    return list(value)


def transaction(tx: Any) -> Any:
    """The native transaction of ``tx=`` (None for none)."""
    if tx is None:
        return None
    from .database import Transaction

    if not isinstance(tx, Transaction):
        raise _bad(
            "tx must be the Transaction of db.transaction() or db.transaction_async(), "
            f"got {type(tx).__name__} {show(tx)}"
        )
    return tx._native
