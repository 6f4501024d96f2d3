'use strict';
// The worker runtime: handlers registered by task name, run with a concurrency.

const os = require('node:os');
const { addon } = require('./native.js');
const { write } = require('./calls.js');
const { U32, bool, encode, int, optMs, text } = require('./convert.js');
const { Database } = require('./database.js');
const { WORKER_CONCURRENCY, WORKER_GRACE } = require('./defaults.js');
const { LeaseLost, Timeout, call, describe, guarded, invalid, unwrap } = require('./errors.js');
const { Group, GroupEvent } = require('./group.js');
const { HANDLE_OPTIONS, RETRY_ERROR_OPTIONS, RUN_OPTIONS, WORKER_OPTIONS, opts } = require('./options.js');
const { Job, Queue } = require('./queue.js');
const { withTrace } = require('./trace.js');

/**
 * Throw from a handler when no retry can help (an invalid address): the job
 * goes to the dead letters at once, with this message as its error.
 */
class Permanent extends Error {
  constructor(message = 'permanent failure') {
    super(message);
    this.name = 'Permanent';
  }
}

/**
 * Throw from a handler to retry the job after `delay` ms (default: the
 * queue's backoff), spending an attempt: a 429 with Retry-After.
 */
class Retry extends Error {
  constructor(message = 'retry requested', options) {
    options = opts(options, RETRY_ERROR_OPTIONS);
    super(message);
    this.name = 'Retry';
    this.delay = optMs('delay', options.delay);
  }
}

/** Throw from a handler to run the job again after `delay` ms without spending an attempt. */
class Snooze extends Error {
  constructor(delay) {
    if (typeof delay !== 'number') throw invalid(`delay must be a number of milliseconds, got ${describe(delay)}`);
    super(`snoozed for ${delay} ms`);
    this.name = 'Snooze';
    this.delay = delay;
  }
}

// What each way a task finished is called in events: core's names.
const WORKER_EVENTS = ['start', ...addon.finishedEvents(), 'error'];

/**
 * Runs registered handlers for queues (core's worker runtime, the same in
 * every language): a global and a per-queue concurrency limit, claims
 * batched to the free slots, leases renewed while a handler runs, a
 * per-queue timeout (the handler's AbortSignal aborts, and the job is
 * retried), retries with the queue's backoff, dead letters, and a graceful
 * shutdown.
 *
 *     const worker = new Worker(db, { concurrency: 16 });
 *     worker.handle('emails', async (job, signal) => mailer.send(job.payload, { signal }),
 *                   { concurrency: 8, timeout: 30_000 });
 *     await worker.run({ signals: true });   // until SIGTERM, then drains
 *
 * While it runs, the worker also runs the file's scheduler (`scheduler:
 * false` to leave it out): every worker process fires schedules, each
 * boundary once.
 *
 * A handler's resolved value acks the job (and is saved as its result);
 * `Retry` retries it after a delay; any other error retries it with the
 * queue's backoff and dead-letters it once its attempts are spent;
 * `Permanent` dead-letters it at once; `Snooze` runs it later without
 * spending an attempt. Semantics are at-least-once: a handler that ignores
 * its signal after a timeout keeps its slot until it settles, its outcome is
 * discarded, and the retry may run meanwhile. Make handlers idempotent.
 */
class Worker {
  constructor(db, options) {
    options = opts(options, WORKER_OPTIONS);
    if (!(db instanceof Database)) throw invalid('a Worker needs the Database of honker.open()');
    const { concurrency = WORKER_CONCURRENCY, workerId, grace = WORKER_GRACE, scheduler = true } = options;
    int('concurrency', concurrency, ...U32);
    bool('scheduler', scheduler);
    this.workerId = workerId === undefined ? `${os.hostname()}-${process.pid}` : text('workerId', workerId);
    this.concurrency = concurrency;
    this.grace = grace;
    this._db = db;
    // Core checks the options here, before anything runs.
    this._native = unwrap(guarded(() => addon.newWorker(db._native, this.workerId, concurrency, scheduler)));
    this._queues = new Map();
    this._hooks = Object.fromEntries(WORKER_EVENTS.map((k) => [k, []]));
  }

  /** Milliseconds a shutdown gives running handlers before releasing their jobs. */
  get grace() {
    return this._grace;
  }

  set grace(ms) {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw invalid(`grace must be a number of milliseconds, got ${describe(ms)}`);
    }
    this._grace = ms;
  }

  /** The queues with handlers. */
  get queues() {
    return [...this._queues.values()].filter((r) => r.queue).map((r) => r.queue.name);
  }

  /** The consumer groups with handlers, as `[stream, group]`. */
  get groups() {
    return [...this._queues.values()].filter((r) => r.group).map((r) => [r.group.stream.name, r.group.name]);
  }

  /** Whether a shutdown began. */
  get stopping() {
    return this._native.stopping;
  }

  /**
   * The queues whose due jobs a pause held back at this worker's last look
   * (`queue.pause()`, `db.pauseAll()`), each with how many looks (one per
   * wake-up: a commit by any process) found that; a queue leaves it once a
   * look finds it running again or with nothing due.
   */
  get paused() {
    return this._native.paused;
  }

  /**
   * Runs `handler(job, signal)` for `queue`'s jobs. With `task`, the queue
   * carries the envelope `{ task: name, args }` and this handler takes the
   * jobs whose task is `name` (`job.payload.args` are the arguments); a job
   * whose task has no handler goes to the dead letters with
   * `no handler for task <name>`. `concurrency`, `timeout` and `lease` (ms)
   * are the queue's.
   */
  handle(queue, handler, options) {
    options = opts(options, HANDLE_OPTIONS);
    if (queue instanceof Group) return this._handleGroup(queue, handler, options);
    if (typeof handler !== 'function') throw invalid('a handler must be a function');
    const { task, concurrency, timeout, lease } = options;
    if (task !== undefined && (typeof task !== 'string' || task === '')) {
      throw invalid('a task name must be a non-empty string');
    }
    const q = queue instanceof Queue ? queue : this._db.queue(text('queue', queue));
    if (q._db !== this._db) throw invalid('this queue belongs to another Database');
    int('concurrency', concurrency, ...U32);
    const t = optMs('timeout', timeout);
    const l = optMs('lease', lease);
    // Core's rules: one handler per task of the envelope or one for every
    // job, the queue's options named once, none once the run started.
    unwrap(guarded(() => this._native.register(q._native, concurrency, t, l, task)));
    let reg = this._queues.get(sourceKey(q.name, null));
    if (!reg) {
      reg = { queue: q, timeout: t, leaseMs: l ?? q._lease, handler: null, tasks: new Map() };
      this._queues.set(sourceKey(q.name, null), reg);
    }
    if (task === undefined) reg.handler = handler;
    else reg.tasks.set(task, handler);
    return this;
  }

  /**
   * `handle(group, handler, { concurrency, timeout, lease })`: runs
   * `handler(event, signal)` for a consumer group's events as its member
   * named by the worker id. Its return acks the event (a group keeps no
   * results); Retry and other errors retry it (dead after the group's
   * maxDeliveries); Permanent dead-letters it; Snooze retries it after the
   * delay (a group has no snooze that spends no delivery). The group must
   * exist (`group.create()`); registration completes when `run` starts.
   */
  _handleGroup(group, handler, options) {
    if (typeof handler !== 'function') throw invalid('a handler must be a function');
    if (this._native.started) throw invalid('register handlers before the worker runs');
    if (group._db !== this._db) throw invalid('this group belongs to another Database');
    const { task, concurrency, timeout, lease } = options;
    if (task !== undefined) throw invalid('task names a queue\'s task envelope, not a group\'s');
    int('concurrency', concurrency, ...U32);
    const t = optMs('timeout', timeout);
    const l = optMs('lease', lease);
    const key = sourceKey(group.stream.name, group.name);
    if (this._queues.has(key)) {
      throw invalid(`group ${JSON.stringify(group.name)} of stream ${JSON.stringify(group.stream.name)} already has a handler`);
    }
    // Core checks the options and that the group exists (a read): when
    // run starts, which reports it.
    const registering = call(() => this._native.registerGroup(group._native, concurrency, t, l));
    registering.catch(() => {});
    this._queues.set(key, { group, concurrency, timeout: t, lease: l, handler, tasks: new Map(), registering });
    return this;
  }

  /**
   * Calls `hook(event)` for each event of `kind`: `start`, `success`,
   * `retry`, `dead`, `snoozed`, `timed_out`, `lease_lost`, `released`,
   * `settled` (`{ kind, queue, jobId, attempts, ms, error, state }`), or
   * `error` (`{ kind, error, queue, jobId }`: the worker could not record an
   * outcome, or stopped because its claim failed; printed to stderr when no
   * hook listens). A hook that throws is reported on stderr and ignored.
   */
  on(kind, hook) {
    if (!(kind in this._hooks)) throw invalid(`unknown event ${JSON.stringify(kind)}: one of ${WORKER_EVENTS.join(', ')}`);
    if (typeof hook !== 'function') throw invalid('a hook must be a function');
    this._hooks[kind].push(hook);
    return this;
  }

  /**
   * Begins a graceful shutdown (what SIGTERM does with `signals`): no claim
   * from now on; running handlers get `grace` ms, then what still runs is
   * released (no attempt spent) and its signal aborts.
   */
  stop() {
    this._native.stop();
  }

  /**
   * Runs until `stop()`, `signal` aborts, or (with `signals`) SIGTERM or
   * SIGINT, then drains: running handlers get `grace` ms to finish, what
   * still runs is released (no attempt spent) and its signal aborted, and
   * run resolves once those handlers settle too (their outcomes are
   * discarded). A second signal ends the grace period, and that wait, at
   * once. A Worker runs once.
   */
  async run(options) {
    options = opts(options, RUN_OPTIONS);
    const { signal, signals = false } = options;
    for (const r of this._queues.values()) if (r.registering) await r.registering;
    const n = this._native;
    unwrap(guarded(() => n.start())); // a Worker runs once, with a handler
    const running = new Map(); // key -> { abort, done }
    // A second signal ends the grace period, and the wait for handlers
    // told to stop.
    let hurry;
    const hurried = new Promise((resolve) => (hurry = resolve));
    const onSignal = () => {
      if (n.signalled()) hurry(); // core's policy: a second signal ends the grace
      this.stop();
    };
    if (signals) {
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    }
    const onAbort = () => this.stop();
    if (signal) {
      if (signal.aborted) this.stop();
      else signal.addEventListener('abort', onAbort, { once: true });
    }
    // Core tells which running handlers it gave up on (timed out, lease
    // lost, released by a shutdown) when it does: their signals abort then.
    let watching = true;
    const watch = (async () => {
      for (;;) {
        // Read before `watching` is looked at: a wake after it is not missed.
        const seen = n.cancelledGeneration();
        if (!watching) return;
        let gone;
        try {
          gone = unwrap(await n.waitCancelled(seen, 60_000));
        } catch (e) {
          this._error(e, null, null);
          return;
        }
        for (const { key, why } of gone) {
          const r = running.get(key);
          if (r && !r.abort.signal.aborted) r.abort.abort(why === 'timed_out' ? r.timedOut() : r.lost(why));
        }
      }
    })();
    try {
      while (!n.stopping) {
        let t;
        try {
          t = unwrap(await n.next(60_000));
        } catch (e) {
          this._error(e, null, null);
          this.stop();
          break;
        }
        if (t) this._dispatch(t, running);
      }
      await call(() => n.shutdown());
      await call(() => n.drain(this._grace));
      // What still runs was released: its handler is told to stop, and
      // awaited (its outcome is discarded) unless a second signal comes.
      for (const r of running.values()) {
        if (!r.abort.signal.aborted) {
          r.abort.abort(new Error('released: the worker shut down before the handler finished'));
        }
      }
      if (running.size > 0) await Promise.race([Promise.allSettled([...running.values()].map((r) => r.done)), hurried]);
    } finally {
      watching = false;
      n.wakeCancelled();
      await watch;
      if (signal) signal.removeEventListener('abort', onAbort);
      if (signals) {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
      }
    }
  }

  _dispatch(t, running) {
    const reg = this._queues.get(sourceKey(t.queue, t.group ?? null));
    const job = reg.group ? new GroupEvent(reg.group, t.event) : new Job(reg.queue, this.workerId, t.job, reg.leaseMs);
    const abort = new AbortController();
    const handler = this._handler(reg, t);
    let timer = null;
    const timedOut = () => new Timeout('TIMEOUT', `the handler ran past its ${reg.timeout} ms timeout`);
    if (t.remainingMs !== null && t.remainingMs !== undefined) {
      timer = setTimeout(
        () => abort.abort(timedOut()),
        // Just past core's deadline, so that core counts what the handler
        // then reports as the timeout.
        Math.ceil(Math.max(0, t.remainingMs)) + 2,
      );
    }
    const entry = {
      abort,
      // Core gave up on it (polled): at its deadline, when core's clock
      // sees it before the timer, or for its lease.
      timedOut,
      lost: (why) =>
        new LeaseLost('LEASE_LOST', `job ${job.id}: ${why === 'released' ? 'released' : 'its lease was lost'}; its outcome will be discarded`),
    };
    running.set(t.key, entry);
    this._emit('start', t.queue, job, null);
    entry.done = (async () => {
      let outcome;
      try {
        if (handler instanceof Permanent) throw handler;
        outcome = ['ack', await withTrace(job.traceContext, () => handler(job, abort.signal)), undefined];
      } catch (e) {
        outcome = outcomeOf(e);
      } finally {
        if (timer) clearTimeout(timer);
      }
      running.delete(t.key);
      await this._finish(t, job, outcome, running);
    })();
  }

  _handler(reg, t) {
    // Core routed it: the queue's handler, its envelope's task's, or none.
    if (t.refused !== null && t.refused !== undefined) return new Permanent(t.refused);
    if (t.task !== null && t.task !== undefined) return reg.tasks.get(t.task);
    return reg.handler;
  }

  async _finish(t, job, [kind, value, error], running) {
    if (job._settled) kind = 'settled'; // the handler acked (or retried...) it itself
    let result;
    let delay;
    if (kind === 'ack' && value !== undefined && !(job instanceof GroupEvent)) {
      try {
        result = encode(value);
      } catch (e) {
        // Core records why the job runs again.
        [kind, error] = ['unstorable', e.detail ?? e.message];
      }
    } else if (kind === 'retry' || kind === 'snooze') {
      delay = value;
    }
    const n = this._native;
    let report;
    try {
      // Uncontended, right here (a commit costs less than two thread hops).
      report = await write(
        this._db,
        undefined,
        this._db._fast,
        () => n.tryComplete(t.key, kind, result, delay, error),
        () => n.complete(t.key, kind, result, delay, error),
      );
    } catch (e) {
      // The database failed: the slot is free, and the job's lease lapses,
      // so it runs again (at-least-once).
      this._error(e, t.queue, job.id);
      return;
    }
    // The completion claimed the next job for the freed slot: start it
    // without waiting for `next` to hand it over, on the loop's next turn
    // (a chain of jobs run from microtasks alone would starve its timers
    // and I/O).
    const following = n.tryNext();
    if (following) setImmediate(() => this._dispatch(following, running));
    this._emit(report.event, report.queue, job, report.ranMs, report.error ?? null, report.state ?? null);
  }

  _emit(kind, queue, job, ms, error = null, state = null) {
    if (this._hooks[kind].length === 0) return;
    const group = job instanceof GroupEvent ? job.group.name : null;
    this._call(kind, { kind, queue, group, jobId: job.id, attempts: job.attempts, ms, error, state });
  }

  _error(error, queue, jobId) {
    if (this._hooks.error.length === 0) {
      console.error(
        jobId === null ? 'honker: the worker stopped: its claim failed:' : `honker: job ${jobId} on ${queue}: recording its outcome failed:`,
        error,
      );
      return;
    }
    this._call('error', { kind: 'error', error, queue, jobId });
  }

  /** Calls `kind`'s hooks with `event`; one that throws is reported and ignored. */
  _call(kind, event) {
    for (const hook of this._hooks[kind]) {
      try {
        hook(event);
      } catch (e) {
        console.error(`honker: a worker hook for ${kind} threw:`, e);
      }
    }
  }
}

/** A registration's key: a queue's name, or a group's stream and name. */
function sourceKey(name, group) {
  return group === null ? `q:${name}` : `g:${name}\u0000${group}`;
}

/** A handler's error as an outcome: [kind, delay, error]. */
function outcomeOf(e) {
  if (e instanceof Permanent) return ['permanent', undefined, e.message || 'Permanent'];
  if (e instanceof Snooze) return ['snooze', e.delay, undefined];
  if (e instanceof Retry) return ['retry', e.delay, e.message];
  if (e instanceof Error) return ['retry', undefined, `${e.name}: ${e.message}`];
  return ['retry', undefined, `a non-Error was thrown: ${describe(e)}`];
}

module.exports = {
  Permanent,
  Retry,
  Snooze,
  Worker,
};
