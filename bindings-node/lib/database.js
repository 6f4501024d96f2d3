'use strict';
// The database: open, transactions, the application's SQL, close. It names no
// primitive: each primitive's module adds its own calls to Database.

const { AsyncLocalStorage } = require('node:async_hooks');
const { addon } = require('./native.js');
const { WriterQueue, fast } = require('./calls.js');
const { U32, int, maintenanceReport, optMs, rowsToObjects, sqlParams, text } = require('./convert.js');
const { call, guarded, invalid, unwrap } = require('./errors.js');
const { OPEN_OPTIONS, opts } = require('./options.js');

/**
 * A clock that only moves when told to (tests: `new ManualClock(ms)`, then
 * `open(path, { clock })`). Its time is ms since the Unix epoch, from 1970
 * to the end of 9999; a time or an advance outside that is InvalidArgument
 * and leaves it as it was.
 */
class ManualClock {
  constructor(nowMs) {
    this._native = new addon.ManualClock();
    if (nowMs !== undefined) unwrap(guarded(() => this._native.startAt(nowMs)));
  }

  /** Moves time forward by `ms`. */
  advance(ms) {
    unwrap(guarded(() => this._native.advance(ms)));
  }

  /** The clock's time (ms since the Unix epoch). */
  now() {
    return this._native.now();
  }
}

/**
 * Opens (creating if needed) the honker file at `path`: WAL mode, honker's
 * tables migrated, your own tables left alone.
 */
async function open(file, options) {
  options = opts(options, OPEN_OPTIONS);
  text('path', file);
  const { clock, ...rest } = options;
  if (rest.durability !== undefined) text('durability', rest.durability);
  int('readers', rest.readers, ...U32);
  int('maxPayloadBytes', rest.maxPayloadBytes, ...U32);
  for (const k of ['busyTimeout', 'watchFallback', 'autoMaintainEvery']) optMs(k, rest[k]);
  const fastPath = rest.durability !== 'full';
  if (clock !== undefined) {
    if (!(clock instanceof ManualClock)) throw invalid('clock must be a ManualClock');
    return new Database(unwrap(guarded(() => addon.openWithClock(file, rest, clock._native))), fastPath);
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
    return this._writer.run(() => call(() => this._native.execute(text('sql', sql), sqlParams(params))));
  }

  /** A read-only query on a reader connection: one object per row. */
  async query(sql, params = []) {
    return rowsToObjects(await call(() => this._native.query(text('sql', sql), sqlParams(params))));
  }

  /** A handle on the stream `name` (creating it writes nothing). */

  /** The schedules of this file (cron and `@every`; each fire once however many processes run the scheduler). */

  /** A handle on the named lock `name` (creating it writes nothing). */

  /**
   * A handle on the rate limiter `name`: `limit` calls per `per` ms per key,
   * `burst` (1) of them at once after idling. The parameters are stored in
   * the file on first use, for every process; other values are
   * InvalidArgument unless `update: true`, which changes them for every
   * process. With neither `limit` nor `per`, the limiter as stored
   * (NotFound if none is).
   */

  /**
   * Sends a notification on `channel` to every listener of any process;
   * with `{ tx }` it is delivered only if your transaction commits.
   * Resolves to its id.
   */

  /**
   * `for await (const n of db.listen('orders', { signal }))`: every
   * notification on `channel` committed after this call, in commit order,
   * each once, from any process. Behind the channel's window the iterator
   * rejects once with Trimmed (`.missed`); iterate again to go on. Ends when
   * `signal` aborts, the loop breaks, or `close()`.
   */

  /** The channel's window: `{ maxAge (ms), maxCount }` (defaults: 24 h, 10,000). */

  /** Sets the channel's window for every process; maintenance trims past it. */

  /** Prunes finished jobs and results past retention. */
  /** Every queue's metrics (see Queue#metrics), by name. */

  /**
   * Every queue's metrics in Prometheus's text format, for the application's
   * own `/metrics` route (`honker metrics DB` prints the same).
   */

  async maintain() {
    txId(this, undefined);
    return maintenanceReport(await this._writer.run(() => call(() => this._native.maintain())));
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
    return call(() => this._native.execute(text('sql', sql), sqlParams(params)));
  }

  /** Sees the transaction's own uncommitted writes. */
  async query(sql, params = []) {
    return rowsToObjects(await call(() => this._native.query(text('sql', sql), sqlParams(params))));
  }
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

// A method another module adds to `cls` (a primitive's calls on Database,
// the groups' on Stream), as a class body would: not enumerable.
function method(cls, fn) {
  Object.defineProperty(cls.prototype, fn.name, { value: fn, writable: true, configurable: true });
}

module.exports = {
  method,
  Database,
  ManualClock,
  Transaction,
  open,
  txId,
};
