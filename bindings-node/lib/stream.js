'use strict';
// Streams, subscriptions, channels and listeners.

const { FAST_MAX, fast, wouldWait, write } = require('./calls.js');
const { ID, U32, bool, consumerInfo, encode, groupInfo, int, iterable, need, notification, optMs, optText, packed, streamEvent, text } = require('./convert.js');
const { Database, method, txId } = require('./database.js');
const { COMMIT_EVERY, COMMIT_INTERVAL, PAGE_LIMIT, POLL_WAIT, SUBSCRIBE_BATCH } = require('./defaults.js');
const { call, describe, guarded, invalid, unwrap } = require('./errors.js');
const { CHANNEL_RETENTION_OPTIONS, PUBLISH_MANY_OPTIONS, PUBLISH_OPTIONS, READER_OPTIONS, READ_OPTIONS, STREAM_RETENTION_OPTIONS, SUBSCRIBE_OPTIONS, TX_OPTIONS, opts, publishArgs, publishManyArgs } = require('./options.js');
const { captureTrace } = require('./trace.js');

function readerOptions(options) {
  const { wait = POLL_WAIT, signal } = options;
  if (typeof wait !== 'number' || !(wait > 0)) {
    throw invalid(`wait must be a positive number of ms, got ${describe(wait)}`);
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw invalid('signal must be an AbortSignal');
  return { wait, signal };
}

function startArg(start) {
  if (start === 'beginning' || start === 'latest') return { kind: start };
  if (start instanceof Date) {
    const t = start.getTime();
    if (!Number.isFinite(t)) throw invalid('start is an invalid Date');
    return { kind: 'time', at: t };
  }
  if (Number.isInteger(start)) return { kind: 'offset', at: need('start', start, ...ID) };
  throw invalid(`start must be 'beginning', 'latest', an offset or a Date, got ${describe(start)}`);
}

/**
 * What a claim stream, a subscription, a listener and a group consumer
 * share: the async iterator (each wait holds no thread, one native `next`
 * at a time), `signal`, `close` and `using`. An item is handed out once; an iteration that a fast path
 * served without waiting yields to the event loop every FAST_MAX items, so
 * a long backlog never starves other work.
 */
class Reader {
  constructor(db, opening, wait, signal) {
    this._db = db;
    this._opening = opening; // the native reader, or a Promise of it
    this._wait = wait;
    this._signal = signal;
    this._closing = null;
    this._streak = 0;
    this._onAbort = () => this.close().catch(() => {});
    if (signal) {
      if (signal.aborted) this._onAbort();
      else signal.addEventListener('abort', this._onAbort, { once: true });
    }
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  // The native reader (a subclass may open it on first use).
  _open() {
    return this._opening;
  }

  async next() {
    for (;;) {
      if (this._closing) {
        await this._closing;
        return { done: true, value: undefined };
      }
      const n = await this._open();
      if (this._closing) continue;
      const raw = this._readNow(n, this._wait) ?? (await call(() => n.next(this._wait)));
      if (raw) {
        if (++this._streak >= FAST_MAX) {
          this._streak = 0;
          await new Promise(setImmediate);
        }
        return { done: false, value: this._record(raw) };
      }
      this._streak = 0;
      // null: the wait ran out (wait again) or the reader was closed.
    }
  }

  /**
   * One bounded wait, for code that polls rather than iterates: the next
   * item, or null once `wait` ms pass with none (0: only what is there now)
   * or the reader is closed. It shares the iterator's place; don't run the
   * two at once.
   */
  async nextWithin(wait) {
    if (typeof wait !== 'number' || !(wait >= 0) || !Number.isFinite(wait)) {
      throw invalid(`wait must be a number of ms >= 0, got ${describe(wait)}`);
    }
    if (this._closing) return null;
    const n = await this._open();
    if (this._closing) return null;
    const ms = Math.ceil(wait);
    const raw = this._readNow(n, ms) ?? (ms > 0 || !this._readsAll ? await call(() => n.next(ms)) : null);
    return raw ? this._record(raw) : null;
  }

  // Whether `_readNow` finding nothing means there is nothing now (it read
  // what is committed), so that a zero wait needs no native `next`.
  get _readsAll() {
    return true;
  }

  // What is already buffered or committed, read right here (tryNext with no
  // wait: with the fast path, or when no wait is wanted), without an await;
  // null when a read would have to wait. Only a wait goes off the loop.
  _readNow(n, wait) {
    if (!this._db._fast && wait > 0) return null;
    const r = guarded(() => n.tryNext(0));
    return wouldWait(r) ? null : (unwrap(r) ?? null);
  }

  async return() {
    await this.close();
    return { done: true, value: undefined };
  }

  async [Symbol.asyncDispose]() {
    await this.close();
  }

  /** Whether `close()` was called (or `signal` aborted). */
  get closed() {
    return this._closing !== null;
  }

  /** Stops and wakes a waiting iteration; resolves once closed. Idempotent. */
  close() {
    if (!this._closing) {
      if (this._signal) this._signal.removeEventListener('abort', this._onAbort);
      this._closing = this._close();
    }
    return this._closing;
  }
}

/**
 * `for await (const event of stream.subscribe('projector', { signal }))`:
 * each event once, in offset order, from the consumer's committed place,
 * sleeping (off the event loop) until any process publishes. An event
 * counts as processed when the next one is asked for; with auto-commit
 * that place is committed every `commitEvery` events or `commitInterval`
 * ms and on close (a loop's `break`, `signal`, `close()`): at-least-once.
 * A consumer behind retention: the iterator rejects once with Trimmed
 * (`.missed`); iterate again to go on from the oldest retained event.
 */
class Subscription extends Reader {
  constructor(stream, consumer, opening, wait, signal) {
    super(stream._db, opening, wait, signal);
    this._stream = stream;
    this.consumer = consumer;
  }

  _record(raw) {
    return streamEvent(raw);
  }

  /**
   * Commits the place after `event` (an event or its offset): it and all
   * before it are processed. With `{ tx }` the offset commits or rolls back
   * with your transaction (a local projection, effectively exactly-once).
   */
  async commit(event, options) {
    options = opts(options, TX_OPTIONS);
    const offset = need('offset', event !== null && typeof event === 'object' ? event.offset : event, ...ID);
    const tx = txId(this._db, options.tx);
    const n = await this._opening;
    return write(this._db, tx, this._db._fast, () => n.tryCommit(offset, tx), () => n.commit(offset, tx));
  }

  async _close() {
    let n;
    try {
      n = await this._opening;
    } catch {
      return; // it never opened: nothing to commit
    }
    await call(() => n.close());
  }
}

/** See `Database.listen`. */
class Listener extends Reader {
  constructor(db, n, wait, signal) {
    super(db, n, wait, signal);
    this.channel = n.channel;
  }

  _record(raw) {
    return notification(raw);
  }

  async _close() {
    this._opening.close();
  }
}

/** A handle on one stream (`db.stream(name)`). */
class Stream {
  constructor(db, n) {
    this._db = db;
    this._native = n;
  }

  get name() {
    return this._native.name;
  }

  /**
   * Appends an event; resolves to its offset (dense from 1 within the
   * stream). With `{ tx }` it exists only if your transaction commits. The
   * options are core's (options.js checks them: index.d.ts's PublishOptions).
   */
  async publish(payload, options) {
    options = opts(options, PUBLISH_OPTIONS);
    const args = publishArgs(options);
    const p = encode(payload);
    const tx = txId(this._db, options.tx);
    const { traceparent, tracestate } = captureTrace();
    const n = this._native;
    return write(
      this._db,
      tx,
      this._db._fast,
      () => n.tryPublish(p, args, tx, traceparent, tracestate),
      () => n.publish(p, args, tx, traceparent, tracestate),
    );
  }

  /** Appends events in one transaction (up to 10,000); resolves to their offsets. */
  async publishMany(payloads, options) {
    options = opts(options, PUBLISH_MANY_OPTIONS);
    const args = publishManyArgs(options);
    const list = Array.from(iterable('payloads', payloads), encode);
    const ps = packed(list);
    const tx = txId(this._db, options.tx);
    const { traceparent, tracestate } = captureTrace();
    const n = this._native;
    const offsets = await write(
      this._db,
      tx,
      this._db._fast && list.length <= FAST_MAX,
      () => n.tryPublishMany(ps, args, tx, traceparent, tracestate),
      () => n.publishMany(ps, args, tx, traceparent, tracestate),
    );
    return Array.from(offsets);
  }

  /** Up to `limit` (100) events with offsets above `after` (0): paging. */
  async read(options) {
    options = opts(options, READ_OPTIONS);
    const after = int('after', options.after ?? 0, ...ID);
    const limit = int('limit', options.limit ?? PAGE_LIMIT, ...U32);
    const n = this._native;
    const rows = await fast(this._db._fast, () => n.tryRead(after, limit), () => n.read(after, limit));
    return rows.map(streamEvent);
  }

  /** Commits `nextOffset` (the next event to read) for `consumer`; it never moves back. */
  async commit(consumer, nextOffset, options) {
    options = opts(options, TX_OPTIONS);
    text('consumer', consumer);
    need('nextOffset', nextOffset, ...ID);
    const tx = txId(this._db, options.tx);
    const n = this._native;
    return write(
      this._db,
      tx,
      this._db._fast,
      () => n.tryCommit(consumer, nextOffset, tx),
      () => n.commit(consumer, nextOffset, tx),
    );
  }

  /** Moves `consumer` to `nextOffset`, back or forward. */
  async seek(consumer, nextOffset) {
    text('consumer', consumer);
    need('nextOffset', nextOffset, ...ID);
    const n = this._native;
    await write(
      this._db,
      txId(this._db, undefined),
      this._db._fast,
      () => n.trySeek(consumer, nextOffset),
      () => n.seek(consumer, nextOffset),
    );
  }

  /** The consumer's next offset, or null if it has none. */
  async position(consumer) {
    text('consumer', consumer);
    const n = this._native;
    return (await fast(this._db._fast, () => n.tryPosition(consumer), () => n.position(consumer))) ?? null;
  }

  /** Length, first/last offsets, every consumer's place and lag, and every group's. */
  async info() {
    const n = this._native;
    const i = await fast(this._db._fast, () => n.tryInfo(), () => n.info());
    return {
      length: i.length,
      firstOffset: i.firstOffset ?? null,
      lastOffset: i.lastOffset,
      consumers: i.consumers.map(consumerInfo),
      groups: i.groups.map(groupInfo),
    };
  }

  /** `{ maxAge (ms or null), maxCount (or null), trimPassed }`: defaults 7 days, none, false. */
  async retention() {
    const n = this._native;
    const r = await fast(this._db._fast, () => n.tryRetention(), () => n.retention());
    return { maxAge: r.maxAge ?? null, maxCount: r.maxCount ?? null, trimPassed: r.trimPassed };
  }

  /**
   * Sets the stream's retention for every process: `maxAge` (ms, or null
   * for none: required), `maxCount`, `trimPassed` (trim only what every
   * consumer has passed). Maintenance applies it.
   */
  async setRetention(options) {
    options = opts(options, STREAM_RETENTION_OPTIONS);
    const { maxAge, maxCount = null, trimPassed = false } = options;
    if (maxAge === undefined) throw invalid('maxAge must be given: a number of ms, or null for no age limit');
    if (maxAge !== null) optMs('maxAge', maxAge);
    int('maxCount', maxCount, 1, Number.MAX_SAFE_INTEGER);
    bool('trimPassed', trimPassed);
    const n = this._native;
    txId(this._db, undefined);
    await this._db._writer.run(() => call(() => n.setRetention(maxAge, maxCount, trimPassed)));
  }

  /** Applies the retention now; resolves to how many events went. */
  async trim() {
    txId(this._db, undefined);
    return this._db._writer.run(() => call(() => this._native.trim()));
  }

  /**
   * An independent consumer (see `Subscription`): from its committed offset,
   * or `start` ('beginning', 'latest', an offset, a Date) if it has none,
   * stored at once. Options: batch (100), autoCommit (true), commitEvery
   * (1,000), commitInterval (1,000 ms), wait (1,000 ms: each sleep between
   * checks), signal.
   */
  subscribe(consumer, options) {
    options = opts(options, SUBSCRIBE_OPTIONS);
    text('consumer', consumer);
    const {
      start = 'beginning',
      batch = SUBSCRIBE_BATCH,
      autoCommit = true,
      commitEvery = COMMIT_EVERY,
      commitInterval = COMMIT_INTERVAL,
    } = options;
    const { wait, signal } = readerOptions(options);
    const at = startArg(start);
    need('batch', batch, ...U32);
    bool('autoCommit', autoCommit);
    need('commitEvery', commitEvery, ...U32);
    if (typeof commitInterval !== 'number') {
      throw invalid(`commitInterval must be a number of ms, got ${describe(commitInterval)}`);
    }
    txId(this._db, undefined); // its first write would wait for the transaction's writer
    const auto = autoCommit ? { every: commitEvery, interval: commitInterval } : null;
    const n = this._native;
    const opening = this._db._writer.run(() => call(() => n.subscribe(consumer, at, batch, auto)));
    opening.catch(() => {}); // reported by the first next(), commit() or close()
    return new Subscription(this, consumer, opening, wait, signal);
  }
}

// The database's calls for this module (database.js names no primitive).
method(Database, function stream(name) {
  text('name', name);
  return new Stream(this, unwrap(guarded(() => this._native.stream(name))));
});

method(Database, async function notify(channel, payload, options) {
  options = opts(options, TX_OPTIONS);
  text('channel', channel);
  const p = encode(payload);
  const tx = txId(this, options.tx);
  const n = this._native;
  return write(this, tx, this._fast, () => n.tryNotify(channel, p, tx), () => n.notify(channel, p, tx));
});

method(Database, function listen(channel, options) {
  options = opts(options, READER_OPTIONS);
  text('channel', channel);
  const { wait, signal } = readerOptions(options);
  const n = unwrap(guarded(() => this._native.listen(channel)));
  return new Listener(this, n, wait, signal);
});

method(Database, async function channelRetention(channel) {
  text('channel', channel);
  return call(() => this._native.channelRetention(channel));
});

method(Database, async function setChannelRetention(channel, options) {
  options = opts(options, CHANNEL_RETENTION_OPTIONS);
  text('channel', channel);
  const { maxAge, maxCount } = options;
  if (typeof maxAge !== 'number') throw invalid(`maxAge must be a number of ms, got ${describe(maxAge)}`);
  if (int('maxCount', maxCount, 1, Number.MAX_SAFE_INTEGER) === undefined) {
    throw invalid('maxCount must be given (a positive integer)');
  }
  txId(this, undefined);
  const set = { maxAge, maxCount };
  await this._writer.run(() => call(() => this._native.channelRetention(channel, set)));
});

module.exports = {
  Listener,
  Reader,
  Stream,
  Subscription,
  readerOptions,
  startArg,
};
