// The queue through Node's idioms: ms and Dates, Buffers, each field of a
// claimed job, keepAlive and its AbortSignal, a job rebuilt from its lease,
// stored settings. The cases every surface shares (lease lapse, dead
// letters, dedupe, priority then age, the outbox) are tests-interop's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import honker from '../index.js';
import { tempPath, testDb } from './helpers.mjs';

test('enqueue, claim, ack', async () => {
  const { db } = await testDb();
  const q = db.queue('emails');
  const e = await q.enqueue({ to: 'alice@example.com' });
  assert.equal(e.existing, false);
  const [job] = await q.claimBatch('mailer-1', 32);
  assert.equal(job.id, e.id);
  assert.deepEqual(job.payload, { to: 'alice@example.com' });
  assert.equal(job.attempts, 1);
  assert.ok(job.leaseExpiresAt instanceof Date);
  await job.ack();
  assert.equal((await q.stats()).ready, 0);
  await assert.rejects(q.getJob(job.id), honker.NotFound);
});

test('a claimed job carries every field, each from its own column (they cross as one flat array)', async () => {
  const { db, clock } = await testDb();
  const q = db.queue('emails', { lease: 30_000 });
  const created = clock.now();
  await q.enqueue({ n: 1 }, { delay: 5_000, priority: 7, maxAttempts: 9 });
  await q.enqueue(Buffer.from([1, 2, 3]), { delay: 5_000, priority: 6, maxAttempts: 9 });
  clock.advance(6_000);
  const [a, b] = await q.claimBatch('w1', 2);
  assert.deepEqual(
    [a.attempts, a.maxAttempts, a.priority, a.workerId, a.payload, a.traceContext],
    [1, 9, 7, 'w1', { n: 1 }, null],
  );
  assert.deepEqual([a.createdAt.getTime(), a.runAt.getTime()], [created, created + 5_000]);
  assert.equal(a.leaseExpiresAt.getTime(), created + 6_000 + 30_000);
  assert.match(a.token, /^[0-9a-f]{32}$/);
  assert.deepEqual([b.id, b.priority, [...b.payload]], [a.id + 1, 6, [1, 2, 3]]);
  assert.notEqual(a.token, b.token);
  assert.equal(await q.ackMany([a, b]), 2);
});

test('retry backs off, then runs', async () => {
  const { db, clock } = await testDb();
  const q = db.queue('q', { backoffBase: 10_000, backoffJitter: 0 });
  await q.enqueue('x');
  const [job] = await q.claimBatch('w');
  assert.equal(await job.retry({ error: 'flaky' }), 'scheduled');
  assert.deepEqual(await q.claimBatch('w'), []);
  clock.advance(10_000);
  const [again] = await q.claimBatch('w');
  assert.equal(again.attempts, 2);
  assert.equal((await q.getJob(again.id)).lastError, 'flaky');
});

test('delay and runAt (ms, Date) order the work', async () => {
  const { db, clock } = await testDb();
  const q = db.queue('q');
  await q.enqueue('a', { delay: 5_000 });
  await q.enqueue('b', { runAt: new Date(clock.now() + 10_000) });
  await q.enqueue('c', { runAt: clock.now() + 15_000 });
  const order = [];
  for (let i = 0; i < 3; i++) {
    clock.advance(5_000);
    for (const j of await q.claimBatch('w', 10)) order.push(j.payload);
  }
  assert.deepEqual(order, ['a', 'b', 'c']);
});

test('release and snooze give the attempt back; heartbeat extends', async () => {
  const { db, clock } = await testDb();
  const q = db.queue('q', { lease: 10_000 });
  await q.enqueue('x');
  let [job] = await q.claimBatch('w');
  await job.release();
  [job] = await q.claimBatch('w');
  assert.equal(job.attempts, 1);
  clock.advance(8_000);
  const before = job.leaseExpiresAt.getTime();
  assert.ok((await job.heartbeat()).getTime() > before);
  clock.advance(8_000);
  assert.deepEqual(await q.claimBatch('other'), []); // still held
  assert.equal(await job.snooze(30_000), 'scheduled');
  clock.advance(30_000);
  [job] = await q.claimBatch('w');
  assert.equal(job.attempts, 1);
});

// A result saved by one surface and read by another: tests-interop's results.
test('waitResult resolves to the result saved with the ack; Buffer payloads round-trip', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  const e = await q.enqueue(Buffer.from([0, 255, 7]));
  const [job] = await q.claimBatch('w');
  assert.deepEqual(job.payload, Buffer.from([0, 255, 7]));
  await job.ack({ result: { sent: true } });
  assert.deepEqual(await q.waitResult(e.id, { timeout: 1000 }), { sent: true });
});

// Requeueing and purging dead letters: tests-interop's dead_letter.
test('enqueueMany is atomic; ackMany takes the claimed jobs', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  const ids = await q.enqueueMany(['a', 'b', 'c']);
  assert.equal(new Set(ids.map((e) => e.id)).size, 3);
  await assert.rejects(q.enqueueMany(['d', undefined]), honker.InvalidArgument);
  assert.equal((await q.stats()).ready, 3);
  assert.equal(await q.ackMany(await q.claimBatch('w', 3)), 3);
});

test('enqueueMany hands each payload its own id, whether its JSON crosses packed or a Buffer makes it a list', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  // JSON whose strings hold newlines (escaped by JSON.stringify, so the
  // packed form still splits right); more than the fast path's 256 and fewer.
  const many = Array.from({ length: 300 }, (_, i) => ({ i, text: `line ${i}\nnext\r\u2028` }));
  many.push('a\nb', '', 0, null, [1, '\n']);
  const few = ['x\ny', { n: 1 }, 'z'];
  const mixed = [Buffer.from([0, 10, 255]), 'x\ny', { n: 1 }];
  const single = await q.enqueue('one');
  for (const payloads of [many, few, mixed]) {
    const got = await q.enqueueMany(payloads);
    assert.ok(Array.isArray(got));
    assert.equal(got.length, payloads.length);
    assert.deepEqual(Object.keys(got[0]).sort(), Object.keys(single).sort(), 'the same record as enqueue');
    for (let i = 0; i < payloads.length; i++) {
      assert.equal(got[i].existing, false);
      assert.deepEqual((await q.getJob(got[i].id)).payload, payloads[i]);
    }
  }
  // A dedupe key's holder comes back as `existing`, through the batch form too.
  const first = await q.enqueueMany(['k'], { dedupeKey: 'k' });
  assert.deepEqual(await q.enqueueMany(['k'], { dedupeKey: 'k' }), [{ id: first[0].id, existing: true, unique: 'live' }]);
  assert.deepEqual(await q.enqueueMany([]), []);
});

test('unique modes cross as options; the mode that acted comes back, through enqueueMany too', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  const throttle = { dedupeKey: 'k', unique: 'throttle', uniqueFor: 60_000 };
  const first = await q.enqueue('a', throttle);
  assert.deepEqual(first, { id: first.id, existing: false, unique: null });
  assert.deepEqual(await q.enqueue('b', throttle), { id: first.id, existing: true, unique: 'throttle' });
  await (await q.claimBatch('w', 1))[0].ack();
  assert.deepEqual(await q.enqueue('c', throttle), { id: first.id, existing: true, unique: 'throttle' });
  // Keys of the payloads' JSON values: key order does not matter.
  const got = await q.enqueueMany([{ a: 1, b: 2 }, { b: 2, a: 1 }, { a: 2 }], { dedupeByPayload: true });
  assert.deepEqual(got.map((e) => [e.existing, e.unique]), [[false, null], [true, 'live'], [false, null]]);
  assert.equal(got[1].id, got[0].id);
  const debounce = { dedupeKey: 'd', unique: 'debounce', delay: 60_000 };
  const d = await q.enqueue({ v: 1 }, debounce);
  assert.deepEqual(await q.enqueue({ v: 2 }, debounce), { id: d.id, existing: true, unique: 'debounce' });
  assert.deepEqual((await q.getJob(d.id)).payload, { v: 2 });
  const before = (await q.stats()).scheduled;
  for (const bad of [
    { dedupeKey: 'k', unique: 3 },
    { dedupeByPayload: 'yes' },
    { dedupeKey: 'k', uniqueFor: 1000 },
    { dedupeKey: 'k', unique: 'period' },
    { unique: 'live' },
    { dedupeKey: 'k', unique: 'throttle', uniquefor: 1000 },
  ]) {
    await assert.rejects(q.enqueue('x', bad), honker.InvalidArgument, JSON.stringify(bad));
  }
  assert.equal((await q.stats()).scheduled, before);
});

test('keepAlive renews the lease while work runs', async () => {
  const { db, clock } = await testDb();
  const q = db.queue('q', { lease: 30_000 });
  await q.enqueue('x');
  const [job] = await q.claimBatch('w');
  const first = job.leaseExpiresAt.getTime();
  await job.keepAlive(
    async () => {
      for (let i = 0; i < 3; i++) {
        clock.advance(20_000);
        const seen = job.leaseExpiresAt.getTime();
        while (job.leaseExpiresAt.getTime() === seen) await new Promise((r) => setTimeout(r, 2));
      }
    },
    { every: 5 },
  );
  assert.equal(job.leaseExpiresAt.getTime(), first + 60_000);
  assert.deepEqual(await q.claimBatch('other'), []);
  await job.ack();
});

test('keepAlive stops and reports when the lease is lost: the signal aborts, then LeaseLost', async () => {
  const { db } = await testDb();
  const q = db.queue('q', { lease: 30_000 });
  const e = await q.enqueue('x');
  const [job] = await q.claimBatch('w');
  let aborted = null;
  await assert.rejects(
    job.keepAlive(
      async (signal) => {
        assert.equal(await q.cancel(e.id, { reason: 'operator' }), true);
        // The next beat finds the lease gone and the signal aborts.
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        aborted = signal.reason;
        return 'done';
      },
      { every: 5 },
    ),
    (err) => err instanceof honker.LeaseLost && err.code === 'LEASE_LOST',
  );
  assert.ok(aborted instanceof honker.LeaseLost);
});

test('keepAlive gives back the error of its function as it is', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  await q.enqueue('x');
  const [job] = await q.claimBatch('w');
  await assert.rejects(
    job.keepAlive(async () => {
      throw new Error('handler failed');
    }),
    /handler failed/,
  );
  await job.ack();
});

test('a job is rebuilt from its lease (id, token)', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  const e = await q.enqueue({ n: 1 });
  const [claimed] = await q.claimBatch('w');
  const job = await q.job(claimed.id, claimed.token);
  assert.deepEqual([job.id, job.payload, job.workerId, job.attempts], [e.id, { n: 1 }, 'w', 1]);
  assert.equal(job.leaseExpiresAt.getTime(), claimed.leaseExpiresAt.getTime());
  await job.ack();
  await assert.rejects(q.job(claimed.id, claimed.token), honker.LeaseLost); // acked, as ack would say
  await assert.rejects(q.job(10_000, 't'), honker.NotFound); // never existed
  const waiting = await q.enqueue('y');
  await assert.rejects(q.job(waiting.id, 'not-the-token'), honker.LeaseLost);
  await assert.rejects(q.job(waiting.id, ''), honker.InvalidArgument);
});

test("a queue's settings are stored, read back, and refused when bad", async () => {
  // That every surface's handle made afterwards claims and enqueues with
  // them (issue 53 §4) is the queue_settings interop scenario.
  const path = tempPath();
  const producer = await honker.open(path);
  await producer.queue('emails').configure({ lease: 5000, maxAttempts: 7 });
  assert.deepEqual(await producer.queue('emails').settings(), { lease: 5000, maxAttempts: 7 });
  assert.equal(producer.queue('emails')._lease, 5000);
  // A handle's own option is its own; bad settings change nothing.
  assert.equal(producer.queue('emails', { lease: 2000 })._lease, 2000);
  for (const bad of [{ lease: 0 }, { maxAttempts: 0 }, { backoffJitter: 2 }, { leese: 1 }]) {
    await assert.rejects(producer.queue('emails').configure(bad), honker.InvalidArgument, JSON.stringify(bad));
  }
  assert.equal((await producer.queue('emails').settings()).lease, 5000);
  await producer.queue('emails').clearSettings();
  assert.equal(producer.queue('emails')._lease, 60_000);
  await producer.close();
});

test('concurrency caps as Node passes them', async () => {
  // What the caps do across processes and languages is the caps interop scenario.
  const path = tempPath();
  const db = await honker.open(path);
  const other = await honker.open(path);
  const q = db.queue('q');
  for (const key of ['a', 'a', 'b', undefined]) await q.enqueue({ key }, { concurrencyKey: key });
  await q.limitConcurrency({ maxRunning: 3, maxRunningPerKey: 1 });
  const stats = await other.queue('q').stats();
  assert.deepEqual([stats.maxRunning, stats.maxRunningPerKey], [3, 1]);
  const jobs = await other.queue('q').claimBatch('w', 10);
  const keys = [];
  for (const j of jobs) keys.push(String((await q.getJob(j.id)).concurrencyKey));
  assert.deepEqual(keys.sort(), ['a', 'b', 'null']);
  assert.deepEqual(await q.claimBatch('w', 10), []);
  await jobs[0].ack();
  await assert.rejects(q.limitConcurrency({ maxRunning: 0 }), honker.InvalidArgument);
  await assert.rejects(q.limitConcurrency({ maxRunnin: 2 }), honker.InvalidArgument);
  await assert.rejects(q.enqueue('x', { concurrencyKey: 'k'.repeat(513) }), honker.InvalidArgument);
  assert.equal((await q.stats()).maxRunning, 3);
  await q.limitConcurrency();
  assert.equal((await q.stats()).maxRunning, null);
  assert.equal((await q.claimBatch('w', 10)).length, 1);
  await other.close();
  await db.close();
});

test('setFairness takes keys in turn and limits each key, for every open of the file', async () => {
  // ADR 36 as Node calls it: round-robin order, a rate limit per key, the
  // checks; another open of the file obeys both.
  const path = tempPath();
  const db = await honker.open(path);
  const other = await honker.open(path);
  const q = db.queue('q');
  await q.setFairness({ order: 'round_robin' });
  await q.enqueueMany(Array.from({ length: 100 }, (_, i) => i), { concurrencyKey: 'big' });
  for (const key of ['x', 'y', 'z']) await q.enqueueMany([1, 2], { concurrencyKey: key });
  const oq = other.queue('q');
  const keys = [];
  for (let i = 0; i < 8; i++) {
    for (const j of await oq.claimBatch('w', 1)) keys.push((await q.getJob(j.id)).concurrencyKey);
  }
  assert.deepEqual(keys, ['big', 'x', 'y', 'z', 'big', 'x', 'y', 'z']);
  await q.setFairness({ order: 'round_robin', keyLimit: 1, keyPer: 60_000 });
  const s = await oq.stats();
  assert.deepEqual([s.roundRobin, s.keyLimit, s.keyPerMs], [true, 1, 60_000]);
  const batch = await oq.claimBatch('w', 10);
  assert.equal(batch.length, 1);
  assert.deepEqual(await oq.claimBatch('w', 10), []);
  await assert.rejects(q.setFairness({ order: 'fifo' }), honker.InvalidArgument);
  await assert.rejects(q.setFairness({ keyLimit: 5 }), honker.InvalidArgument);
  await assert.rejects(q.setFairness({ keyLimit: 0, keyPer: 1000 }), honker.InvalidArgument);
  await assert.rejects(q.setFairness({ keylimit: 5 }), honker.InvalidArgument);
  assert.equal((await q.stats()).keyLimit, 1);
  await q.setFairness();
  assert.deepEqual([(await q.stats()).roundRobin, (await q.stats()).keyLimit], [false, null]);
  assert.equal((await oq.claimBatch('w', 200)).length, 97);
  await other.close();
  await db.close();
});

test('a paused queue keeps its claim stream waiting until another process resumes it', async () => {
  // Pause and resume as Node calls them; what a pause does on every surface
  // is the pause interop scenario.
  const path = tempPath();
  const db = await honker.open(path);
  const other = await honker.open(path);
  const q = db.queue('q');
  await q.pause({ note: 'deploy' });
  assert.equal((await q.stats()).paused, true);
  await assert.rejects(q.pause({ note: 'x'.repeat(513) }), honker.InvalidArgument);
  await assert.rejects(q.pause({ note: 42 }), honker.InvalidArgument);
  await assert.rejects(q.pause({ reason: 'typo' }), honker.InvalidArgument);
  const stream = q.claim('w')[Symbol.asyncIterator]();
  const next = stream.next();
  let settled = false;
  next.then(() => (settled = true));
  await other.queue('q').enqueue('x');
  await new Promise((r) => setTimeout(r, 300));
  // A broken pause hands the job out within a moment of the enqueue.
  assert.equal(settled, false);
  assert.equal(await other.queue('q').resume(), true);
  const { value: job } = await next;
  assert.equal(job.payload, 'x');
  await job.ack();
  await stream.return();
  assert.equal(await q.resume(), false);

  await db.pauseAll({ note: 'migration' });
  assert.equal((await other.queue('q').stats()).paused, true);
  assert.equal(await other.resumeAll(), true);
  assert.equal(await other.resumeAll(), false);
  assert.equal((await q.stats()).paused, false);
  await other.close();
  await db.close();
});
