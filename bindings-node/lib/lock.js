'use strict';
// Locks (with fencing tokens) and rate limiters.

const { fast, write } = require('./calls.js');
const { ID, bool, date, int, lockGrant, lockInfo, need, optMs, rateDecision, text } = require('./convert.js');
const { Database, method, txId } = require('./database.js');
const { LOCK_TTL, RATE_COST } = require('./defaults.js');
const { LeaseLost, Timeout, call, guarded, invalid, unwrap } = require('./errors.js');
const { LOCK_ACQUIRE_OPTIONS, LOCK_HOLD_OPTIONS, LOCK_RENEW_OPTIONS, LOCK_TRY_ACQUIRE_OPTIONS, RATE_ACQUIRE_OPTIONS, RATE_LIMITER_OPTIONS, RATE_TRY_OPTIONS, TX_OPTIONS, lockTryAcquireArgs, opts } = require('./options.js');

// `start(cancel)`: a native wait, with a token that `signal` cancels (none
// without a signal; cancelled at once if it has aborted already).
async function cancellable(native, signal, start) {
  if (!signal) return call(() => start(undefined));
  const cancel = native.cancelToken();
  const abort = () => cancel.cancel();
  if (signal.aborted) abort();
  else signal.addEventListener('abort', abort, { once: true });
  try {
    return await call(() => start(cancel));
  } finally {
    signal.removeEventListener('abort', abort);
  }
}

function lockLost(name) {
  return new LeaseLost('LEASE_LOST', `lock ${JSON.stringify(name)} was lost while held (another owner took it after its TTL lapsed)`);
}

function grant(d) {
  return d === null || d === undefined ? null : lockGrant(d);
}

function signalArg(signal) {
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalid('signal must be an AbortSignal');
  return signal;
}

/**
 * A handle on one named lock (`db.lock(name)`). Every grant carries a
 * fencing token greater than every earlier grant's; fence the guarded
 * write with it inside its transaction (`lock.fence(tx, token)`) and a
 * stale token throws LeaseLost, rolling the transaction back. TTLs are ms
 * (1 ms to 30 days; 60,000 when left out).
 */
class Lock {
  constructor(db, n) {
    this._db = db;
    this._native = n;
  }

  get name() {
    return this._native.name;
  }

  /** A grant for `owner`, or null while another owner holds it; with `{ tx }`, held only if it commits. */
  async tryAcquire(owner, options) {
    options = opts(options, LOCK_TRY_ACQUIRE_OPTIONS);
    text('owner', owner);
    const o = lockTryAcquireArgs(options);
    const t = txId(this._db, options.tx);
    const n = this._native;
    return grant(await write(this._db, t, this._db._fast, () => n.tryTryAcquire(owner, o, t), () => n.tryAcquire(owner, o, t)));
  }

  /**
   * `tryAcquire`, waiting up to `wait` ms for the lock to come free (it
   * sleeps until any process releases it, never polling); null when the
   * wait ran out or `signal` aborted (nothing stays held).
   */
  async acquire(owner, options) {
    options = opts(options, LOCK_ACQUIRE_OPTIONS);
    text('owner', owner);
    const { ttl = LOCK_TTL, wait = 0, signal } = options;
    optMs('ttl', ttl);
    optMs('wait', wait);
    signalArg(signal);
    return grant(await this._waiting(signal, (cancel) => this._native.acquire(owner, ttl, wait, cancel)));
  }

  async _waiting(signal, start) {
    if (signal && signal.aborted) return null;
    return cancellable(this._native, signal, start);
  }

  /** Extends the lock held with `token` to `ttl` ms from now; resolves to the new expiry. */
  async renew(token, options) {
    options = opts(options, LOCK_RENEW_OPTIONS);
    need('token', token, ...ID);
    const { ttl = LOCK_TTL } = options;
    optMs('ttl', ttl);
    const n = this._native;
    return date(await write(this._db, undefined, this._db._fast, () => n.tryRenew(token, ttl), () => n.renew(token, ttl)));
  }

  /** Releases the lock held with `token`; whether it was held with it. */
  async release(token, options) {
    options = opts(options, TX_OPTIONS);
    need('token', token, ...ID);
    const t = txId(this._db, options.tx);
    const n = this._native;
    return write(this._db, t, this._db._fast, () => n.tryRelease(token, t), () => n.release(token, t));
  }

  /**
   * Inside the transaction `tx` that makes the guarded write: resolves
   * while `token` holds the lock, else throws LeaseLost (let the
   * transaction roll back). Nothing can change the lock before it commits.
   */
  async fence(tx, token) {
    if (tx === undefined || tx === null) throw invalid('fence needs the transaction of the guarded write');
    need('token', token, ...ID);
    const t = txId(this._db, tx);
    const n = this._native;
    await fast(this._db._fast, () => n.tryFence(t, token), () => n.fence(t, token));
  }

  /** The holder, if any (lapsed or not). */
  async info() {
    const n = this._native;
    const d = await fast(true, () => n.tryInfo(), () => n.info());
    return d === null ? null : lockInfo(d);
  }

  /**
   * Takes the lock for a block of work and renews it every `every` ms (a
   * third of `ttl`) until released: `await using held = await
   * lock.hold(owner, { ttl, wait })`, or `withLock`. Waits up to `wait` ms
   * (0: one try) and throws Timeout if it stays held (or `signal` aborts).
   * `held.signal` aborts (with a LeaseLost) if the lock is lost.
   */
  async hold(owner, options) {
    options = opts(options, LOCK_HOLD_OPTIONS);
    text('owner', owner);
    const { ttl = LOCK_TTL, wait = 0, every, signal } = options;
    optMs('ttl', ttl);
    optMs('wait', wait);
    optMs('every', every);
    signalArg(signal);
    const native = await this._waiting(signal, (cancel) => this._native.hold(owner, ttl, wait, every, cancel));
    if (native === null) {
      if (signal && signal.aborted) throw signal.reason;
      throw new Timeout('TIMEOUT', `lock ${JSON.stringify(this.name)} stayed held by another owner for ${wait} ms`);
    }
    return new HeldLock(this, native);
  }

  /**
   * Runs `fn(held)` holding the lock (see `hold`), releasing it when `fn`
   * settles. If the lock is lost meanwhile, `held.signal` aborts so `fn`
   * can stop, and withLock then rejects with LeaseLost. Resolves to what
   * `fn` resolves to.
   */
  async withLock(owner, options, fn) {
    if (typeof options === 'function') [options, fn] = [{}, options];
    if (typeof fn !== 'function') throw invalid('withLock needs a function');
    const held = await this.hold(owner, options);
    let value;
    try {
      value = await fn(held);
    } finally {
      await held.release();
    }
    if (held.lost) throw lockLost(this.name);
    return value;
  }
}

/** A lock held by a block of work (`Lock.hold`). */
class HeldLock {
  constructor(lock, native) {
    this._lock = lock;
    this._native = native;
    this._controller = new AbortController();
    // Core tells when the renewal found the lock lost; nothing polls, and
    // the wait holds no thread (it ends with the hold).
    native.waitLost().then(
      (r) => {
        if (r === true && !this._controller.signal.aborted) this._controller.abort(lockLost(lock.name));
      },
      () => {},
    );
  }

  /** The fencing token of this hold. */
  get token() {
    return this._native.token;
  }

  /** When the lock lapses unless renewed again. */
  get expiresAt() {
    return date(this._native.expiresAt);
  }

  /** Whether the lock was lost while held (then `signal` has aborted too). */
  get lost() {
    return this._lostNow();
  }

  // The renewal that finds the lock lost tells the native hold at once;
  // the watch that aborts the signal hears of it a thread hop later. Read
  // here, the two never disagree (issue 53: `lost` was true up to 1.5 s
  // before the signal aborted).
  _lostNow() {
    const lost = this._native.lost;
    if (lost && !this._controller.signal.aborted) this._controller.abort(lockLost(this._lock.name));
    return lost;
  }

  get renewals() {
    return this._native.renewals;
  }

  /** Aborts (a LeaseLost as its reason) if the lock is lost while held. */
  get signal() {
    this._lostNow();
    return this._controller.signal;
  }

  /** `Lock.fence` with this hold's token. */
  async fence(tx) {
    return this._lock.fence(tx, this.token);
  }

  /** Stops renewing and releases the lock; whether it was still held. */
  async release() {
    return call(() => this._native.release());
  }

  async [Symbol.asyncDispose]() {
    await this.release();
  }
}

/**
 * A handle on one rate limiter (`db.rateLimiter(name, { limit, per, burst })`).
 * Keys are independent (one limit per customer); the default key '' is the
 * limiter's own. `cost` is 0 (a peek) up to `burst`; more is
 * InvalidArgument. In every window of `per` ms a key admits at most
 * `limit + burst - 1` calls (with burst 1, exactly `limit`).
 */
class RateLimiter {
  constructor(db, n) {
    this._db = db;
    this._native = n;
  }

  get name() {
    return this._native.name;
  }

  /** The parameters stored in the file: `{ limit, per, burst }` (`per` in ms). */
  async params() {
    const n = this._native;
    return fast(true, () => n.tryParams(), () => n.params());
  }

  /** Checks `cost` (1) calls for `key` ('') and takes them when allowed; with `{ tx }`, only if it commits. */
  async tryAcquire(key = '', options) {
    options = opts(options, RATE_TRY_OPTIONS);
    text('key', key);
    const { cost = RATE_COST, tx } = options;
    need('cost', cost, ...ID);
    const t = txId(this._db, tx);
    const n = this._native;
    return rateDecision(
      await write(this._db, t, this._db._fast, () => n.tryTryAcquire(key, cost, t), () => n.tryAcquire(key, cost, t)),
    );
  }

  /**
   * `tryAcquire`, checking again when the refusal's `retryAfterMs` has
   * passed while the answer would come within `wait` ms, holding no thread
   * meanwhile: the allowed decision, or the last refusal (at once when its
   * `retryAfterMs` lies beyond the wait, or `signal` aborts).
   */
  async acquire(key = '', options) {
    options = opts(options, RATE_ACQUIRE_OPTIONS);
    const { cost = RATE_COST, wait = 0, signal } = options;
    text('key', key);
    need('cost', cost, ...ID);
    optMs('wait', wait);
    signalArg(signal);
    const n = this._native;
    return rateDecision(await cancellable(n, signal, (cancel) => n.acquire(key, cost, wait, cancel)));
  }
}

// The database's calls for this module (database.js names no primitive).
method(Database, function lock(name) {
  text('name', name);
  return new Lock(this, unwrap(guarded(() => this._native.lock(name))));
});

method(Database, async function rateLimiter(name, options) {
  options = opts(options, RATE_LIMITER_OPTIONS);
  text('name', name);
  const { limit, per, burst, update = false } = options;
  int('limit', limit, ...ID);
  int('burst', burst, ...ID);
  optMs('per', per);
  bool('update', update);
  const n = this._native;
  const open = () => call(() => n.rateLimiter(name, limit, per, burst, update));
  // The limiter as stored is a read: no turn at the writer (it opens inside
  // the caller's transaction too).
  const native = await (limit === undefined && per === undefined ? open() : this._writer.run(open));
  return new RateLimiter(this, native);
});

module.exports = {
  HeldLock,
  Lock,
  RateLimiter,
  signalArg,
};
