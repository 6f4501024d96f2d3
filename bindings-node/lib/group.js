'use strict';
// Consumer groups of a stream.

const { FAST_MAX, fast, write } = require('./calls.js');
const { ID, U32, bool, date, groupDeadLetter, groupEvent, groupInfo, int, iterable, need, optMs, optText, text } = require('./convert.js');
const { method, txId } = require('./database.js');
const { GROUP_BATCH, PAGE_LIMIT } = require('./defaults.js');
const { call, describe, guarded, invalid, unwrap } = require('./errors.js');
const { CLAIM_OPTIONS, EVENT_HEARTBEAT_OPTIONS, EVENT_RETRY_OPTIONS, GROUP_CLAIM_OPTIONS, GROUP_CREATE_OPTIONS, READ_OPTIONS, REMOVE_MEMBER_OPTIONS, TX_OPTIONS, groupCreateArgs, opts } = require('./options.js');
const { Reader, Stream, readerOptions, startArg } = require('./stream.js');

function leaseOf(event) {
  if (event instanceof GroupEvent) return { offset: event.offset, token: event.token };
  if (event !== null && typeof event === 'object' && !Array.isArray(event)) {
    return { offset: need('offset', event.offset, ...ID), token: text('token', event.token) };
  }
  throw invalid(`an event must be a GroupEvent or { offset, token }, got ${describe(event)}`);
}

/**
 * An event delivered to a member of a group, leased until `leaseExpiresAt`.
 * Every method presents the lease token: once the lease is lost (lapsed and
 * reclaimed by another member, or the event finished) they reject with
 * LeaseLost and change nothing.
 */
class GroupEvent {
  constructor(group, d) {
    Object.assign(this, groupEvent(d));
    Object.defineProperty(this, '_group', { value: group });
    // Acked, retried, failed or released here (a Worker then records only
    // that its handler is done).
    Object.defineProperty(this, '_settled', { value: false, writable: true });
  }

  /** Its offset: what a worker's events call `jobId`. */
  get id() {
    return this.offset;
  }

  /** Its deliveries, this one included: a worker's events' `attempts`. */
  get attempts() {
    return this.deliveries;
  }

  /** The group that delivered it. */
  get group() {
    return this._group;
  }

  /**
   * The group is done with it; the next event of its key gets its turn.
   * With `{ tx }` the ack commits or rolls back with your transaction.
   */
  async ack(options) {
    options = opts(options, TX_OPTIONS);
    await this._group.ack(this, options);
    this._settled = true;
  }

  /**
   * A failed delivery: claimable again after `delay` ms (at once by
   * default), recording `error`. Resolves to true when this was its last
   * delivery and the event is now dead.
   */
  async retry(options) {
    options = opts(options, EVENT_RETRY_OPTIONS);
    const died = await this._group.retry(this, options);
    this._settled = true;
    return died;
  }

  /** Sends it to the group's dead letters now, with `error`. */
  async fail(error) {
    await this._group.fail(this, error);
    this._settled = true;
  }

  /** Gives it back, claimable at once, its delivery not counted. */
  async release() {
    await this._group.release(this);
    this._settled = true;
  }

  /** Extends the lease to now + `extend` ms (default: the group's lease); resolves to the new end. */
  async heartbeat(options) {
    options = opts(options, EVENT_HEARTBEAT_OPTIONS);
    this.leaseExpiresAt = await this._group.heartbeat(this, options);
    return this.leaseExpiresAt;
  }
}

/**
 * `for await (const event of group.consume('member-1', { signal }))`: this
 * member's events one at a time, claimed `batch` at once, sleeping (off the
 * event loop) until something is claimable. Finish each one (`ack`,
 * `retry`, `fail`, `release`); one left alone comes back after its lease.
 * Closing (`break`, `signal`, `close()`) releases the events claimed and
 * not handed out. Behind the stream's age limit the iterator rejects once
 * with Trimmed (`.missed`); iterate again to go on.
 */
class GroupConsumer extends Reader {
  constructor(group, n, wait, signal) {
    super(group._db, n, wait, signal);
    this._group = group;
    this.member = n.member;
  }

  _record(raw) {
    return new GroupEvent(this._group, raw);
  }

  async _close() {
    await call(() => this._opening.close());
  }
}

/**
 * A consumer group of a stream (`stream.group(name)`): competing members,
 * each event handled by one of them under a lease and token, events of one
 * key in order and one at a time, dead letters after `maxDeliveries`.
 * At-least-once: an event whose lease lapses runs again on another member.
 */
class Group {
  constructor(stream, n) {
    this._stream = stream;
    this._db = stream._db;
    this._native = n;
  }

  get name() {
    return this._native.name;
  }

  get stream() {
    return this._stream;
  }

  /**
   * Creates the group at `start` ('beginning', 'latest', an offset or a
   * Date); resolves to its next offset. Idempotent: an existing group keeps
   * its place and takes the options given (`GroupCreateOptions`).
   */
  async create(options) {
    options = opts(options, GROUP_CREATE_OPTIONS);
    const at = startArg(options.start ?? 'beginning');
    const o = groupCreateArgs(options);
    const n = this._native;
    return write(this._db, txId(this._db, undefined), this._db._fast, () => n.tryCreate(at, o), () => n.create(at, o));
  }

  /** Deletes the group with its pending events, dead letters and members; resolves to whether it existed. */
  async delete() {
    const n = this._native;
    return write(this._db, txId(this._db, undefined), this._db._fast, () => n.tryDelete(), () => n.delete());
  }

  /**
   * Up to `n` (1) events for `member` (an array with `.missed`: events the
   * stream's age limit removed before the group handled them). Events
   * waiting in the group (lapsed, released, retried, or whose key came
   * free) come first, oldest idle first, then new ones. `lease` ms (the
   * group's); `wait` ms (0) to sleep for something claimable.
   */
  async claim(member, options) {
    options = opts(options, GROUP_CLAIM_OPTIONS);
    text('member', member);
    const { n = 1, lease, wait = 0 } = options;
    need('n', n, ...U32);
    optMs('lease', lease);
    if (typeof wait !== 'number' || !(wait >= 0)) throw invalid(`wait must be a number of ms, got ${describe(wait)}`);
    const native = this._native;
    const claimed =
      wait > 0
        ? await call(() => native.claim(member, n, lease, wait))
        : await write(
            this._db,
            txId(this._db, undefined),
            this._db._fast,
            () => native.tryClaim(member, n, lease, 0),
            () => native.claim(member, n, lease, 0),
          );
    const events = claimed.events.map((d) => new GroupEvent(this, d));
    events.missed = claimed.missed;
    return events;
  }

  /**
   * Acks an event delivered here (a GroupEvent) or elsewhere (`{ offset,
   * token }`, as another process or surface hands it over). With `{ tx }`,
   * in your transaction.
   */
  async ack(event, options) {
    options = opts(options, TX_OPTIONS);
    const { offset, token } = leaseOf(event);
    const tx = txId(this._db, options.tx);
    const n = this._native;
    await write(this._db, tx, this._db._fast, () => n.tryAck(offset, token, tx), () => n.ack(offset, token, tx));
  }

  /** `GroupEvent.retry` for an event delivered here or elsewhere (`{ offset, token }`). */
  async retry(event, options) {
    options = opts(options, EVENT_RETRY_OPTIONS);
    const { offset, token } = leaseOf(event);
    const delay = optMs('delay', options.delay);
    const error = optText('error', options.error);
    const n = this._native;
    return write(
      this._db,
      txId(this._db, undefined),
      this._db._fast,
      () => n.tryRetry(offset, token, delay, error),
      () => n.retry(offset, token, delay, error),
    );
  }

  /** `GroupEvent.fail` for an event delivered here or elsewhere. */
  async fail(event, error) {
    const { offset, token } = leaseOf(event);
    text('error', error);
    const n = this._native;
    await write(
      this._db,
      txId(this._db, undefined),
      this._db._fast,
      () => n.tryFail(offset, token, error),
      () => n.fail(offset, token, error),
    );
  }

  /** `GroupEvent.release` for an event delivered here or elsewhere. */
  async release(event) {
    const { offset, token } = leaseOf(event);
    const n = this._native;
    await write(
      this._db,
      txId(this._db, undefined),
      this._db._fast,
      () => n.tryRelease(offset, token),
      () => n.release(offset, token),
    );
  }

  /** `GroupEvent.heartbeat` for an event delivered here or elsewhere; resolves to the lease's new end. */
  async heartbeat(event, options) {
    options = opts(options, EVENT_HEARTBEAT_OPTIONS);
    const { offset, token } = leaseOf(event);
    const extend = optMs('extend', options.extend);
    const n = this._native;
    const at = await write(
      this._db,
      txId(this._db, undefined),
      this._db._fast,
      () => n.tryHeartbeat(offset, token, extend),
      () => n.heartbeat(offset, token, extend),
    );
    return date(at);
  }

  /** Acks several events in one transaction: all or none (a stale token anywhere rejects with LeaseLost). */
  async ackMany(events) {
    const leases = Array.from(iterable('events', events), leaseOf);
    const n = this._native;
    await write(
      this._db,
      txId(this._db, undefined),
      this._db._fast && leases.length <= FAST_MAX,
      () => n.tryAckMany(leases),
      () => n.ackMany(leases),
    );
  }

  /**
   * Removes `member`; one that holds events rejects with InvalidArgument
   * unless `{ force: true }`, and then its events are claimable at once.
   * Resolves to how many it held.
   */
  async removeMember(member, options) {
    options = opts(options, REMOVE_MEMBER_OPTIONS);
    text('member', member);
    const { force = false } = options;
    bool('force', force);
    const n = this._native;
    return write(
      this._db,
      txId(this._db, undefined),
      this._db._fast,
      () => n.tryRemoveMember(member, force),
      () => n.removeMember(member, force),
    );
  }

  /** Up to `limit` (100) dead letters with offsets above `after` (0). */
  async dead(options) {
    options = opts(options, READ_OPTIONS);
    const after = int('after', options.after ?? 0, ...ID);
    const limit = int('limit', options.limit ?? PAGE_LIMIT, ...U32);
    const n = this._native;
    const rows = await fast(this._db._fast, () => n.tryDead(after, limit), () => n.dead(after, limit));
    return rows.map(groupDeadLetter);
  }

  /** Makes the dead letter at `offset` claimable again, its deliveries counted afresh (NotFound if none). */
  async redrive(offset) {
    need('offset', offset, ...ID);
    const n = this._native;
    await write(this._db, txId(this._db, undefined), this._db._fast, () => n.tryRedrive(offset), () => n.redrive(offset));
  }

  /** Re-drives every dead letter; resolves to how many. */
  async redriveAll() {
    txId(this._db, undefined);
    return this._db._writer.run(() => call(() => this._native.redriveAll()));
  }

  /** Position, lag, pending, delivered and dead counts, oldest pending age (ms), members, options. */
  async info() {
    const n = this._native;
    return groupInfo(await fast(this._db._fast, () => n.tryInfo(), () => n.info()));
  }

  /**
   * `member` as an async iterator of events (see `GroupConsumer`). Options:
   * batch (10), lease (ms; the group's), wait (1,000 ms: each sleep between
   * checks), signal.
   */
  consume(member, options) {
    options = opts(options, CLAIM_OPTIONS);
    text('member', member);
    const { batch = GROUP_BATCH, lease } = options;
    const { wait, signal } = readerOptions(options);
    need('batch', batch, ...U32);
    optMs('lease', lease);
    const n = unwrap(guarded(() => this._native.consume(member, batch, lease)));
    return new GroupConsumer(this, n, wait, signal);
  }
}

// The stream's call for its groups (stream.js names no group).
/** A handle on the consumer group `name` (writes nothing; `create()` makes the group). */
method(Stream, function group(name) {
  text('name', name);
  return new Group(this, unwrap(guarded(() => this._native.group(name))));
});

module.exports = {
  Group,
  GroupConsumer,
  GroupEvent,
};
