'use strict';
// Conversions between JavaScript values and what crosses to the native addon:
// payloads, arguments, times, and the records core returns (generated blocks).

const { describe, invalid } = require('./errors.js');
const { traceContext } = require('./trace.js');

/** core's metrics JSON for one queue as the object Queue#metrics returns. */
function queueMetrics(m) {
  return {
    queue: m.queue,
    ...m.totals,
    // In ms, Node's unit (the Prometheus text has seconds).
    claimLatency: {
      buckets: m.claim_latency.buckets.map((b) => ({
        le: b.le_seconds === null ? Infinity : Math.round(b.le_seconds * 1000),
        count: b.count,
      })),
      sum: Math.round(m.claim_latency.sum_seconds * 1000),
      count: m.claim_latency.count,
    },
    ready: m.jobs.ready,
    scheduled: m.jobs.scheduled,
    running: m.jobs.running,
    deadLetters: m.jobs.dead,
  };
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
  try {
    checkJson(payload, 'payload', []);
    return JSON.stringify(payload);
  } catch (e) {
    // A value nested deeper than the stack (about 10,000 levels here).
    if (e instanceof RangeError) throw invalid(`payload is nested too deeply to encode (${e.message})`);
    throw e;
  }
}

/**
 * SQL parameters: an array of null, booleans, numbers, strings and
 * Buffers (or Uint8Arrays). Anything else is InvalidArgument naming the
 * parameter (napi's own message listed Rust type names).
 */
function sqlParams(params) {
  if (!Array.isArray(params)) throw invalid(`params must be an array, got ${describe(params)}`);
  for (let i = 0; i < params.length; i++) {
    const v = params[i];
    if (v === null || v instanceof Uint8Array) continue;
    const t = typeof v;
    if (t === 'boolean' || t === 'number' || t === 'string') continue;
    throw invalid(
      `params[${i}] is ${describe(v)}; a SQL parameter is null, a boolean, a number, a string or a Buffer`,
    );
  }
  return params;
}

/** `value` when it is iterable (an array, a Set, a generator), else InvalidArgument. */
function iterable(what, value) {
  if (value === null || value === undefined || typeof value[Symbol.iterator] !== 'function' || typeof value === 'string') {
    throw invalid(`${what} must be an array (or another iterable), got ${describe(value)}`);
  }
  return value;
}

/**
 * A batch's payloads as the native batch verbs take them (records.rs's
 * `Payloads`): when every one is JSON text, one string of them joined by
 * newlines (napi reads a list element by element; JSON.stringify never
 * writes a raw newline), else the list as it is.
 */
function packed(list) {
  for (let i = 0; i < list.length; i++) if (typeof list[i] !== 'string') return list;
  return list.length === 0 ? list : list.join('\n');
}

/** `enqueueMany`'s records, from the ids, `existing` indexes and the modes
 * that acted on those (`unique`) records.rs's `EnqueuedBatch` crosses as. */
function enqueuedBatch(batch) {
  const { ids, existing, unique } = batch;
  const out = new Array(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = { id: ids[i], existing: false, unique: null };
  for (let k = 0; k < existing.length; k++) {
    const e = out[existing[k]];
    e.existing = true;
    e.unique = unique[k];
  }
  return out;
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

// A string argument, or undefined.
function optText(name, v) {
  if (v !== undefined && v !== null) text(name, v);
  return v ?? undefined;
}

// An integer argument within its native type's range, or undefined.
function int(name, v, lo, hi) {
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || v < lo || v > hi) {
    throw invalid(`${name} must be an integer between ${lo} and ${hi}, got ${describe(v)}`);
  }
  return v;
}

// A required integer argument.
function need(name, v, lo, hi) {
  if (v === undefined || v === null) throw invalid(`${name} must be given`);
  return int(name, v, lo, hi);
}

const I32 = [-(2 ** 31), 2 ** 31 - 1];
const U32 = [0, 2 ** 32 - 1];
// maxAttempts: core's range (limits::MAX_ATTEMPTS); test/errors.test.mjs
// fails if the two drift apart.
const ATTEMPTS = [1, 1000];
const ID = [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];

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

/** `o`, or undefined when none of its fields is set (options that cross
 * to the native side: napi converts an object field by field). */
function definedFields(o) {
  for (const k in o) if (o[k] !== undefined) return o;
  return undefined;
}

function optNumber(name, value) {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw invalid(`${name} must be a number, got ${describe(value)}`);
  return value;
}

// A boolean argument.
function bool(name, value) {
  if (typeof value !== 'boolean') throw invalid(`${name} must be a boolean, got ${describe(value)}`);
  return value;
}

// A boolean argument, or undefined.
function optBool(name, value) {
  return value === undefined || value === null ? undefined : bool(name, value);
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

// A claim's jobs cross as one flat array of their fields (napi builds an
// object property by property, ten times dearer): read back here.
// <generated by scripts/facts.py: cells-ClaimedJob>
const CLAIMED_JOB_FIELDS = 10;
function claimedJobAt(a, i) {
  return {
    id: a[i],
    payload: a[i + 1],
    attempts: a[i + 2],
    maxAttempts: a[i + 3],
    priority: a[i + 4],
    runAtMs: a[i + 5],
    createdAtMs: a[i + 6],
    leaseExpiresAtMs: a[i + 7],
    token: a[i + 8],
    traceContext: a[i + 9],
  };
}
// </generated: cells-ClaimedJob>

// <generated by scripts/facts.py: record-Enqueued>
function enqueued(d) {
  return {
    id: d.id,
    existing: d.existing,
    unique: d.unique ?? null,
  };
}
// </generated: record-Enqueued>

// <generated by scripts/facts.py: record-JobInfo>
function jobInfo(d) {
  return {
    id: d.id,
    queue: d.queue,
    state: d.state,
    payload: decode(d.payload),
    priority: d.priority,
    runAt: date(d.runAtMs),
    attempts: d.attempts,
    maxAttempts: d.maxAttempts,
    dedupeKey: d.dedupeKey ?? null,
    concurrencyKey: d.concurrencyKey ?? null,
    expiresAt: date(d.expiresAtMs),
    createdAt: date(d.createdAtMs),
    workerId: d.workerId ?? null,
    lastError: d.lastError ?? null,
    leaseExpiresAt: date(d.leaseExpiresAtMs),
    finishedAt: date(d.finishedAtMs),
    traceContext: traceContext(d.traceContext),
  };
}
// </generated: record-JobInfo>

// <generated by scripts/facts.py: record-QueueStats>
function queueStats(d) {
  return {
    ready: d.ready,
    scheduled: d.scheduled,
    running: d.running,
    lapsed: d.lapsed,
    dead: d.dead,
    cancelled: d.cancelled,
    expired: d.expired,
    completed: d.completed,
    oldestReadyAgeMs: d.oldestReadyAgeMs ?? null,
    paused: d.paused,
    maxRunning: d.maxRunning ?? null,
    maxRunningPerKey: d.maxRunningPerKey ?? null,
    roundRobin: d.roundRobin,
    keyLimit: d.keyLimit ?? null,
    keyPerMs: d.keyPerMs ?? null,
  };
}
// </generated: record-QueueStats>

// <generated by scripts/facts.py: record-MaintenanceReport>
function maintenanceReport(d) {
  return {
    dead: d.dead,
    cancelled: d.cancelled,
    completed: d.completed,
    results: d.results,
    streamEvents: d.streamEvents,
    publishKeys: d.publishKeys,
    notifications: d.notifications,
    groupMembers: d.groupMembers,
    locks: d.locks,
    rateLimitKeys: d.rateLimitKeys,
    queueKeys: d.queueKeys,
    uniqueHolds: d.uniqueHolds,
    scheduleFires: d.scheduleFires,
  };
}
// </generated: record-MaintenanceReport>

// <generated by scripts/facts.py: record-StreamEvent>
function streamEvent(d) {
  return {
    offset: d.offset,
    key: d.key ?? null,
    payload: decode(d.payload),
    createdAt: date(d.createdAtMs),
    traceContext: traceContext(d.traceContext),
    priority: d.priority,
  };
}
// </generated: record-StreamEvent>

// <generated by scripts/facts.py: record-ConsumerInfo>
function consumerInfo(d) {
  return {
    consumer: d.consumer,
    nextOffset: d.nextOffset,
    lag: d.lag,
  };
}
// </generated: record-ConsumerInfo>

// <generated by scripts/facts.py: record-Notification>
function notification(d) {
  return {
    id: d.id,
    seq: d.seq,
    payload: decode(d.payload),
    createdAt: date(d.createdAtMs),
  };
}
// </generated: record-Notification>

// <generated by scripts/facts.py: record-GroupEvent>
function groupEvent(d) {
  return {
    offset: d.offset,
    key: d.key ?? null,
    payload: decode(d.payload),
    createdAt: date(d.createdAtMs),
    deliveries: d.deliveries,
    token: d.token,
    leaseExpiresAt: date(d.leaseExpiresAtMs),
    traceContext: traceContext(d.traceContext),
    priority: d.priority,
  };
}
// </generated: record-GroupEvent>

// <generated by scripts/facts.py: record-GroupDeadLetter>
function groupDeadLetter(d) {
  return {
    offset: d.offset,
    key: d.key ?? null,
    payload: decode(d.payload),
    createdAt: date(d.createdAtMs),
    deliveries: d.deliveries,
    lastError: d.lastError ?? null,
    diedAt: date(d.diedAtMs),
  };
}
// </generated: record-GroupDeadLetter>

// <generated by scripts/facts.py: record-GroupMember>
function groupMember(d) {
  return {
    member: d.member,
    joinedAt: date(d.joinedAtMs),
    seenAt: date(d.seenAtMs),
    holds: d.holds,
  };
}
// </generated: record-GroupMember>

// <generated by scripts/facts.py: record-LockGrant>
function lockGrant(d) {
  return {
    token: d.token,
    expiresAt: date(d.expiresAtMs),
  };
}
// </generated: record-LockGrant>

// <generated by scripts/facts.py: record-LockInfo>
function lockInfo(d) {
  return {
    name: d.name,
    owner: d.owner,
    token: d.token,
    acquiredAt: date(d.acquiredAtMs),
    expiresAt: date(d.expiresAtMs),
  };
}
// </generated: record-LockInfo>

// <generated by scripts/facts.py: record-RateDecision>
function rateDecision(d) {
  return {
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    retryAfterMs: d.retryAfterMs,
    resetAfterMs: d.resetAfterMs,
  };
}
// </generated: record-RateDecision>

// <generated by scripts/facts.py: record-ScheduleInfo>
function scheduleInfo(d) {
  return {
    name: d.name,
    queue: d.queue,
    spec: d.spec,
    timeZone: d.timeZone,
    dayRule: d.dayRule,
    payload: decode(d.payload),
    priority: d.priority,
    maxAttempts: d.maxAttempts ?? null,
    expiresMs: d.expiresMs ?? null,
    catchUp: d.catchUp,
    catchUpWindowMs: d.catchUpWindowMs,
    catchUpMax: d.catchUpMax,
    overlap: d.overlap,
    jitterMs: d.jitterMs,
    startAt: date(d.startAtMs),
    endAt: date(d.endAtMs),
    paused: d.paused,
    note: d.note ?? null,
    nextFireAt: date(d.nextFireAtMs),
    lastFireAt: date(d.lastFireAtMs),
    lastJobId: d.lastJobId ?? null,
    bufferedAt: date(d.bufferedAtMs),
    fires: d.fires,
    missed: d.missed,
    overlapSkipped: d.overlapSkipped,
  };
}
// </generated: record-ScheduleInfo>

// <generated by scripts/facts.py: record-Fire>
function fire(d) {
  return {
    schedule: d.schedule,
    queue: d.queue,
    fireAt: date(d.fireAtMs),
    jobId: d.jobId ?? null,
  };
}
// </generated: record-Fire>

function groupInfo(i) {
  return {
    group: i.group,
    nextOffset: i.nextOffset,
    lag: i.lag,
    pending: i.pending,
    delivered: i.delivered,
    dead: i.dead,
    oldestPendingAge: i.oldestPendingAgeMs ?? null,
    members: i.members.map(groupMember),
    options: { ...i.options },
  };
}

module.exports = {
  packed,
  CLAIMED_JOB_FIELDS,
  claimedJobAt,
  consumerInfo,
  date,
  decode,
  definedFields,
  encode,
  enqueued,
  enqueuedBatch,
  epochMs,
  fire,
  groupDeadLetter,
  groupEvent,
  groupInfo,
  int,
  iterable,
  jobInfo,
  lockGrant,
  lockInfo,
  maintenanceReport,
  need,
  notification,
  num,
  bool,
  optBool,
  optMs,
  optNumber,
  optText,
  queueMetrics,
  queueStats,
  rateDecision,
  rowsToObjects,
  scheduleInfo,
  sqlParams,
  streamEvent,
  text,
  ATTEMPTS,
  I32,
  ID,
  U32,
};
