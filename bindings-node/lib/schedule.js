'use strict';
// The scheduler.

const { fast } = require('./calls.js');
const { ATTEMPTS, I32, U32, date, encode, epochMs, fire, need, optMs, optText, scheduleInfo, text } = require('./convert.js');
const { Database, method } = require('./database.js');
const { call, describe, guarded, invalid, unwrap } = require('./errors.js');
const { signalArg } = require('./lock.js');
const { PAUSE_OPTIONS, SCHEDULER_RUN_OPTIONS, opts } = require('./options.js');

// A schedule's options as the native definition takes them (left out:
// core's defaults). Durations in ms; instants a Date or ms since the epoch.
const SCHEDULE_OPTIONS = {
  timeZone: (v) => text('timeZone', v),
  dayRule: (v) => text('dayRule', v),
  priority: (v) => need('priority', v, ...I32),
  maxAttempts: (v) => need('maxAttempts', v, ...ATTEMPTS),
  expires: (v) => optMs('expires', v),
  catchUp: (v) => text('catchUp', v),
  catchUpWindow: (v) => optMs('catchUpWindow', v),
  catchUpMax: (v) => need('catchUpMax', v, ...U32),
  overlap: (v) => text('overlap', v),
  jitter: (v) => optMs('jitter', v),
  startAt: (v) => epochMs('startAt', v),
  endAt: (v) => epochMs('endAt', v),
};
// The options `update` may clear with null.
const SCHEDULE_CLEARABLE = new Set(['maxAttempts', 'expires', 'startAt', 'endAt']);

function scheduleDef(name, schedule, queue, payload, options) {
  text('name', name);
  text('schedule', schedule);
  text('queue', queue);
  if (options === null || typeof options !== 'object') throw invalid(`options must be an object, got ${describe(options)}`);
  const def = { name, spec: schedule, queue };
  if (payload !== undefined) def.payload = encode(payload);
  for (const [k, v] of Object.entries(options)) {
    const check = SCHEDULE_OPTIONS[k];
    if (!check) throw invalid(`unknown schedule option ${JSON.stringify(k)}`);
    if (v !== undefined && v !== null) def[k] = check(v);
  }
  return def;
}

/**
 * The schedules of one file (`db.scheduler()`): rows of the file, each
 * evaluated in its own IANA time zone (`timeZone`, default 'UTC', never the
 * process's). Each boundary fires once however many processes run the
 * scheduler: the fire's key commits with its job, whose `runAt` is the
 * boundary. DST follows Vixie cron: a fixed-time schedule whose wall time is
 * skipped fires right after the jump, and once in a repeated hour.
 */
class Scheduler {
  constructor(db, n) {
    this._db = db;
    this._native = n;
  }

  /**
   * Registers the schedule `name` (an upsert: the same definition again
   * changes nothing and keeps its next fire). `schedule` is a cron
   * expression (5 or 6 fields, names, macros, L/W/#) or '@every 90s'.
   * Options: timeZone ('UTC'), dayRule ('or' | 'and'), priority, maxAttempts,
   * expires (ms), catchUp ('skip' | 'latest' | 'all'; 'latest'),
   * catchUpWindow (ms; a day), catchUpMax (100), overlap ('allow' | 'skip' |
   * 'buffer_one'), jitter (ms), startAt, endAt. Resolves to whether anything
   * changed.
   */
  async add(name, schedule, queue, payload, options = {}) {
    const def = scheduleDef(name, schedule, queue, payload, options);
    const n = this._native;
    return this._db._writer.run(() => call(() => n.add(def)));
  }

  /**
   * Changes the stored definition of `name` (the options of `add`, plus
   * `schedule`, `queue` and `payload`; null clears maxAttempts, expires,
   * startAt and endAt). NotFound if there is none.
   */
  async update(name, changes = {}) {
    text('name', name);
    const n = this._native;
    const current = unwrap(guarded(() => n.tryDefinition(name)));
    const { schedule, queue, payload, ...options } = changes;
    for (const [k, v] of Object.entries(options)) {
      if (v === null && SCHEDULE_CLEARABLE.has(k)) current[k] = undefined;
    }
    const def = scheduleDef(
      name,
      schedule ?? current.spec,
      queue ?? current.queue,
      undefined,
      Object.fromEntries(Object.entries(options).filter(([, v]) => v !== null)),
    );
    const merged = { ...current, ...def };
    if (payload !== undefined) merged.payload = encode(payload);
    for (const k of SCHEDULE_CLEARABLE) if (options[k] === null) delete merged[k];
    return this._db._writer.run(() => call(() => n.add(merged)));
  }

  /** Makes the file hold exactly these schedules (`{ name, schedule, queue, payload, ...options }`), in one transaction. */
  async sync(schedules) {
    if (!Array.isArray(schedules)) throw invalid(`schedules must be an array, got ${describe(schedules)}`);
    const defs = schedules.map((s) => {
      if (s === null || typeof s !== 'object') throw invalid(`each schedule must be an object, got ${describe(s)}`);
      const { name, schedule, queue, payload, ...options } = s;
      return scheduleDef(name, schedule, queue, payload, options);
    });
    const n = this._native;
    return this._db._writer.run(() => call(() => n.sync(defs)));
  }

  /** Removes `name` and its fire records (its jobs stay); whether there was one. */
  async remove(name) {
    text('name', name);
    const n = this._native;
    return this._db._writer.run(() => call(() => n.remove(name)));
  }

  /** Pauses `name` (`{ note }` shows in `list`): boundaries are neither fired nor missed until it resumes. */
  async pause(name, options) {
    options = opts(options, PAUSE_OPTIONS);
    text('name', name);
    const note = optText('note', options.note);
    const n = this._native;
    await this._db._writer.run(() => call(() => n.pause(name, note)));
  }

  /** Resumes `name` from its first boundary after now. */
  async resume(name) {
    text('name', name);
    const n = this._native;
    await this._db._writer.run(() => call(() => n.resume(name)));
  }

  /** Fires `name` now, whatever its rule says: the job's id. */
  async triggerNow(name) {
    text('name', name);
    const n = this._native;
    return this._db._writer.run(() => call(() => n.triggerNow(name)));
  }

  /** One schedule with its state, or null. */
  async get(name) {
    text('name', name);
    const n = this._native;
    const d = await fast(true, () => n.tryGet(name), () => n.get(name));
    return d === null || d === undefined ? null : scheduleInfo(d);
  }

  /** Every schedule with its state, by name. */
  async list() {
    const n = this._native;
    return (await fast(true, () => n.tryList(), () => n.list())).map(scheduleInfo);
  }

  /** The next `n` (5) boundaries of `name`, as Dates. */
  async nextFires(name, n = 5) {
    text('name', name);
    need('n', n, ...U32);
    const nat = this._native;
    return (await call(() => nat.nextFires(name, n))).map(date);
  }

  /** Fires what is due now (writes nothing when nothing is due). */
  async tick() {
    const n = this._native;
    return (await this._db._writer.run(() => call(() => n.tick()))).map(fire);
  }

  /**
   * Fires schedules as they come due until `signal` aborts, sleeping until
   * the next boundary or a change (on core's watcher, off the event loop).
   * Safe in every process: each boundary fires once. Resolves when stopped.
   */
  async run(options) {
    options = opts(options, SCHEDULER_RUN_OPTIONS);
    const { signal } = options;
    signalArg(signal);
    const runner = unwrap(guarded(() => this._native.runner()));
    const stop = () => runner.close();
    if (signal) {
      if (signal.aborted) return;
      signal.addEventListener('abort', stop, { once: true });
    }
    try {
      while (!runner.closed) await call(() => runner.next(3_600_000));
    } finally {
      runner.close();
      if (signal) signal.removeEventListener('abort', stop);
    }
  }
}

// The database's calls for this module (database.js names no primitive).
method(Database, function scheduler() {
  return new Scheduler(this, unwrap(guarded(() => this._native.scheduler())));
});

module.exports = {
  Scheduler,
};
