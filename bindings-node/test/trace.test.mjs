// W3C trace context (ADR 28): captured from the active OpenTelemetry span
// at enqueue and publish, stored beside the job or event (never in its
// payload), and active again around the Worker's handler. Before the
// application registers OpenTelemetry, honker neither captures nor requires
// anything. (node --test runs each file in its own process: the context
// manager registered here stays in this file.)
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import honker from '../index.js';
import { stopWhen, tempPath } from './helpers.mjs';

const require = createRequire(import.meta.url);
const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const HEADERS = { traceparent: PARENT, tracestate: 'congo=t61rcWkgMzE' };

const otelLoaded = () => Object.keys(require.cache).some((k) => k.includes('@opentelemetry'));

test('before OpenTelemetry is registered, nothing is captured or required', async () => {
  const db = await honker.open(tempPath());
  const q = db.queue('mail');
  await q.enqueue({ to: 'a' });
  await db.stream('orders').publish({ n: 1 });
  const [job] = await q.claimBatch('w', 1);
  assert.equal(job.traceContext, null);
  assert.equal((await db.stream('orders').read({ after: 0, limit: 1 }))[0].traceContext, null);
  assert.equal(otelLoaded(), false);
  await db.close();
});

test('a traced enqueue and publish reach the handlers, which run in the producer trace', async () => {
  const { context, trace, createTraceState } = require('@opentelemetry/api');
  const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const span = trace.wrapSpanContext({
    traceId: TRACE_ID,
    spanId: SPAN_ID,
    traceFlags: 1,
    traceState: createTraceState('congo=t61rcWkgMzE'),
  });
  const db = await honker.open(tempPath());
  const q = db.queue('mail');
  const s = db.stream('orders');
  await context.with(trace.setSpan(context.active(), span), async () => {
    await q.enqueue({ n: 1 });
    await s.publish({ n: 1 });
    await s.publishMany([{ n: 2 }, { n: 3 }]);
  });
  await q.enqueue({ n: 2 }); // outside the span
  const [[stored]] = (await db.query('SELECT trace_context FROM _honker_jobs ORDER BY id')).map((r) => Object.values(r));
  assert.deepEqual(JSON.parse(stored), HEADERS);
  assert.deepEqual(
    (await s.read({ after: 0, limit: 10 })).map((e) => e.traceContext),
    [HEADERS, HEADERS, HEADERS],
  );
  assert.deepEqual((await q.getJob(1)).traceContext, HEADERS);

  await s.group('billing').create();
  const seen = {};
  const active = () => trace.getSpanContext(context.active()) ?? null;
  const w = new honker.Worker(db);
  w.handle('mail', async (job) => {
    await sleep(1); // across an await, as a real handler
    const sc = active();
    seen[`job${job.payload.n}`] = sc && [sc.traceId, sc.spanId, sc.isRemote, sc.traceState?.serialize()];
  });
  w.handle(s.group('billing'), async (event) => {
    seen[`event${event.payload.n}`] = active()?.traceId ?? null;
  });
  stopWhen(w, () => Object.keys(seen).length === 5);
  await w.run();
  assert.deepEqual(seen.job1, [TRACE_ID, SPAN_ID, true, 'congo=t61rcWkgMzE']);
  assert.equal(seen.job2, null, 'a job without a context runs outside any trace');
  assert.deepEqual([seen.event1, seen.event2, seen.event3], [TRACE_ID, TRACE_ID, TRACE_ID]);
  assert.equal(active(), null, 'nothing leaks into the caller');
  await db.close();
});
