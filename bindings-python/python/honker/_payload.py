"""Payloads as Python sees them: JSON text decoded, ``bytes`` as they are.

Jobs, events and notifications all decode here. ``json.loads`` spends most
of its time on a small payload outside the parser (argument checks, two
whitespace regex matches); the stored text is almost always exactly one
JSON value with nothing around it, so the C scanner is called directly and
anything else (surrounding whitespace, invalid text) goes to ``json.loads``,
which decodes it or raises its usual error.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Type checkers see a default (PEP 696): an unparameterised ``Queue`` is
    # ``Queue[Any]``, as before payloads were typed.
    from typing_extensions import TypeVar

    P = TypeVar("P", default=Any)
else:
    from typing import TypeVar

    P = TypeVar("P")  # a payload's type (``Queue[Email]``): types only

_scan = json.JSONDecoder().scan_once


def decode(raw: str | bytes | None) -> Any:
    if isinstance(raw, str):
        try:
            value, end = _scan(raw, 0)
        except StopIteration:
            return json.loads(raw)
        if end == len(raw):
            return value
        return json.loads(raw)
    return raw
