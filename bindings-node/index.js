'use strict';
// honker for Node: durable job queues inside your application's own SQLite
// file. The job is written in the same transaction as the row that caused it
// (the transactional outbox), so both commit or neither does.
//
// This file holds the idioms (options objects, `for await`, Dates, error
// classes); behaviour lives in the Rust core behind the native addon
// (found by ./binding.js: the prebuilt package for the platform). Every
// call that touches SQLite returns a Promise and runs off the event loop.
// Durations are milliseconds; times are Dates (or ms since the epoch).
// Semantics are at-least-once: make handlers idempotent.

const { AsyncLocalStorage } = require('node:async_hooks');
const { addon, extensionPath } = require('./binding.js').load();

// ----- errors (the one place native failures become exceptions) ---------

class HonkerError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.name = new.target.name;
    /** The stable error code, shared by every language and the SQL functions. */
    this.code = code;
    this.detail = message;
  }
}
class Busy extends HonkerError {}
class LeaseLost extends HonkerError {}
class NotFound extends HonkerError {}
class InvalidArgument extends HonkerError {}
class SchemaTooNew extends HonkerError {}
class Closed extends HonkerError {}
class Timeout extends HonkerError {}
class RateLimited extends HonkerError {}
class SqliteError extends HonkerError {}
class InternalError extends HonkerError {}
class Unsafe extends HonkerError {}
class RolledBack extends HonkerError {}

const ERROR_CLASSES = {
  BUSY: Busy,
  LEASE_LOST: LeaseLost,
  NOT_FOUND: NotFound,
  INVALID_ARGUMENT: InvalidArgument,
  SCHEMA_TOO_NEW: SchemaTooNew,
  CLOSED: Closed,
  TIMEOUT: Timeout,
  RATE_LIMITED: RateLimited,
  SQLITE: SqliteError,
  INTERNAL: InternalError,
  UNSAFE: Unsafe,
  ROLLED_BACK: RolledBack,
};

function makeError(code, message) {
  const Cls = ERROR_CLASSES[code] || HonkerError;
  return new Cls(code, message);
}

/**
 * An error from another SQLite driver (better-sqlite3's `SqliteError`, ...)
 * running honker's SQL functions, whose message starts with a honker code
 * ("LEASE_LOST: ..."), as that code's honker error class with `.code`; any
 * other value is returned unchanged.
 */
function fromSqliteError(err) {
  if (err instanceof HonkerError || !(err instanceof Error)) return err;
  const m = /^([A-Z_]+): ([\s\S]*)$/.exec(err.message);
  if (!m || !(m[1] in ERROR_CLASSES)) return err;
  const e = makeError(m[1], m[2]);
  e.cause = err;
  return e;
}

/** A native result, or the failure it reports thrown as a HonkerError. */
function unwrap(r) {
  if (r !== null && typeof r === 'object' && r.honkerError === true) {
    throw makeError(r.code, r.message);
  }
  return r;
}

// napi's statuses for arguments it cannot convert (a string where a number
// belongs): they become InvalidArgument too, so bad input always gets a
// honker error.
const NAPI_ARGUMENT_STATUSES = new Set([
  'InvalidArg',
  'ObjectExpected',
  'StringExpected',
  'NameExpected',
  'FunctionExpected',
  'NumberExpected',
  'BooleanExpected',
  'ArrayExpected',
  'BigintExpected',
  'DateExpected',
  'ArrayBufferExpected',
]);

/** Runs a native call, mapping napi's argument errors to InvalidArgument. */
function guarded(fn) {
  try {
    return fn();
  } catch (e) {
    if (e && NAPI_ARGUMENT_STATUSES.has(e.code)) throw invalid(e.message);
    throw e;
  }
}

async function call(start) {
  return unwrap(await guarded(start));
}

// Short, bounded honker calls first run right here, without waiting for any
// lock (native `try*` methods): uncontended, that is tens of microseconds on
// the loop thread instead of two thread hops (bench/node measures both).
// Where the call would wait (another writer, a busy reader pool) it changes
// nothing and reports WOULD_WAIT, and the Promise-returning form runs off
// the loop. Not used for your own SQL (unknown cost), for batches over
// FAST_MAX items, or with durability "full" (each commit is an fsync).
const WOULD_WAIT = 'WOULD_WAIT';
const FAST_MAX = 256;

async function fast(enabled, now, later) {
  if (enabled) {
    const r = guarded(now);
    if (!(r !== null && typeof r === 'object' && r.honkerError === true && r.code === WOULD_WAIT)) {
      return unwrap(r);
    }
  }
  return call(later);
}

// The order in which this process's writes reach the writer. SQLite has one
// writer per file and a Database one writer connection; db.transaction()
// holds it from BEGIN to COMMIT, across every await in its callback. Every
// other write of this process (another request's transaction, the worker's
// ack, a plain enqueue) waits here, first come first served, as a pending
// Promise: no thread is parked per waiter, so the holder's own next call is
// never stuck behind them, and the event loop never waits. A waiter that has
// not had its turn within the busy timeout fails with Busy. Calls that pass
// { tx } run inside the transaction and skip the queue; a claim that waits
// for work skips it too (it takes the writer only for each attempt).
class WriterQueue {
  constructor(timeoutMs) {
    this._held = false;
    this._waiters = [];
    this._timeoutMs = timeoutMs;
  }

  /** null when the writer is taken at once; else a Promise of the turn. */
  acquire() {
    if (!this._held && this._waiters.length === 0) {
      this._held = true;
      return null;
    }
    return new Promise((resolve, reject) => {
      const waiter = { resolve, timer: null };
      waiter.timer = setTimeout(() => {
        this._waiters.splice(this._waiters.indexOf(waiter), 1);
        reject(
          new Busy(
            'BUSY',
            `waited ${this._timeoutMs} ms (the busy timeout) for honker's writer, ` +
              'held by a transaction of this process the whole time',
          ),
        );
      }, this._timeoutMs);
      this._waiters.push(waiter);
    });
  }

  /** Hands the writer to the next waiter, or frees it. */
  release() {
    const next = this._waiters.shift();
    if (next) {
      clearTimeout(next.timer);
      next.resolve();
    } else {
      this._held = false;
    }
  }

  async run(fn) {
    const turn = this.acquire();
    if (turn) await turn;
    try {
      return await fn();
    } finally {
      this.release();
    }
  }
}

// A write: with a transaction it runs inside it at once (the transaction
// holds the writer); otherwise it waits its turn (WriterQueue).
function write(db, tx, enabled, now, later) {
  if (tx !== undefined) return fast(enabled, now, later);
  return db._writer.run(() => fast(enabled, now, later));
}

function leaseLost(id) {
  return new LeaseLost('LEASE_LOST', `job ${id}'s lease was lost while keepAlive ran; its outcome cannot be recorded`);
}

function invalid(message) {
  return new InvalidArgument('INVALID_ARGUMENT', message);
}

// ----- conversions ---------------------------------------------------------

// A payload is bytes (a Buffer or Uint8Array) or a JSON value: null, true,
// false, finite numbers, strings, arrays and plain objects of those. The
// same rule as every surface: what JSON cannot hold is refused, never
// turned into null or {} (NaN, ±Infinity, BigInt, functions, symbols, Map,
// Set, Date and other class instances, cycles). An object property whose
// value is undefined is left out, as JSON.stringify does; undefined anywhere
// else is refused.
function encode(payload) {
  if (Buffer.isBuffer(payload)) return payload;
  if (payload instanceof Uint8Array) return Buffer.from(payload);
  checkJson(payload, 'payload', []);
  return JSON.stringify(payload);
}

function checkJson(v, where, parents) {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(v)) throw invalid(`${where} is ${v}, which JSON cannot represent`);
      return;
    case 'object':
      break;
    case 'undefined':
      throw invalid(`${where} is undefined, which JSON cannot represent`);
    default:
      throw invalid(`${where} is a ${typeof v}, which JSON cannot represent`);
  }
  if (v === null) return;
  if (parents.includes(v)) throw invalid(`${where} refers back to itself (a cycle)`);
  const proto = Object.getPrototypeOf(v);
  if (Array.isArray(v)) {
    parents.push(v);
    for (let i = 0; i < v.length; i++) checkJson(v[i], `${where}[${i}]`, parents);
    parents.pop();
    return;
  }
  if (proto !== Object.prototype && proto !== null) {
    const kind = (proto && proto.constructor && proto.constructor.name) || 'object';
    throw invalid(`${where} is a ${kind}, which JSON cannot represent (convert it to plain data first)`);
  }
  parents.push(v);
  for (const k of Object.keys(v)) {
    if (v[k] !== undefined) checkJson(v[k], `${where}.${k}`, parents);
  }
  parents.pop();
}

function text(name, v) {
  if (typeof v !== 'string') throw invalid(`${name} must be a string, got ${describe(v)}`);
  return v;
}

// An integer argument within its native type's range, or undefined.
function int(name, v, lo, hi) {
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || v < lo || v > hi) {
    throw invalid(`${name} must be an integer between ${lo} and ${hi}, got ${describe(v)}`);
  }
  return v;
}

const I32 = [-(2 ** 31), 2 ** 31 - 1];
const U32 = [0, 2 ** 32 - 1];
const ID = [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];

function describe(v) {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (v === null || v === undefined || typeof v === 'number' || typeof v === 'boolean') return String(v);
  return `a ${typeof v === 'object' ? (Object.getPrototypeOf(v)?.constructor?.name ?? 'object') : typeof v}`;
}

function decode(raw) {
  return typeof raw === 'string' ? JSON.parse(raw) : raw;
}

function date(ms) {
  return ms === null || ms === undefined ? null : new Date(ms);
}

function epochMs(name, value) {
  if (value === undefined || value === null) return undefined;
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'number') return value;
  throw invalid(`${name} must be a Date or ms since the Unix epoch`);
}

function optMs(name, value) {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number') throw invalid(`${name} must be a number of milliseconds, got ${describe(value)}`);
  return value;
}

function num(name, value) {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number') throw invalid(`${name} must be a number, got ${describe(value)}`);
  return value;
}

function rowsToObjects(r) {
  return r.rows.map((row) => {
    const o = {};
    r.columns.forEach((c, i) => {
      o[c] = row[i];
    });
    return o;
  });
}

function txId(db, tx) {
  if (tx === undefined || tx === null) {
    const open = db._txScope.getStore();
    if (open && open._open) {
      throw invalid(
        'this call runs inside db.transaction() without { tx }: pass the transaction ' +
          '(it would otherwise wait for the writer the transaction holds)',
      );
    }
    return undefined;
  }
  if (!(tx instanceof Transaction)) throw invalid('tx must be the Transaction of db.transaction()');
  if (tx._db !== db) throw invalid('this transaction belongs to another Database');
  return tx._native.id;
}

function info(d) {
  return {
    id: d.id,
    queue: d.queue,
    state: d.state,
    payload: decode(d.payload),
    priority: d.priority,
    runAt: date(d.runAt),
    attempts: d.attempts,
    maxAttempts: d.maxAttempts,
    dedupeKey: d.dedupeKey ?? null,
    expiresAt: date(d.expiresAt),
    createdAt: date(d.createdAt),
    workerId: d.workerId ?? null,
    lastError: d.lastError ?? null,
    leaseExpiresAt: date(d.leaseExpiresAt),
    finishedAt: date(d.finishedAt),
  };
}

// ----- database ------------------------------------------------------------

/**
 * Opens (creating if needed) the honker file at `path`: WAL mode, honker's
 * tables migrated, your own tables left alone.
 */
async function open(file, options = {}) {
  text('path', file);
  const { clock, ...rest } = options;
  if (rest.durability !== undefined) text('durability', rest.durability);
  int('readers', rest.readers, ...U32);
  int('maxPayloadBytes', rest.maxPayloadBytes, ...U32);
  for (const k of ['busyTimeout', 'watchFallback', 'autoMaintainEvery']) optMs(k, rest[k]);
  const fastPath = rest.durability !== 'full';
  if (clock !== undefined) {
    if (!(clock instanceof addon.ManualClock)) throw invalid('clock must be a ManualClock');
    return new Database(unwrap(guarded(() => addon.openWithClock(file, rest, clock))), fastPath);
  }
  return new Database(await call(() => addon.open(file, rest)), fastPath);
}

class Database {
  constructor(n, fastPath) {
    this._native = n;
    this._fast = fastPath;
    this._txScope = new AsyncLocalStorage();
    this._writer = new WriterQueue(n.busyTimeout);
  }

  /** The canonical path of the file. */
  get path() {
    return this._native.path;
  }

  /** A handle on the queue `name` (creating it writes nothing). */
  queue(name, options = {}) {
    text('name', name);
    int('maxAttempts', options.maxAttempts, ...U32);
    for (const k of ['lease', 'backoffBase', 'backoffMax']) optMs(k, options[k]);
    num('backoffJitter', options.backoffJitter);
    return new Queue(this, unwrap(guarded(() => this._native.queue(name, options))));
  }

  /**
   * Runs `fn(tx)` in a write transaction: commits when it returns (or its
   * promise resolves), rolls back when it throws. Pass `{ tx }` to honker
   * calls inside it so they commit with your own `tx.execute(...)` writes.
   */
  async transaction(fn) {
    if (typeof fn !== 'function') throw invalid('transaction() takes a callback: db.transaction(async (tx) => ...)');
    txId(this, undefined); // one inside another would wait for itself
    const n = this._native;
    const turn = this._writer.acquire();
    if (turn) await turn;
    try {
      const tx = new Transaction(this, await fast(this._fast, () => n.tryBegin(), () => n.begin()));
      let result;
      try {
        result = await this._txScope.run(tx, () => fn(tx));
      } catch (e) {
        tx._open = false;
        await fast(this._fast, () => tx._native.tryRollback(), () => tx._native.rollback());
        throw e;
      }
      tx._open = false;
      await fast(this._fast, () => tx._native.tryCommit(), () => tx._native.commit());
      return result;
    } finally {
      this._writer.release();
    }
  }

  /** Runs one statement in its own transaction; resolves to rows changed. */
  async execute(sql, params = []) {
    txId(this, undefined);
    return this._writer.run(() => call(() => this._native.execute(text('sql', sql), params)));
  }

  /** A read-only query on a reader connection: one object per row. */
  async query(sql, params = []) {
    return rowsToObjects(await call(() => this._native.query(text('sql', sql), params)));
  }

  /** Prunes finished jobs and results past retention. */
  async maintain() {
    txId(this, undefined);
    return this._writer.run(() => call(() => this._native.maintain()));
  }

  /** Closes the connections; later calls throw Closed. */
  async close() {
    return call(() => this._native.close());
  }
}

class Transaction {
  constructor(db, n) {
    this._db = db;
    this._native = n;
    this._open = true;
  }

  async execute(sql, params = []) {
    return call(() => this._native.execute(text('sql', sql), params));
  }

  /** Sees the transaction's own uncommitted writes. */
  async query(sql, params = []) {
    return rowsToObjects(await call(() => this._native.query(text('sql', sql), params)));
  }
}

// ----- queues and jobs -----------------------------------------------------

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
   * Adds a job; with `{ tx }` it commits or rolls back with your transaction.
   * Options: delay (ms), runAt (Date), priority, maxAttempts, dedupeKey,
   * expires (ms).
   */
  async enqueue(payload, options = {}) {
    const [one] = await this.enqueueMany([payload], options);
    return one;
  }

  /** Adds one job per payload, all in one transaction. */
  async enqueueMany(payloads, options = {}) {
    const { delay, runAt, priority, maxAttempts, dedupeKey, expires, tx } = options;
    const list = Array.from(payloads, encode);
    int('priority', priority, ...I32);
    int('maxAttempts', maxAttempts, ...U32);
    if (dedupeKey !== undefined && dedupeKey !== null) text('dedupeKey', dedupeKey);
    const opts = {
      delay: optMs('delay', delay),
      runAt: epochMs('runAt', runAt),
      priority,
      maxAttempts,
      dedupeKey,
      expires: optMs('expires', expires),
      tx: txId(this._db, tx),
    };
    const n = this._native;
    return write(
      this._db,
      opts.tx,
      this._db._fast && list.length <= FAST_MAX,
      () => n.tryEnqueueMany(list, opts),
      () => n.enqueueMany(list, opts),
    );
  }

  /** Leases up to `n` due jobs to `workerId`; with `wait` (ms), waits for work. */
  async claimBatch(workerId, n = 1, options = {}) {
    const { lease, wait, tx } = options;
    text('workerId', workerId);
    int('n', n, ...U32);
    const args = { lease: optMs('lease', lease), wait: optMs('wait', wait), tx: txId(this._db, tx) };
    const q = this._native;
    const now = () => q.tryClaim(workerId, n, args);
    const later = () => q.claim(workerId, n, args);
    // A claim that waits for work takes the writer only for each attempt,
    // so it does not hold the queue's turn while it sleeps.
    const rows = args.wait
      ? await call(later)
      : await write(this._db, args.tx, this._db._fast && n <= FAST_MAX, now, later);
    const leaseMs = lease ?? this._lease;
    return rows.map((r) => new Job(this, workerId, r, leaseMs));
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
  claim(workerId, options = {}) {
    const { signal, batch = 1, lease, wait = 1000 } = options;
    text('workerId', workerId);
    int('batch', batch, ...U32);
    const leaseMs = optMs('lease', lease);
    const waitMs = optMs('wait', wait);
    const queue = this;
    let claimer = null;
    let done = false;
    let ended = null;
    const end = () => {
      done = true;
      if (signal) signal.removeEventListener('abort', end);
      // Wakes a waiting next(); what it claimed, and the buffer, go back.
      if (claimer && !ended) ended = call(() => claimer.close());
      return ended ?? Promise.resolve(0);
    };
    if (signal) signal.addEventListener('abort', end, { once: true });

    return {
      [Symbol.asyncIterator]() {
        return this;
      },
      async next() {
        if (!claimer && !done) claimer = unwrap(guarded(() => queue._native.claimer(workerId, batch, leaseMs)));
        for (;;) {
          if (done || (signal && signal.aborted)) {
            await end();
            return { done: true, value: undefined };
          }
          const raw = claimer.takeBuffered() ?? (await call(() => claimer.next(waitMs)));
          if (raw) return { done: false, value: new Job(queue, workerId, raw, leaseMs ?? queue._lease) };
          // null: the wait ran out (claim again) or the stream was closed.
        }
      },
      async return() {
        await end();
        return { done: true, value: undefined };
      },
    };
  }

  /** Acks several jobs in one transaction; resolves to how many were held. */
  async ackMany(jobs, options = {}) {
    const leases = Array.from(jobs, (j, i) => ({
      id: int(`jobs[${i}].id`, j && j.id, ...ID),
      token: text(`jobs[${i}].token`, j && j.token),
    }));
    const tx = txId(this._db, options.tx);
    const q = this._native;
    return write(
      this._db,
      tx,
      this._db._fast && leases.length <= FAST_MAX,
      () => q.tryAckMany(leases, tx),
      () => q.ackMany(leases, tx),
    );
  }

  /** Cancels a live job; false if it had already finished. */
  async cancel(id, options = {}) {
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
    return info(await fast(this._db._fast, () => q.tryGetJob(id), () => q.getJob(id)));
  }

  /** The result saved by `job.ack({ result })`, or null. */
  async getResult(id) {
    int('id', id, ...ID);
    const q = this._native;
    return decode(await fast(this._db._fast, () => q.tryGetResult(id), () => q.getResult(id))) ?? null;
  }

  /** Waits (off the event loop) for the job's result; Timeout if none comes. */
  async waitResult(id, options = {}) {
    int('id', id, ...ID);
    const timeout = optMs('timeout', options.timeout ?? 30_000);
    return decode(await call(() => this._native.waitResult(id, timeout))) ?? null;
  }

  async stats() {
    return call(() => this._native.stats());
  }

  /** Dead letters with ids above `afterId`, oldest first (paged). */
  async deadLetters(options = {}) {
    int('afterId', options.afterId, ...ID);
    int('limit', options.limit, ...U32);
    const rows = await call(() => this._native.deadLetters(options.afterId, options.limit));
    return rows.map(info);
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
  async purgeDead(options = {}) {
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
    this._expires = raw.leaseExpiresAt;
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
    return new Date(this._raw.runAt);
  }

  get createdAt() {
    return new Date(this._raw.createdAt);
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

  _write(tx, now, later) {
    return write(this._queue._db, tx, this._fast(), now, later);
  }

  _tx(options) {
    return txId(this._queue._db, options && options.tx);
  }

  /** Completes the job (in `tx` if given), saving `result` if given. */
  async ack(options = {}) {
    const result = options.result === undefined ? undefined : encode(options.result);
    const [q, tx] = [this._q(), this._tx(options)];
    return this._write(
      tx,
      () => q.tryAck(this.id, this.token, result, tx),
      () => q.ack(this.id, this.token, result, tx),
    );
  }

  /** Another attempt after `delay` ms (default: the job's backoff); dead when used up. */
  async retry(options = {}) {
    const [q, tx, delay] = [this._q(), this._tx(options), optMs('delay', options.delay)];
    return this._write(
      tx,
      () => q.tryRetry(this.id, this.token, delay, options.error, tx),
      () => q.retry(this.id, this.token, delay, options.error, tx),
    );
  }

  /** Dead-letters the job now. */
  async fail(error, options = {}) {
    const [q, tx, e] = [this._q(), this._tx(options), String(error)];
    return this._write(
      tx,
      () => q.tryFail(this.id, this.token, e, tx),
      () => q.fail(this.id, this.token, e, tx),
    );
  }

  /** Gives the job back now without using up an attempt. */
  async release(options = {}) {
    const [q, tx] = [this._q(), this._tx(options)];
    return this._write(
      tx,
      () => q.tryRelease(this.id, this.token, tx),
      () => q.release(this.id, this.token, tx),
    );
  }

  /** Gives the job back to run after `delay` ms, without using up an attempt. */
  async snooze(delay, options = {}) {
    const [q, tx, d] = [this._q(), this._tx(options), optMs('delay', delay)];
    return this._write(
      tx,
      () => q.trySnooze(this.id, this.token, d, tx),
      () => q.snooze(this.id, this.token, d, tx),
    );
  }

  /** Extends the lease by `extend` ms (default: the claim's lease); resolves to the new expiry. */
  async heartbeat(options = {}) {
    const extend = optMs('extend', options.extend) ?? this._leaseMs;
    const [q, tx] = [this._q(), this._tx(options)];
    this._expires = await this._write(
      tx,
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
  async keepAlive(fn, options = {}) {
    const every = optMs('every', options.every);
    const renewal = unwrap(guarded(() => this._q().keepAlive(this.id, this.token, this._leaseMs, every)));
    this._renewal = renewal;
    const lost = new AbortController();
    // A lost lease shows on the renewal at its next beat; looked at often.
    const check = setInterval(
      () => {
        if (renewal.lost && !lost.signal.aborted) lost.abort(leaseLost(this.id));
      },
      Math.max(5, Math.min(every ?? this._leaseMs / 3, 250)),
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

module.exports = {
  open,
  Database,
  Transaction,
  Queue,
  Job,
  ManualClock: addon.ManualClock,
  HonkerError,
  Busy,
  LeaseLost,
  NotFound,
  InvalidArgument,
  SchemaTooNew,
  Closed,
  Timeout,
  RateLimited,
  Unsafe,
  RolledBack,
  SqliteError,
  InternalError,
  fromSqliteError,
  ERROR_CODES: addon.errorCodes(),
  ERROR_CLASSES,
  version: addon.version(),
  extensionPath,
};
