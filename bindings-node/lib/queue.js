'use strict';
// Queues and jobs.

const { FAST_MAX, fast, write } = require('./calls.js');
const { ATTEMPTS, CLAIMED_JOB_FIELDS, ID, U32, claimedJobAt, decode, definedFields, encode, enqueued, enqueuedBatch, int, iterable, jobInfo, need, num, optMs, optNumber, packed, queueMetrics, queueStats, text } = require('./convert.js');
const { Database, method, txId } = require('./database.js');
const { CLAIM_BATCH, POLL_WAIT, RATE_BURST, RENEW_DIVISOR } = require('./defaults.js');
const { call, describe, guarded, invalid, leaseLost, unwrap } = require('./errors.js');
const { ACK_OPTIONS, CANCEL_OPTIONS, CONFIGURE_OPTIONS, CLAIM_BATCH_OPTIONS, CLAIM_OPTIONS, DEAD_LETTERS_OPTIONS, ENQUEUE_MANY_OPTIONS, ENQUEUE_OPTIONS, HEARTBEAT_OPTIONS, KEEP_ALIVE_OPTIONS, LIMIT_CONCURRENCY_OPTIONS, PAUSE_ALL_OPTIONS, PAUSE_OPTIONS, PURGE_DEAD_OPTIONS, QUEUE_OPTIONS, RETRY_OPTIONS, SET_FAIRNESS_OPTIONS, TX_OPTIONS, WAIT_RESULT_OPTIONS, configureArgs, enqueueArgs, enqueueManyArgs, limitConcurrencyArgs, opts, pauseAllArgs, pauseArgs, queueArgs, setFairnessArgs } = require('./options.js');
const { Reader } = require('./stream.js');
const { captureTrace, traceContext } = require('./trace.js');

/**
 * `queue.claim(...)`: core's claim stream as the shared async iterator. The
 * claimer is made on the first `next`; closing it (or breaking out of the
 * loop, or `signal`) releases what was claimed and not handed out.
 */
class ClaimStream extends Reader {
  constructor(queue, workerId, batch, leaseMs, wait, signal) {
    super(queue._db, null, wait, signal);
    this._queue = queue;
    this._workerId = workerId;
    this._batch = batch;
    this._leaseMs = leaseMs;
  }

  _open() {
    if (!this._opening) {
      const q = this._queue;
      this._opening = unwrap(guarded(() => q._native.claimer(this._workerId, this._batch, this._leaseMs)));
    }
    return this._opening;
  }

  // A job claimed earlier and not handed out yet (no I/O), else null: a
  // zero wait still claims what is ready (a native `next(0)`).
  _readNow(n) {
    return n.takeBuffered() ?? null;
  }

  get _readsAll() {
    return false;
  }

  _record(raw) {
    const q = this._queue;
    return new Job(q, this._workerId, raw, this._leaseMs ?? q._lease);
  }

  // Wakes a waiting next(); what it claimed, and the buffer, go back.
  async _close() {
    const n = this._opening;
    return n ? call(() => n.close()) : 0;
  }
}

class Queue {
  constructor(db, n) {
    this._db = db;
    this._native = n;
    this._lease = n.lease;
  }

  get name() {
    return this._native.name;
  }

  /**
   * Adds a job; with `{ tx }` it commits or rolls back with your transaction
   * (the outbox). Options: `EnqueueOptions` (durations in ms).
   */
  async enqueue(payload, options) {
    options = opts(options, ENQUEUE_OPTIONS);
    const args = enqueueArgs(options);
    const p = encode(payload);
    const tx = txId(this._db, options.tx);
    const { traceparent, tracestate } = captureTrace();
    const n = this._native;
    const [e] = await write(
      this._db,
      tx,
      this._db._fast,
      () => n.tryEnqueue(p, args, tx, traceparent, tracestate),
      () => n.enqueue(p, args, tx, traceparent, tracestate),
    );
    return enqueued(e);
  }

  /** Adds one job per payload, all in one transaction (up to 10,000). */
  async enqueueMany(payloads, options) {
    options = opts(options, ENQUEUE_MANY_OPTIONS);
    const args = enqueueManyArgs(options);
    const list = Array.from(iterable('payloads', payloads), encode);
    const ps = packed(list);
    const tx = txId(this._db, options.tx);
    const { traceparent, tracestate } = captureTrace();
    const n = this._native;
    const batch = await write(
      this._db,
      tx,
      this._db._fast && list.length <= FAST_MAX,
      () => n.tryEnqueueMany(ps, args, tx, traceparent, tracestate),
      () => n.enqueueMany(ps, args, tx, traceparent, tracestate),
    );
    return enqueuedBatch(batch);
  }

  /** Leases up to `n` due jobs to `workerId`; with `wait` (ms), waits for work. */
  async claimBatch(workerId, n = 1, options) {
    options = opts(options, CLAIM_BATCH_OPTIONS);
    const { lease, wait, tx } = options;
    text('workerId', workerId);
    int('n', n, ...U32);
    const args = definedFields({
      lease: optMs('lease', lease),
      wait: optMs('wait', wait),
      tx: txId(this._db, tx),
    });
    const q = this._native;
    const now = () => q.tryClaim(workerId, n, args);
    const later = () => q.claim(workerId, n, args);
    // A claim that waits for work takes the writer only for each attempt,
    // so it does not hold the queue's turn while it sleeps.
    const rows = args && args.wait
      ? await call(later)
      : await write(this._db, args && args.tx, this._db._fast && n <= FAST_MAX, now, later);
    const leaseMs = lease ?? this._lease;
    const jobs = [];
    for (let i = 0; i < rows.length; i += CLAIMED_JOB_FIELDS) {
      jobs.push(new Job(this, workerId, claimedJobAt(rows, i), leaseMs));
    }
    return jobs;
  }

  /**
   * `for await (const job of queue.claim('mailer-1', { signal }))`: an
   * endless stream of jobs that sleeps (off the event loop) until work
   * arrives from any process, and ends when `signal` aborts or the loop
   * breaks. It is core's claim stream (the same on every surface): jobs
   * claimed but not handed out (`batch` > 1), or claimed in the background
   * after the end, are released at once; a job already handed to the loop
   * body stays leased to it.
   */
  claim(workerId, options) {
    options = opts(options, CLAIM_OPTIONS);
    const { signal, batch = CLAIM_BATCH, lease, wait = POLL_WAIT } = options;
    text('workerId', workerId);
    int('batch', batch, ...U32);
    const leaseMs = optMs('lease', lease);
    const waitMs = optMs('wait', wait);
    return new ClaimStream(this, workerId, batch, leaseMs, waitMs, signal);
  }

  /** Acks several jobs in one transaction; resolves to how many were held. */
  async ackMany(jobs, options) {
    options = opts(options, TX_OPTIONS);
    const ids = [];
    const tokens = [];
    for (const j of iterable('jobs', jobs)) {
      const i = ids.length;
      ids.push(int(`jobs[${i}].id`, j && j.id, ...ID));
      tokens.push(text(`jobs[${i}].token`, j && j.token));
    }
    const tx = txId(this._db, options.tx);
    const q = this._native;
    return write(
      this._db,
      tx,
      this._db._fast && ids.length <= FAST_MAX,
      () => q.tryAckMany(ids, tokens, tx),
      () => q.ackMany(ids, tokens, tx),
    );
  }

  /** Cancels a live job; false if it had already finished. */
  async cancel(id, options) {
    options = opts(options, CANCEL_OPTIONS);
    int('id', id, ...ID);
    const tx = txId(this._db, options.tx);
    const q = this._native;
    return write(
      this._db,
      tx,
      this._db._fast,
      () => q.tryCancel(id, options.reason, tx),
      () => q.cancel(id, options.reason, tx),
    );
  }

  /**
   * The running job that `(id, token)` leases, rebuilt: for a process handed
   * a lease by another (a webhook that completes the job later, a worker in
   * another language). LeaseLost if the job is not running (or finished),
   * NotFound if it never existed, as a verb with the lease would say; a verb
   * on it rejects with LeaseLost if another claim holds it now. keepAlive
   * renews it for the queue's lease.
   */
  async job(id, token) {
    int('id', id, ...ID);
    text('token', token);
    const q = this._native;
    const r = await fast(this._db._fast, () => q.tryJob(id, token), () => q.job(id, token));
    return new Job(this, r.workerId, r.job, this._lease);
  }

  /** The job in any state; NotFound if it never existed or was pruned. */
  async getJob(id) {
    int('id', id, ...ID);
    const q = this._native;
    return jobInfo(await fast(this._db._fast, () => q.tryGetJob(id), () => q.getJob(id)));
  }

  /** The result saved by `job.ack({ result })`, or null. */
  async getResult(id) {
    int('id', id, ...ID);
    const q = this._native;
    return decode(await fast(this._db._fast, () => q.tryGetResult(id), () => q.getResult(id))) ?? null;
  }

  /** Waits (off the event loop) for the job's result; Timeout if none comes. */
  async waitResult(id, options) {
    options = opts(options, WAIT_RESULT_OPTIONS);
    int('id', id, ...ID);
    const timeout = optMs('timeout', options.timeout ?? 30_000);
    return decode(await call(() => this._native.waitResult(id, timeout))) ?? null;
  }

  async stats() {
    return queueStats(await call(() => this._native.stats()));
  }

  /**
   * The queue's counters (enqueued, claimed, acked, retried, reclaimed, dead,
   * expired, cancelled), claim latency histogram and jobs by state: counted
   * in the file by every process, so the whole file's (ADR 27).
   */
  async metrics() {
    return queueMetrics(JSON.parse(await call(() => this._native.metricsJson())));
  }

  /**
   * Limits how many of this queue's jobs start, for every worker of every
   * process together (`{ limit: 10, per: 1000 }`: at most 10 a second;
   * `burst`, 1, at once), enforced inside each claim's transaction: a claim
   * takes what the limit allows, the rest keep waiting with their attempts
   * untouched, and waiting workers sleep until the next may start. `null`
   * lifts it.
   */
  /**
   * Stores the queue's settings in the file, for every process and
   * language: handles made afterwards (`db.queue(name)`, a Worker's) use
   * them where they were not given options of their own; what is not named
   * stays as stored. Options: lease, maxAttempts, backoffBase, backoffMax
   * (ms), backoffJitter.
   */
  async configure(settings) {
    const arg = configureArgs(opts(settings, CONFIGURE_OPTIONS)) ?? {};
    const n = this._native;
    await this._db._writer.run(() => call(() => n.configure(arg)));
  }

  /** The queue's stored settings (ms; a field absent when not set). */
  async settings() {
    const stored = await call(() => this._native.settings());
    const out = {};
    for (const [k, v] of Object.entries(stored)) if (v !== undefined && v !== null) out[k] = v;
    return out;
  }

  /** Forgets the queue's stored settings (the defaults apply again). */
  async clearSettings() {
    const n = this._native;
    await this._db._writer.run(() => call(() => n.clearSettings()));
  }

  async pause(options) {
    const arg = pauseArgs(opts(options, PAUSE_OPTIONS)) ?? {};
    const n = this._native;
    await this._db._writer.run(() => call(() => n.pause(arg)));
  }

  async resume() {
    const n = this._native;
    return this._db._writer.run(() => call(() => n.resume()));
  }

  async limitConcurrency(options) {
    const arg = limitConcurrencyArgs(opts(options, LIMIT_CONCURRENCY_OPTIONS)) ?? {};
    const n = this._native;
    await this._db._writer.run(() => call(() => n.limitConcurrency(arg)));
  }

  async setFairness(options) {
    const arg = setFairnessArgs(opts(options, SET_FAIRNESS_OPTIONS)) ?? {};
    const n = this._native;
    await this._db._writer.run(() => call(() => n.setFairness(arg)));
  }

  async setRateLimit(limit) {
    let arg = null;
    if (limit !== null) {
      if (typeof limit !== 'object' || limit === undefined) throw invalid('setRateLimit takes { limit, per, burst } or null');
      arg = { limit: need('limit', limit.limit, ...ID), per: optMs('per', limit.per), burst: int('burst', limit.burst, ...ID) ?? RATE_BURST };
      if (arg.per === undefined) throw invalid('per must be given');
    }
    const n = this._native;
    await this._db._writer.run(() => call(() => n.setRateLimit(arg)));
  }

  /** The queue's rate limit (`{ limit, per, burst }`, `per` in ms), or null. */
  async rateLimit() {
    return call(() => this._native.rateLimit());
  }

  /** Dead letters with ids above `afterId`, oldest first (paged). */
  async deadLetters(options) {
    options = opts(options, DEAD_LETTERS_OPTIONS);
    int('afterId', options.afterId, ...ID);
    int('limit', options.limit, ...U32);
    const rows = await call(() => this._native.deadLetters(options.afterId, options.limit));
    return rows.map(jobInfo);
  }

  async requeueDead(id) {
    int('id', id, ...ID);
    const q = this._native;
    return write(this._db, undefined, this._db._fast, () => q.tryRequeueDead(id), () => q.requeueDead(id));
  }

  async requeueAllDead() {
    return this._db._writer.run(() => call(() => this._native.requeueAllDead()));
  }

  /** Deletes dead letters (those that died at least `olderThan` ms ago). */
  async purgeDead(options) {
    options = opts(options, PURGE_DEAD_OPTIONS);
    const olderThan = optMs('olderThan', options.olderThan);
    return this._db._writer.run(() => call(() => this._native.purgeDead(olderThan)));
  }
}

class Job {
  constructor(queue, workerId, raw, leaseMs) {
    this._queue = queue;
    this._raw = raw;
    this._leaseMs = leaseMs;
    this.id = raw.id;
    this.attempts = raw.attempts;
    this.maxAttempts = raw.maxAttempts;
    this.priority = raw.priority;
    this.workerId = workerId;
    this.token = raw.token;
    this._expires = raw.leaseExpiresAtMs;
  }

  /** The enqueued payload: parsed JSON, or a Buffer. */
  get payload() {
    if (!('_payload' in this)) this._payload = decode(this._raw.payload);
    return this._payload;
  }

  get queue() {
    return this._queue;
  }

  get runAt() {
    return new Date(this._raw.runAtMs);
  }

  get createdAt() {
    return new Date(this._raw.createdAtMs);
  }

  /**
   * The producer's W3C trace context ({ traceparent, tracestate? }), if it
   * had an active OpenTelemetry span; the Worker makes it active around the
   * handler. Give it to `propagation.extract` when you run jobs by hand.
   */
  get traceContext() {
    return traceContext(this._raw.traceContext);
  }

  /** When the lease lapses unless extended (renewals by keepAlive included). */
  get leaseExpiresAt() {
    this._renewed();
    return new Date(this._expires);
  }

  _q() {
    return this._queue._native;
  }

  _fast() {
    return this._queue._db._fast;
  }

  // A verb that settles the job: marks it so, for the worker (a handler
  // that acked its job itself, in its own transaction).
  async _write(tx, now, later) {
    const r = await write(this._queue._db, tx, this._fast(), now, later);
    this._settled = true;
    return r;
  }

  _tx(options) {
    return txId(this._queue._db, options && options.tx);
  }

  /** Completes the job (in `tx` if given), saving `result` if given. */
  async ack(options) {
    options = opts(options, ACK_OPTIONS);
    const result = options.result === undefined ? undefined : encode(options.result);
    const [q, tx] = [this._q(), this._tx(options)];
    return this._write(
      tx,
      () => q.tryAck(this.id, this.token, result, tx),
      () => q.ack(this.id, this.token, result, tx),
    );
  }

  /** Another attempt after `delay` ms (default: the job's backoff); dead when used up. */
  async retry(options) {
    options = opts(options, RETRY_OPTIONS);
    const [q, tx, delay] = [this._q(), this._tx(options), optMs('delay', options.delay)];
    return this._write(
      tx,
      () => q.tryRetry(this.id, this.token, delay, options.error, tx),
      () => q.retry(this.id, this.token, delay, options.error, tx),
    );
  }

  /** Dead-letters the job now. */
  async fail(error, options) {
    options = opts(options, TX_OPTIONS);
    const [q, tx, e] = [this._q(), this._tx(options), String(error)];
    return this._write(
      tx,
      () => q.tryFail(this.id, this.token, e, tx),
      () => q.fail(this.id, this.token, e, tx),
    );
  }

  /** Gives the job back now without using up an attempt. */
  async release(options) {
    options = opts(options, TX_OPTIONS);
    const [q, tx] = [this._q(), this._tx(options)];
    return this._write(
      tx,
      () => q.tryRelease(this.id, this.token, tx),
      () => q.release(this.id, this.token, tx),
    );
  }

  /** Gives the job back to run after `delay` ms, without using up an attempt. */
  async snooze(delay, options) {
    options = opts(options, TX_OPTIONS);
    const [q, tx, d] = [this._q(), this._tx(options), optMs('delay', delay)];
    return this._write(
      tx,
      () => q.trySnooze(this.id, this.token, d, tx),
      () => q.snooze(this.id, this.token, d, tx),
    );
  }

  /** Extends the lease by `extend` ms (default: the claim's lease); resolves to the new expiry. */
  async heartbeat(options) {
    options = opts(options, HEARTBEAT_OPTIONS);
    const extend = optMs('extend', options.extend) ?? this._leaseMs;
    const [q, tx] = [this._q(), this._tx(options)];
    this._expires = await write(
      this._queue._db,
      tx,
      this._fast(),
      () => q.tryHeartbeat(this.id, this.token, extend, tx),
      () => q.heartbeat(this.id, this.token, extend, tx),
    );
    return this.leaseExpiresAt;
  }

  /**
   * Runs `fn(signal)` while core renews the lease every `every` ms (default:
   * a third of the lease), the same renewal as on every surface: a
   * transient failure (Busy) is tried again; a lost lease (reclaimed after a
   * lapse, cancelled) stops it and aborts `signal` (a LeaseLost as its
   * reason), so the work can stop early; once `fn` settles, keepAlive then
   * rejects with LeaseLost: the outcome can no longer be recorded, and the
   * job runs again elsewhere (at-least-once). An error from `fn` is thrown
   * as it is. Resolves to what `fn` resolves to.
   */
  async keepAlive(fn, options) {
    options = opts(options, KEEP_ALIVE_OPTIONS);
    if (typeof fn !== 'function') throw invalid(`keepAlive needs a function to run, got ${describe(fn)}`);
    const every = optMs('every', options.every);
    const renewal = unwrap(guarded(() => this._q().keepAlive(this.id, this.token, this._leaseMs, every)));
    this._renewal = renewal;
    const lost = new AbortController();
    // A lost lease shows on the renewal at its next beat; looked at often.
    const check = setInterval(
      () => {
        if (renewal.lost && !lost.signal.aborted) lost.abort(leaseLost(this.id));
      },
      Math.max(5, Math.min(every ?? this._leaseMs / RENEW_DIVISOR, 250)),
    );
    const stop = async () => {
      clearInterval(check);
      const wasLost = await call(() => renewal.stop());
      this._renewed();
      this._renewal = null;
      return wasLost;
    };
    let value;
    try {
      value = await fn(lost.signal);
    } catch (e) {
      await stop().catch(() => {});
      throw e;
    }
    if (await stop()) throw leaseLost(this.id);
    return value;
  }

  /** Takes the renewal's latest expiry into the job's. */
  _renewed() {
    const at = this._renewal && this._renewal.leaseExpiresAt;
    if (at && at > this._expires) this._expires = at;
  }
}

// The database's calls for this module (database.js names no primitive).
method(Database, function queue(name, options) {
  options = opts(options, QUEUE_OPTIONS);
  text('name', name);
  const args = queueArgs(options);
  return new Queue(this, unwrap(guarded(() => this._native.queue(name, args))));
});

method(Database, async function metrics() {
  return JSON.parse(await call(() => this._native.metricsJson())).map(queueMetrics);
});

method(Database, async function metricsText() {
  return call(() => this._native.metricsText());
});

method(Database, async function pauseAll(options) {
  const arg = pauseAllArgs(opts(options, PAUSE_ALL_OPTIONS)) ?? {};
  const n = this._native;
  await this._writer.run(() => call(() => n.pauseAll(arg)));
});

method(Database, async function resumeAll() {
  const n = this._native;
  return this._writer.run(() => call(() => n.resumeAll()));
});

module.exports = {
  ClaimStream,
  Job,
  Queue,
};
