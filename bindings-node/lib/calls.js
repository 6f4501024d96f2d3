'use strict';
// How a call reaches the native addon: inline when it cannot wait, else off the
// event loop, in this process's writer order.

const { Busy, call, guarded, unwrap } = require('./errors.js');

// Short, bounded honker calls first run right here, without waiting for any
// lock (native `try*` methods): uncontended, that is tens of microseconds on
// the loop thread instead of two thread hops (bench/node measures both).
// Where the call would wait (another writer, a busy reader pool) it changes
// nothing and reports WOULD_WAIT, and the Promise-returning form runs off
// the loop. Not used for your own SQL (unknown cost), for batches over
// FAST_MAX items, or with durability "full" (each commit is an fsync).
const WOULD_WAIT = 'WOULD_WAIT';
const FAST_MAX = 256;

function wouldWait(r) {
  return r !== null && typeof r === 'object' && r.honkerError === true && r.code === WOULD_WAIT;
}

async function fast(enabled, now, later) {
  if (enabled) {
    const r = guarded(now);
    if (!wouldWait(r)) return unwrap(r);
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

  /** Whether the writer is free and nobody waits for it. */
  free() {
    return !this._held && this._waiters.length === 0;
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
// Uncontended (the writer free, nobody waiting) a short call runs at once,
// holding the writer only during it, with no async frame of its own: a
// settled Promise, the caller's one microtask (ADR 29).
function write(db, tx, enabled, now, later) {
  if (tx !== undefined) return fast(enabled, now, later);
  const w = db._writer;
  if (!enabled || !w.free()) return w.run(() => fast(enabled, now, later));
  w._held = true;
  let r;
  try {
    r = guarded(now);
  } catch (e) {
    return Promise.reject(e);
  } finally {
    w.release();
  }
  if (wouldWait(r)) return w.run(() => call(later));
  try {
    return Promise.resolve(unwrap(r));
  } catch (e) {
    return Promise.reject(e);
  }
}

module.exports = {
  FAST_MAX,
  WriterQueue,
  fast,
  wouldWait,
  write,
};
