'use strict';
// W3C trace context (ADR 28) from the OpenTelemetry API, when the app has it.

// With the OpenTelemetry API (@opentelemetry/api, an optional peer
// dependency), enqueue and publish capture the active span's context beside
// the job or event (never in its payload), and the Worker makes it active
// around the handler. honker looks for the API only once the application
// has registered OpenTelemetry (a context manager, a tracer provider: the
// API's global registry exists then); before that no span can be active,
// so nothing is captured or required. Without the package, nothing happens.

const OTEL_REGISTRY = Symbol.for('opentelemetry.js.api.1');
let otelApi; // undefined: not looked up yet; null: not installed

function otel() {
  if (otelApi === undefined) {
    try {
      otelApi = require('@opentelemetry/api');
    } catch {
      otelApi = null;
    }
  }
  return otelApi;
}

/** The stored JSON as the W3C headers' carrier object, or null. */
function traceContext(json) {
  return json === null || json === undefined ? null : JSON.parse(json);
}

/** The active span's { traceparent, tracestate }, or {} when there is none. */
function captureTrace() {
  if (!globalThis[OTEL_REGISTRY]) return {};
  const api = otel();
  if (!api) return {};
  const sc = api.trace.getSpanContext(api.context.active());
  if (!sc || !api.isSpanContextValid(sc)) return {};
  const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, '0');
  let state = sc.traceState ? sc.traceState.serialize() : '';
  // W3C lets a platform drop what it cannot carry; a capture never fails
  // the enqueue (honker keeps up to 8 KiB of printable ASCII).
  if (state.length > 8192 || !/^[\x20-\x7e]*$/.test(state)) state = '';
  return { traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}`, tracestate: state || undefined };
}

/** Runs `fn` with the producer's context active (its span the parent of
 * the spans `fn` starts), when there is one and the API is installed. */
function withTrace(headers, fn) {
  if (!headers) return fn();
  const api = otel();
  if (!api) return fn();
  const [, traceId, spanId, flags] = headers.traceparent.split('-');
  const spanContext = {
    traceId,
    spanId,
    traceFlags: parseInt(flags, 16) & 0xff,
    isRemote: true,
    traceState: headers.tracestate && api.createTraceState ? api.createTraceState(headers.tracestate) : undefined,
  };
  return api.context.with(api.trace.setSpanContext(api.context.active(), spanContext), fn);
}

module.exports = {
  captureTrace,
  traceContext,
  withTrace,
};
