"""What the ORM integrations (honker.sqlalchemy, honker.django) share: the
``honker_queue_enqueue``, ``honker_stream_append`` and ``honker_notify`` calls
for the bindings' options (with the active OpenTelemetry span's trace
context, as ``Queue.enqueue`` captures it), and honker's exception for a SQL
error that carries a honker code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._time import Seconds, When, epoch, seconds
from ._trace import capture
from .errors import HonkerError, class_for_code


def _payload(payload: Any) -> Any:
    """Bytes-like payloads as BLOBs, anything else as JSON text."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def publish_call(
    stream: str,
    payload: Any,
    *,
    key: str | None,
    idempotency_key: str | None,
    placeholder: str = "?",
) -> tuple[str, list[Any]]:
    """The ``SELECT honker_stream_append(...)`` statement for
    ``Stream.publish``'s options (it returns the event's offset)."""
    options = {
        k: v
        for k, v in (("key", key), ("idempotency_key", idempotency_key), *_trace_options())
        if v is not None
    }
    p = placeholder
    return f"SELECT honker_stream_append({p}, {p}, {p})", [
        stream,
        _payload(payload),
        json.dumps(options),
    ]


def _trace_options() -> tuple[tuple[str, str | None], ...]:
    """The active OpenTelemetry span's context as the functions' options."""
    parent, state = capture()
    return (("traceparent", parent), ("tracestate", state))


def notify_call(channel: str, payload: Any, placeholder: str = "?") -> tuple[str, list[Any]]:
    """The ``SELECT honker_notify(...)`` statement (it returns the id)."""
    p = placeholder
    return f"SELECT honker_notify({p}, {p})", [channel, _payload(payload)]


def enqueue_call(
    queue: str,
    payload: Any,
    *,
    delay: Seconds | None,
    run_at: When | None,
    priority: int,
    max_attempts: int,
    dedupe_key: str | None,
    expires: Seconds | None,
    placeholder: str = "?",
) -> tuple[str, list[Any]]:
    """The ``SELECT honker_queue_enqueue(...)`` statement and its parameters
    (docs/sql.md), with the driver's placeholder. Bytes-like payloads are
    stored as BLOBs, anything else as JSON text (as ``Queue.enqueue``)."""
    value = _payload(payload)
    options: dict[str, Any] = {"priority": priority, "max_attempts": max_attempts}
    at = epoch("run_at", run_at)
    if at is not None:
        options["run_at"] = round(at * 1000)
    for key, secs in (
        ("delay_ms", seconds("delay", delay)),
        ("expires_ms", seconds("expires", expires)),
    ):
        if secs is not None:
            options[key] = secs * 1000
    if dedupe_key is not None:
        options["dedupe_key"] = dedupe_key
    options.update((k, v) for k, v in _trace_options() if v is not None)
    sql = f"SELECT honker_queue_enqueue({placeholder}, {placeholder}, {placeholder})"
    return sql, [queue, value, json.dumps(options)]


@contextmanager
def honker_errors() -> Iterator[None]:
    """Raises a driver error that carries a honker code as that code's
    exception (the driver's error as its cause); others pass unchanged."""
    try:
        yield
    except Exception as e:
        mapped = honker_error(e)
        if mapped is e:
            raise
        raise mapped from e


def honker_error(e: BaseException) -> BaseException:
    """A driver error (or its ``__cause__``/``orig``) whose message starts
    with a honker code, as that code's exception; anything else unchanged."""
    for candidate in (getattr(e, "orig", None), e.__cause__, e):
        if candidate is None:
            continue
        code, sep, message = str(candidate).partition(": ")
        cls = class_for_code(code) if sep else HonkerError
        if cls is not HonkerError:
            return cls(code, message)
    return e
