// The Node surface of tests-interop: one JSON step per line on stdin, one
// JSON answer per line on stdout ({"ok": ...} or {"error": CODE, ...}). The
// step vocabulary is in tests-interop/README.md; every driver implements it.
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { setTimeout } from 'node:timers/promises';
import honker from '../../bindings-node/index.js';

let db = null;
let tx = null; // { tx, done(commit) } while a transaction is open
const listeners = new Map();
const UNSUPPORTED = Symbol('unsupported');

// Core's option names (snake_case in the scenarios) as Node's.
function camelKeys(o = {}) {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k.replace(/_(.)/g, (_, c) => c.toUpperCase()), v]));
}

function queue(s) {
  const options = {};
  if (s.backoff_base_ms !== undefined) options.backoffBase = s.backoff_base_ms;
  if (s.backoff_jitter !== undefined) options.backoffJitter = s.backoff_jitter;
  return db.queue(s.queue, options);
}

const txFor = (s) => (s.in_tx ? tx.tx : undefined);

// A transaction that spans several steps: db.transaction() holds it open
// until commit or rollback resolves the promise it awaits.
function begin() {
  return new Promise((ready) => {
    const finished = db
      .transaction(
        (t) =>
          new Promise((resolve, reject) => {
            ready({ tx: t, commit: resolve, rollback: () => reject(new Error('rollback')) });
          }),
      )
      .catch((e) => {
        if (e.message !== 'rollback') throw e;
      });
    tx = { finished };
  }).then((t) => {
    tx = { ...t, finished: tx.finished };
  });
}

async function run(s) {
  switch (s.op) {
    case 'pid':
      return process.pid;
    case 'open':
      tx = null;
      db = await honker.open(s.path);
      return null;
    case 'close':
      if (db) await db.close();
      db = null;
      return null;
    case 'begin':
      await begin();
      return null;
    case 'commit':
    case 'rollback':
      if (tx) {
        const ending = tx;
        tx = null; // finished either way, also when the commit fails
        if (s.op === 'commit') ending.commit();
        else ending.rollback();
        await ending.finished;
      }
      return null;
    case 'exec':
      if (tx) return (await tx.tx.query(s.sql, s.params ?? [])).map((r) => Object.values(r));
      await db.execute(s.sql, s.params ?? []);
      return null;
  }
  switch (s.op) {
    case 'publish':
      return db.stream(s.stream).publish(s.payload, { ...camelKeys(s.options), tx: txFor(s) });
    case 'consume': {
      const sub = db.stream(s.stream).subscribe(s.consumer, { autoCommit: false, wait: s.wait_ms ?? 1000 });
      const got = [];
      while (got.length < s.n) {
        const e = await sub.nextWithin(s.wait_ms ?? 1000);
        if (!e) break;
        got.push({ offset: e.offset, payload: e.payload });
      }
      if (got.length) await sub.commit(got[got.length - 1].offset);
      await sub.close();
      return got;
    }
    case 'stream_read':
      return (await db.stream(s.stream).read({ limit: 100 })).map((e) => ({ offset: e.offset, key: e.key, priority: e.priority }));
    case 'stream_info': {
      const i = await db.stream(s.stream).info();
      return {
        length: i.length,
        last_offset: i.lastOffset,
        lag: Object.fromEntries(i.consumers.map((c) => [c.consumer, c.lag])),
      };
    }
    case 'notify':
      return db.notify(s.channel, s.payload, { tx: txFor(s) });
    case 'listen':
      listeners.set(s.channel, db.listen(s.channel));
      return null;
    case 'heard': {
      const listener = listeners.get(s.channel);
      const heard = [];
      while (heard.length < s.n) {
        const n = await listener.nextWithin(s.wait_ms ?? 1000);
        if (!n) break;
        heard.push(n.payload);
      }
      return heard;
    }
  }
  if (s.op.startsWith('lock_')) {
    const lock = db.lock(s.name);
    switch (s.op) {
      case 'lock_acquire': {
        const g = s.wait_ms
          ? await lock.acquire(s.owner, { ttl: s.ttl_ms, wait: s.wait_ms })
          : await lock.tryAcquire(s.owner, { ttl: s.ttl_ms, tx: txFor(s) });
        return g === null ? null : { token: g.token };
      }
      case 'lock_renew':
        await lock.renew(s.token, { ttl: s.ttl_ms });
        return null;
      case 'lock_release':
        return lock.release(s.token);
      case 'lock_fence':
        await lock.fence(txFor({ in_tx: true }), s.token);
        return null;
      case 'lock_info': {
        const i = await lock.info();
        return i === null ? null : { owner: i.owner, token: i.token };
      }
    }
    return UNSUPPORTED;
  }
  if (s.op === 'rate_limit_set') {
    await db.rateLimiter(s.name, { limit: s.limit, per: s.per_ms, burst: s.burst ?? 1, update: s.update ?? true });
    return null;
  }
  if (s.op === 'rate_limit_params') {
    let p;
    try {
      p = await (await db.rateLimiter(s.name)).params();
    } catch (e) {
      if (e.code === 'NOT_FOUND') return null;
      throw e;
    }
    return { limit: p.limit, per_ms: p.per, burst: p.burst };
  }
  if (s.op === 'rate_limit_hammer') {
    const rl = await db.rateLimiter(s.name);
    const end = Date.now() + s.for_ms;
    let calls = 0;
    let granted = 0;
    while (Date.now() < end) {
      calls += 1;
      if ((await rl.tryAcquire(s.key ?? '')).allowed) granted += 1;
    }
    return { calls, granted };
  }
  if (s.op === 'rate_limit_try') {
    const d = await (await db.rateLimiter(s.name)).tryAcquire(s.key ?? '', { cost: s.cost ?? 1, tx: txFor(s) });
    return { allowed: d.allowed, remaining: d.remaining, retry_after_ms: d.retryAfterMs };
  }
  if (s.op === 'schedule_add') {
    return db.scheduler().add(s.name, s.schedule, s.queue, s.payload, { timeZone: s.time_zone ?? undefined });
  }
  if (s.op === 'schedule_info') {
    const i = await db.scheduler().get(s.name);
    return i === null ? null : { time_zone: i.timeZone, day_rule: i.dayRule, fires: i.fires, missed: i.missed };
  }
  if (s.op === 'schedule_run') {
    // The scheduler's run(), stopped by its signal as soon as the schedule
    // has fired enough (or the wait is over).
    const sched = db.scheduler();
    const stop = new AbortController();
    const running = sched.run({ signal: stop.signal });
    const deadline = Date.now() + s.wait_ms;
    try {
      for (;;) {
        const { fires } = await sched.get(s.name);
        if (fires >= s.fires || Date.now() > deadline) return { fires, reached: fires >= s.fires };
        // run() failing ends the wait with its error.
        await Promise.race([running, setTimeout(50)]);
      }
    } finally {
      stop.abort();
      await running;
    }
  }
  if (s.op.startsWith('group_')) {
    const g = db.stream(s.stream).group(s.group);
    switch (s.op) {
      case 'group_create':
        return g.create({ maxDeliveries: s.max_deliveries, lease: s.lease_ms });
      case 'group_claim': {
        const events = await g.claim(s.member, { n: s.n ?? 1, lease: s.lease_ms, wait: s.wait_ms ?? 0 });
        return events.map((e) => ({
          offset: e.offset,
          key: e.key,
          deliveries: e.deliveries,
          token: e.token,
          payload: e.payload,
        }));
      }
      case 'group_ack':
        return g.ack({ offset: s.offset, token: s.token }, { tx: txFor(s) });
      case 'group_retry':
        return g.retry({ offset: s.offset, token: s.token }, { error: s.error });
      case 'group_fail':
        await g.fail({ offset: s.offset, token: s.token }, s.error);
        return null;
      case 'group_release':
        await g.release({ offset: s.offset, token: s.token });
        return null;
      case 'group_heartbeat':
        await g.heartbeat({ offset: s.offset, token: s.token });
        return null;
      case 'group_remove_member':
        return g.removeMember(s.member, { force: s.force ?? false });
      case 'group_info': {
        const i = await g.info();
        return {
          next_offset: i.nextOffset,
          lag: i.lag,
          pending: i.pending,
          delivered: i.delivered,
          dead: i.dead,
          members: Object.fromEntries(i.members.map((m) => [m.member, m.holds])),
        };
      }
    }
    return UNSUPPORTED;
  }
  if ((s.op === 'pause' || s.op === 'resume') && s.all) {
    return s.op === 'pause' ? ((await db.pauseAll({ note: s.note })), null) : db.resumeAll();
  }
  const q = queue(s);
  switch (s.op) {
    case 'pause':
      await q.pause({ note: s.note });
      return null;
    case 'resume':
      return q.resume();
    case 'limit_concurrency':
      await q.limitConcurrency({ maxRunning: s.max_running, maxRunningPerKey: s.max_running_per_key });
      return null;
    case 'set_fairness':
      await q.setFairness({ order: s.order, keyLimit: s.key_limit, keyPer: s.key_per_ms, keyBurst: s.key_burst });
      return null;
    case 'configure':
      await q.configure({
        lease: s.lease_ms,
        maxAttempts: s.max_attempts,
        backoffBase: s.backoff_base_ms,
        backoffJitter: s.backoff_jitter,
      });
      return null;
    case 'enqueue': {
      const e = await q.enqueue(s.payload, {
        delay: s.delay_ms,
        priority: s.priority,
        maxAttempts: s.max_attempts,
        dedupeKey: s.dedupe_key,
        dedupeByPayload: s.dedupe_by_payload,
        unique: s.unique,
        uniqueFor: s.unique_for_ms,
        concurrencyKey: s.concurrency_key,
        tx: txFor(s),
      });
      return { id: e.id, existing: e.existing, unique: e.unique };
    }
    case 'claim': {
      const jobs = await q.claimBatch(s.worker, s.n ?? 1, { lease: s.lease_ms, wait: s.wait_ms });
      return jobs.map((j) => ({ id: j.id, token: j.token, attempts: j.attempts, payload: j.payload }));
    }
    // A lease another surface handed over, rebuilt with public API.
    case 'ack':
      await (await q.job(s.id, s.token)).ack({ tx: txFor(s), result: s.result });
      return null;
    case 'retry':
      return (await q.job(s.id, s.token)).retry({ delay: s.delay_ms, error: s.error });
    case 'fail':
      await (await q.job(s.id, s.token)).fail(s.error);
      return null;
    case 'release':
      await (await q.job(s.id, s.token)).release();
      return null;
    case 'heartbeat':
      return (await (await q.job(s.id, s.token)).heartbeat({ extend: s.extend_ms })).getTime();
    case 'requeue_dead':
      return q.requeueDead(s.id);
    case 'requeue_all_dead':
      return q.requeueAllDead();
    case 'purge_dead':
      return q.purgeDead();
    case 'get_result':
      return q.getResult(s.id);
    case 'cancel':
      return q.cancel(s.id, { reason: s.reason });
    case 'get_job': {
      const j = await q.getJob(s.id);
      return {
        state: j.state,
        attempts: j.attempts,
        last_error: j.lastError,
        run_at_ms: j.runAt.getTime(),
        now_ms: Date.now(),
      };
    }
    case 'stats': {
      const st = await q.stats();
      return { ready: st.ready, scheduled: st.scheduled, running: st.running, dead: st.dead, paused: st.paused };
    }
    case 'drain':
      return drain(q, s);
    case 'work':
      return work(s);
    case 'enqueue_traced': {
      // The producer's span, made active as an application's would be.
      const { context, trace, createTraceState } = otel();
      const [, traceId, spanId, flags] = s.traceparent.split('-');
      const span = trace.wrapSpanContext({
        traceId,
        spanId,
        traceFlags: parseInt(flags, 16),
        traceState: s.tracestate ? createTraceState(s.tracestate) : undefined,
      });
      const e = await context.with(trace.setSpan(context.active(), span), () => q.enqueue(s.payload));
      return { id: e.id };
    }
    case 'work_traced':
      return workTraced(q);
  }
  return UNSUPPORTED;
}

// The OpenTelemetry API from bindings-node's dev dependencies (the copy
// honker's index.js finds), with the context manager an application's SDK
// would register.
let otelApi = null;
function otel() {
  if (!otelApi) {
    const require = createRequire(new URL('../../bindings-node/package.json', import.meta.url));
    otelApi = require('@opentelemetry/api');
    const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
    otelApi.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  }
  return otelApi;
}

// Runs honker's Worker until the queue is empty; each handler reports the
// span context active in it.
async function workTraced(q) {
  const { context, trace } = otel();
  const worker = new honker.Worker(db);
  const seen = [];
  worker.handle(q.name, async (job) => {
    await setTimeout(1);
    const sc = trace.getSpanContext(context.active());
    seen.push({
      payload: job.payload,
      trace_id: sc?.traceId ?? null,
      span_id: sc?.spanId ?? null,
      remote: sc?.isRemote ?? null,
      tracestate: sc?.traceState?.serialize() || null,
    });
  });
  const watch = setInterval(async () => {
    const st = await q.stats();
    if (st.ready + st.scheduled + st.running === 0) worker.stop();
  }, 50);
  try {
    await worker.run({ signals: false });
  } finally {
    clearInterval(watch);
  }
  const key = (r) => JSON.stringify(r.payload);
  return seen.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

// Runs honker's Worker on the queue until nothing is left to run: each
// handler sleeps, then records a row (in its own transaction, so that a job
// run twice leaves two rows), and the worker acks.
async function work(s) {
  const worker = new honker.Worker(db, { concurrency: s.concurrency, workerId: s.worker, grace: s.grace_ms ?? 30_000 });
  let done = 0;
  let leaseLost = 0;
  worker.on('lease_lost', () => (leaseLost += 1));
  worker.handle(
    s.queue,
    async (job, signal) => {
      if (s.started) {
        // The harness waits for this row, not for a claim: a job claimed and
        // not yet handed to a handler is only released.
        await db.transaction(async (t) => {
          await t.execute(`INSERT INTO ${s.started} (job_id, attempts) VALUES (?, ?)`, [job.id, job.attempts]);
        });
      }
      const long = s.long_ms !== undefined && job.payload.i === 0;
      try {
        await setTimeout(long ? s.long_ms : s.sleep_ms, undefined, { signal });
      } catch (e) {
        // Told to stop (its job cancelled elsewhere, a timeout, a shutdown).
        if (s.aborted) await db.execute(`INSERT INTO ${s.aborted} (job_id, attempts) VALUES (?, ?)`, [job.id, job.attempts]);
        throw e;
      }
      await db.transaction(async (t) => {
        await t.execute(`INSERT INTO ${s.table} (job_id, attempts, worker) VALUES (?, ?, ?)`, [job.id, job.attempts, s.worker]);
      });
      done += 1;
    },
    { lease: s.lease_ms },
  );
  const q = db.queue(s.queue);
  let skips = -1;
  const watch = setInterval(async () => {
    if (s.skips) {
      // The looks that found the queue's work held by a pause, as the
      // worker reports them, written where the harness reads them.
      const n = worker.paused[s.queue] ?? 0;
      if (n !== skips) {
        skips = n;
        await db.execute(`INSERT OR REPLACE INTO ${s.skips} (worker, n) VALUES (?, ?)`, [s.worker, n]);
      }
    }
    if (s.until !== undefined) {
      const [[count]] = (await db.query(`SELECT count(*) AS n FROM ${s.table}`)).map((r) => [r.n]);
      if (count >= s.until) worker.stop();
      return;
    }
    const st = await q.stats();
    if (st.ready + st.scheduled + st.running === 0) worker.stop();
  }, s.skips ? 10 : 100);
  try {
    await worker.run({ signals: Boolean(s.signals) });
  } finally {
    clearInterval(watch);
  }
  // run() has awaited every handler it aborted: their outcomes are counted.
  return { done, lease_lost: leaseLost };
}

async function drain(q, s) {
  let done = 0;
  let idle = 0;
  const errors = [];
  while (idle < 3) {
    let jobs;
    try {
      jobs = await q.claimBatch(s.worker, 16, { wait: 300 });
    } catch (e) {
      errors.push(e.code);
      continue;
    }
    if (jobs.length === 0) {
      idle += 1;
      continue;
    }
    idle = 0;
    for (const job of jobs) {
      try {
        await db.transaction(async (t) => {
          await t.execute(`INSERT INTO ${s.table} (job_id, surface) VALUES (?, 'node')`, [job.id]);
          await job.ack({ tx: t });
        });
        done += 1;
      } catch (e) {
        errors.push(e.code ?? String(e));
      }
    }
  }
  return { done, errors };
}

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const step = JSON.parse(line);
  let reply;
  try {
    const result = await run(step);
    reply = result === UNSUPPORTED ? { unsupported: step.op } : { ok: result ?? null };
  } catch (e) {
    reply = { error: e.code ?? 'INTERNAL', message: e.message };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
