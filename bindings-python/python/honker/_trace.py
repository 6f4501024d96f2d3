"""W3C trace context around jobs and events (ADR 28), with the OpenTelemetry
API as an optional dependency (``pip install honker[otel]``).

At enqueue and publish, the active span's context is captured as W3C's
``traceparent``/``tracestate`` and stored beside the job or event (never in
its payload), but only if the application has imported OpenTelemetry: a
process that never did has no active span, so honker neither captures nor
imports anything. The worker runtime attaches a job's (or a group event's)
context around its handler, so spans the handler starts continue the
producer's trace; without the OpenTelemetry API installed it does nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_UNSET: Any = object()
_otel: Any = _UNSET  # (context, propagator) once looked up; None when absent
# The module whose presence means the application imported OpenTelemetry.
OTEL_TRACE = "opentelemetry.trace"


def carrier(raw: str | None) -> dict[str, str] | None:
    """The stored JSON as the headers' dict (the carrier OpenTelemetry's
    propagators take), or None."""
    return None if raw is None else json.loads(raw)


def capture() -> tuple[str | None, str | None]:
    """The current span's ``(traceparent, tracestate)``, or ``(None, None)``
    when there is none (or OpenTelemetry was never imported)."""
    trace = sys.modules.get(OTEL_TRACE)
    if trace is None:
        return None, None
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None, None
    parent = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags) & 0xFF:02x}"
    state = ctx.trace_state.to_header() if ctx.trace_state else ""
    # W3C lets a platform drop list members it cannot carry; honker's limit
    # is 8 KiB, and a capture never fails the enqueue.
    if len(state) > 8192 or not state.isascii():
        state = ""
    return parent, state or None


def _api() -> Any:
    global _otel
    if _otel is _UNSET:
        try:
            from opentelemetry import context
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )
        except ImportError:
            _otel = None
        else:
            _otel = (context, TraceContextTextMapPropagator())
    return _otel


@contextmanager
def attached(headers: dict[str, str] | None) -> Iterator[None]:
    """Makes the producer's context current for the block (its span the
    parent of spans started in it), if there is one and OpenTelemetry is
    installed."""
    api = None if headers is None else _api()
    if api is None:
        yield
        return
    context, propagator = api
    token = context.attach(propagator.extract(headers))
    try:
        yield
    finally:
        context.detach(token)
