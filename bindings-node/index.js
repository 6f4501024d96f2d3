'use strict';
// honker for Node: durable job queues inside your application's own SQLite
// file. The job is written in the same transaction as the row that caused it
// (the transactional outbox), so both commit or neither does.
//
// The package's idioms (options objects, `for await`, Dates, error
// classes) live in lib/, one module per primitive as in Python and Swift;
// behaviour lives in the Rust core behind the native addon (found by
// ./binding.js: the prebuilt package for the platform). Every
// call that touches SQLite returns a Promise and runs off the event loop.
// Durations are milliseconds; times are Dates (or ms since the epoch).
// Semantics are at-least-once: make handlers idempotent.

const { addon, extensionPath } = require('./lib/native.js');
const { HonkerError, Busy, LeaseLost, NotFound, InvalidArgument, SchemaTooNew, Closed, Timeout, RateLimited, Unsafe, RolledBack, Trimmed, SqliteError, InternalError, fromSqliteError, ERROR_CLASSES } = require('./lib/errors.js');
const { open, Database, Transaction, ManualClock } = require('./lib/database.js');
const { Queue, Job, ClaimStream } = require('./lib/queue.js');
const { Stream, Subscription, Listener } = require('./lib/stream.js');
const { Group, GroupEvent, GroupConsumer } = require('./lib/group.js');
const { Worker, Permanent, Retry, Snooze } = require('./lib/worker.js');
const { Lock, HeldLock, RateLimiter } = require('./lib/lock.js');
const { Scheduler } = require('./lib/schedule.js');

module.exports = {
  open,
  Database,
  Transaction,
  Queue,
  Job,
  ClaimStream,
  Stream,
  Subscription,
  Listener,
  Group,
  GroupEvent,
  GroupConsumer,
  Lock,
  HeldLock,
  RateLimiter,
  Scheduler,
  Worker,
  Permanent,
  Retry,
  Snooze,
  ManualClock,
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
  Trimmed,
  SqliteError,
  InternalError,
  fromSqliteError,
  ERROR_CODES: addon.errorCodes(),
  ERROR_CLASSES,
  version: addon.version(),
  extensionPath,
};
