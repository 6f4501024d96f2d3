// Consumer groups through Node: competing members under leases and tokens,
// retries, dead letters and re-drive, outcomes by { offset, token }, the
// async iterator (AbortSignal, close releasing its buffer), another process,
// the Worker, and typed errors that change nothing. The cases every surface
// shares (per-key order, a lapsed lease, the ack in the caller's transaction,
// the poison event) are tests-interop's consumer_group, group_lease_lapse and
// group_outbox.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import honker from '../index.js';
import { stopWhen, tempPath, testDb } from './helpers.mjs';

const index = createRequire(import.meta.url).resolve('../index.js');

/** Everything a group stores, to prove a failed call changed nothing. */
async function groupRows(db) {
  const out = [];
  for (const t of ['_honker_stream_groups', '_honker_stream_group_events', '_honker_stream_group_members']) {
    out.push(await db.query(`SELECT * FROM ${t} ORDER BY 1, 2`));
  }
  return JSON.stringify(out);
}

test('members compete and each event goes to one of them', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  await s.publishMany([0, 1, 2, 3, 4, 5].map((n) => ({ n })));
  const g = s.group('billing');
  assert.equal(await g.create(), 1);
  const a = await g.claim('a', { n: 4 });
  const b = await g.claim('b', { n: 4 });
  assert.deepEqual(a.map((e) => e.offset), [1, 2, 3, 4]);
  assert.deepEqual(b.map((e) => e.offset), [5, 6]);
  assert.equal(a.missed, 0);
  const [first] = a;
  assert.ok(first instanceof honker.GroupEvent);
  assert.deepEqual([first.payload, first.key, first.deliveries], [{ n: 0 }, null, 1]);
  assert.ok(first.createdAt instanceof Date && first.leaseExpiresAt > first.createdAt);
  assert.equal(first.group, g);
  let info = await g.info();
  assert.deepEqual(
    [info.nextOffset, info.lag, info.pending, info.delivered, info.dead],
    [7, 6, 6, 6, 0],
  );
  assert.deepEqual(Object.fromEntries(info.members.map((m) => [m.member, m.holds])), { a: 4, b: 2 });
  assert.deepEqual(info.options, { maxDeliveries: 5, lease: 60_000, memberIdle: 86_400_000 });
  for (const e of [...a, ...b]) await e.ack();
  assert.deepEqual([...(await g.claim('a', { n: 10 }))], []);
  info = await g.info();
  assert.deepEqual([info.lag, info.pending, info.oldestPendingAge], [0, 0, null]);
  await s.group('search').create({ start: 'latest' });
  assert.deepEqual(
    (await s.info()).groups.map((x) => [x.group, x.nextOffset]),
    [
      ['billing', 7],
      ['search', 7],
    ],
  );
});

test('a group event carries its priority', async () => {
  const { db } = await testDb();
  const s = db.stream('alerts');
  await s.publish({ n: 1 }, { priority: 3 });
  const g = s.group('pagers');
  await g.create();
  const [e] = await g.claim('a');
  assert.deepEqual([e.offset, e.priority], [1, 3]);
});

test('create is idempotent: it keeps the place and takes new options', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  await s.publishMany([1, 2, 3]);
  const g = s.group('g');
  assert.equal(await g.create({ start: 2, maxDeliveries: 3, lease: 30_000 }), 2);
  assert.equal(await g.create({ start: 'beginning', maxDeliveries: 7 }), 2);
  assert.deepEqual((await g.info()).options, { maxDeliveries: 7, lease: 60_000, memberIdle: 86_400_000 });
  assert.equal(await g.delete(), true);
  assert.equal(await g.delete(), false);
  await assert.rejects(g.claim('m'), honker.NotFound);
});

test('heartbeat extends the lease; release gives back without counting a delivery', async () => {
  const { db, clock } = await testDb();
  const s = db.stream('orders');
  await s.publish('work');
  const g = s.group('g');
  await g.create({ lease: 10_000 });
  const [e] = await g.claim('m');
  clock.advance(8_000);
  const end = await e.heartbeat({ extend: 30_000 });
  assert.equal(end.getTime(), clock.now() + 30_000);
  assert.equal(e.leaseExpiresAt, end);
  clock.advance(20_000);
  assert.equal((await g.claim('other')).length, 0);
  await e.release();
  const [back] = await g.claim('other');
  assert.equal(back.deliveries, 1);
});

// The poison event dying at its last delivery while the rest flows, and an
// ack in the caller's transaction: tests-interop's group_outbox.
test('dead letters are listed and re-driven', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  await s.publish('poison', { key: 'k' });
  const g = s.group('g');
  await g.create({ maxDeliveries: 1 });
  const [poison] = await g.claim('m', { n: 10 });
  assert.equal(await poison.retry({ error: 'boom' }), true);
  const [dead] = await g.dead();
  assert.deepEqual([dead.offset, dead.payload, dead.deliveries, dead.lastError], [1, 'poison', 1, 'boom']);
  assert.ok(dead.diedAt instanceof Date);
  await g.redrive(1);
  const [redriven] = await g.claim('m');
  assert.deepEqual([redriven.offset, redriven.deliveries], [1, 1]);
  await redriven.fail('still broken');
  assert.deepEqual((await g.dead()).map((d) => d.lastError), ['still broken']);
  assert.equal(await g.redriveAll(), 1);
  assert.deepEqual(await g.dead(), []);
  await assert.rejects(g.redrive(3), honker.NotFound);
});

test('ackMany is all or none; outcomes by { offset, token } from another surface', async () => {
  const { db, clock } = await testDb();
  const s = db.stream('orders');
  await s.publishMany([0, 1, 2, 3]);
  const g = s.group('g');
  await g.create();
  const got = await g.claim('m', { n: 4 });
  await assert.rejects(g.ackMany([got[0], { offset: got[1].offset, token: 'not-the-token' }]), honker.LeaseLost);
  assert.equal((await g.info()).delivered, 4);
  await g.ackMany([got[0], { offset: got[1].offset, token: got[1].token }]);
  await g.ack({ offset: got[2].offset, token: got[2].token });
  const lease = { offset: got[3].offset, token: got[3].token };
  assert.equal((await g.heartbeat(lease, { extend: 30_000 })).getTime(), clock.now() + 30_000);
  await g.release(lease);
  let [back] = await g.claim('m');
  assert.equal(await g.retry({ offset: back.offset, token: back.token }, { error: 'flaky' }), false);
  [back] = await g.claim('m');
  await g.fail({ offset: back.offset, token: back.token }, 'poison');
  assert.deepEqual((await g.dead()).map((d) => d.offset), [4]);
  const info = await g.info();
  assert.deepEqual([info.pending, info.dead], [0, 1]);
  await assert.rejects(g.ackMany([[1, 't']]), honker.InvalidArgument);
});

test('a consumer iterates, and closing it releases what it buffered', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  await s.publishMany([...Array(10).keys()]);
  const g = s.group('g');
  await g.create();
  const got = [];
  const consumer = g.consume('m', { batch: 4 });
  for await (const e of consumer) {
    got.push(e.payload);
    await e.ack();
    if (got.length === 5) break; // closes: the three buffered go back
  }
  assert.equal(consumer.closed, true);
  assert.deepEqual(got, [0, 1, 2, 3, 4]);
  const info = await g.info();
  assert.deepEqual([info.pending, info.delivered, info.lag], [3, 0, 5]);
  const [e] = await g.claim('other');
  assert.deepEqual([e.offset, e.deliveries], [6, 1]);
});

test('an AbortSignal ends a waiting consumer at once; a publish wakes one', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  const g = s.group('g');
  await g.create();
  const ac = new AbortController();
  const waiting = g.consume('m', { wait: 10_000, signal: ac.signal });
  const started = Date.now();
  setTimeout(() => ac.abort(), 100);
  for await (const e of waiting) assert.fail(`nothing was published, got ${e}`);
  assert.ok(Date.now() - started < 2000, `abort took ${Date.now() - started} ms`);
  const c = g.consume('m', { wait: 10_000 });
  setTimeout(() => s.publish('woke'), 100);
  const { value } = await c.next();
  assert.equal(value.payload, 'woke');
  await value.ack();
  await c.close();
});

test('a consumer behind age retention gets Trimmed with the count, then goes on', async () => {
  const { db, clock } = await testDb();
  const s = db.stream('metrics');
  await s.setRetention({ maxAge: 60_000 });
  const g = s.group('slow');
  await g.create();
  await s.publishMany([0, 1, 2, 3, 4]);
  clock.advance(120_000);
  await s.publishMany([5, 6]);
  assert.equal(await s.trim(), 5);
  const c = g.consume('m', { wait: 50 });
  await assert.rejects(c.next(), (e) => e instanceof honker.Trimmed && e.missed === 5);
  assert.deepEqual([(await c.next()).value.payload, (await c.next()).value.payload], [5, 6]);
  await c.close();
});

const MEMBER = `
const honker = require(process.argv[1]);
(async () => {
  const db = await honker.open(process.argv[2]);
  let n = Number(process.argv[3]);
  for await (const e of db.stream('orders').group('g').consume(process.argv[4], { batch: 5, wait: 10_000 })) {
    process.stdout.write(e.offset + '\\n');
    await e.ack();
    if (--n === 0) break;
  }
  await db.close();
})();
`;

test('members in other processes share the events, each once', async () => {
  const file = tempPath();
  const db = await honker.open(file);
  const s = db.stream('orders');
  await s.group('g').create();
  const children = [0, 1].map((i) =>
    spawn(process.execPath, ['-e', MEMBER, index, file, '30', `member-${i}`], { stdio: ['ignore', 'pipe', 'inherit'] }),
  );
  const outputs = children.map((c) => {
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    return once(c, 'exit').then(([code]) => [code, out]);
  });
  for (let start = 0; start < 60; start += 10) {
    await s.publishMany(Array.from({ length: 10 }, (_, i) => ({ i: start + i })));
  }
  const seen = [];
  for (const [code, out] of await Promise.all(outputs)) {
    assert.equal(code, 0);
    seen.push(...out.split('\n').filter(Boolean).map(Number));
  }
  assert.deepEqual(
    seen.sort((x, y) => x - y),
    Array.from({ length: 60 }, (_, i) => i + 1),
  );
  assert.equal((await s.group('g').info()).pending, 0);
  await db.close();
});

test('bad input is a typed error and changes nothing', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  await s.publish('kept');
  const g = s.group('g');
  await g.create();
  const [held] = await g.claim('m');
  const before = await groupRows(db);
  for (const name of ['', 'x'.repeat(1000), 'nul\0']) {
    assert.throws(() => s.group(name), honker.InvalidArgument);
    await assert.rejects(g.claim(name), honker.InvalidArgument);
    assert.throws(() => g.consume(name), honker.InvalidArgument);
  }
  const bad = [
    () => g.create({ maxDeliveries: 0 }),
    () => g.create({ maxDeliveries: 1001 }),
    () => g.create({ maxDeliveries: -1 }),
    () => g.create({ maxDeliveries: 1.5 }),
    () => g.create({ lease: 0 }),
    () => g.create({ lease: -5 }),
    () => g.create({ lease: Infinity }),
    () => g.create({ lease: 86_400_001 }),
    () => g.create({ memberIdle: 500 }),
    () => g.create({ start: 'middle' }),
    () => g.create({ maxDelivery: 3 }), // an unknown key
    () => g.claim('m', { n: 0 }),
    () => g.claim('m', { n: 10_001 }),
    () => g.claim('m', { n: -1 }),
    () => g.claim('m', { lease: 0 }),
    () => g.claim('m', { wait: -1 }),
    () => g.claim('m', { wait: NaN }),
    () => held.retry({ delay: -1 }),
    () => held.heartbeat({ extend: 0 }),
    () => g.dead({ limit: -1 }),
    () => g.removeMember('m', { force: 'yes' }),
    () => s.group('g2').create({ start: 5 }),
  ];
  for (const call of bad) {
    await assert.rejects(async () => call(), honker.InvalidArgument, String(call));
  }
  assert.throws(() => g.consume('m', { batch: 0 }), honker.InvalidArgument);
  assert.throws(() => g.consume('m', { wait: 0 }), honker.InvalidArgument);
  assert.equal(await groupRows(db), before);
  await held.ack();
});

// ----- the worker runtime running a group's events ----------------------------


test("a Worker runs a group's events in key order beside a queue", async () => {
  const db = await honker.open(tempPath());
  const s = db.stream('orders');
  const g = s.group('billing');
  await g.create({ maxDeliveries: 2 });
  for (let i = 0; i < 30; i++) await s.publish({ i }, { key: `order-${i % 3}` });
  await s.publish('poison');
  await db.queue('emails').enqueueMany([0, 1, 2, 3, 4].map((n) => ({ n })));
  const w = new honker.Worker(db, { concurrency: 6 });
  const running = new Map();
  const byKey = new Map();
  const overlap = [];
  const mailed = [];
  const events = [];
  w.handle(g, async (event, signal) => {
    assert.ok(event instanceof honker.GroupEvent && signal instanceof AbortSignal);
    if (event.payload === 'poison') throw new Error('cannot bill this');
    running.set(event.key, (running.get(event.key) ?? 0) + 1);
    if (running.get(event.key) > 1) overlap.push(event.key);
    await new Promise((r) => setTimeout(r, 2));
    running.set(event.key, running.get(event.key) - 1);
    byKey.set(event.key, [...(byKey.get(event.key) ?? []), event.offset]);
    return { ignored: 'a group keeps no results' };
  });
  w.handle('emails', (job) => mailed.push(job.payload.n));
  w.on('success', (e) => events.push(e));
  w.on('retry', (e) => events.push(e));
  assert.deepEqual([w.queues, w.groups], [['emails'], [['orders', 'billing']]]);
  stopWhen(w, async () => {
    const i = await g.info();
    return mailed.length === 5 && i.pending === 0 && i.dead === 1;
  });
  await w.run();
  assert.deepEqual(overlap, []);
  for (let k = 0; k < 3; k++) {
    assert.deepEqual(
      byKey.get(`order-${k}`),
      Array.from({ length: 10 }, (_, i) => 1 + k + 3 * i),
    );
  }
  assert.deepEqual(mailed.sort(), [0, 1, 2, 3, 4]);
  const [dead] = await g.dead();
  assert.deepEqual([dead.offset, dead.deliveries], [31, 2]);
  assert.match(dead.lastError, /cannot bill this/);
  const billed = events.filter((e) => e.group === 'billing');
  assert.equal(billed.filter((e) => e.kind === 'success').length, 30);
  assert.deepEqual(
    billed.filter((e) => e.kind === 'retry').map((e) => [e.queue, e.jobId, e.attempts, e.state]),
    [
      ['orders', 31, 1, 'ready'],
      ['orders', 31, 2, 'dead'],
    ],
  );
  assert.ok(events.filter((e) => e.queue === 'emails').every((e) => e.group === null));
  await db.close();
});

test('a group handler that acks in its own transaction settles the event', async () => {
  const db = await honker.open(tempPath());
  await db.execute('CREATE TABLE projected ("offset" INTEGER PRIMARY KEY)');
  const s = db.stream('orders');
  const g = s.group('projector');
  await g.create();
  await s.publishMany([...Array(10).keys()]);
  const w = new honker.Worker(db, { concurrency: 3 });
  const kinds = [];
  w.handle(g, async (event) => {
    if (event.offset % 2) {
      await db.transaction(async (tx) => {
        await tx.execute('INSERT INTO projected VALUES (?)', [event.offset]);
        await event.ack({ tx });
      });
    }
  });
  w.on('success', (e) => kinds.push(e.kind));
  w.on('settled', (e) => kinds.push(e.kind));
  stopWhen(w, async () => {
    const i = await g.info();
    return i.pending === 0 && i.lag === 0;
  });
  await w.run();
  assert.deepEqual(await db.query('SELECT count(*) AS n FROM projected'), [{ n: 5 }]);
  assert.deepEqual(kinds.sort(), [...Array(5).fill('settled'), ...Array(5).fill('success')]);
  await db.close();
});

test('registering a group handler checks its arguments; a missing group fails run', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  const missing = new honker.Worker(db).handle(s.group('missing'), () => {});
  await assert.rejects(missing.run(), honker.NotFound);
  const g = s.group('g');
  await g.create();
  const w = new honker.Worker(db);
  assert.throws(() => w.handle(g, 'not a function'), honker.InvalidArgument);
  assert.throws(() => w.handle(g, () => {}, { task: 'x' }), honker.InvalidArgument);
  assert.throws(() => w.handle(g, () => {}, { concurrency: -1 }), honker.InvalidArgument);
  w.handle(g, () => {});
  assert.throws(() => w.handle(g, () => {}), honker.InvalidArgument);
  const other = await honker.open(tempPath());
  assert.throws(() => w.handle(other.stream('orders').group('g'), () => {}), honker.InvalidArgument);
  await other.close();
});
