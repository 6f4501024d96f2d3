// Bad input on the paths users hit (issue 16 §2): payloads JSON cannot hold,
// non-string paths and names, and numbers outside their type are refused
// with INVALID_ARGUMENT naming the parameter, and change nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import honker from '../index.js';
import { snapshot, tempPath, testDb } from './helpers.mjs';

const cycle = {};
cycle.self = cycle;

const refused = [
  ['NaN', (q) => q.enqueue(NaN), /payload is NaN/],
  ['Infinity, nested', (q) => q.enqueue({ a: [1, -Infinity] }), /payload\.a\[1\] is -Infinity/],
  ['a Set', (q) => q.enqueue(new Set([1])), /payload is a Set/],
  ['a Map, nested', (q) => q.enqueue({ m: new Map() }), /payload\.m is a Map/],
  ['a function', (q) => q.enqueue({ f() {} }), /payload\.f is a function/],
  ['a BigInt', (q) => q.enqueue({ n: 10n }), /payload\.n is a bigint/],
  ['a Date', (q) => q.enqueue({ d: new Date() }), /payload\.d is a Date/],
  ['undefined', (q) => q.enqueue(undefined), /payload is undefined/],
  ['undefined in an array', (q) => q.enqueue([undefined]), /payload\[0\] is undefined/],
  ['a cycle', (q) => q.enqueue(cycle), /cycle/],
  ['priority 1.5', (q) => q.enqueue(1, { priority: 1.5 }), /priority must be an integer/],
  ['maxAttempts -1', (q) => q.enqueue(1, { maxAttempts: -1 }), /maxAttempts must be an integer/],
  ['a worker id that is a number', (q) => q.claimBatch(5), /workerId must be a string, got 5/],
  ['n = -1', (q) => q.claimBatch('w', -1), /n must be an integer/],
  ['a job id that is a string', (q) => q.getJob('7'), /id must be an integer/],
  ['a queue name that is a number', (q, db) => db.queue(5), /name must be a string, got 5/],
  ['sql that is not a string', (q, db) => db.execute(undefined), /sql must be a string/],
  ['a lease that is a string', (q, db) => db.queue('q2', { lease: '5s' }), /lease must be a number of milliseconds, got "5s"/],
  ['a backoff jitter that is a string', (q, db) => db.queue('q2', { backoffJitter: 'x' }), /backoffJitter must be a number/],
  ['a lease to ack that is not one', (q) => q.ackMany([{ id: 'x', token: 5 }]), /jobs\[0\]\.id must be an integer/],
];

const badOpens = [
  [{ readers: 1.5 }, /readers must be an integer/],
  [{ readers: -1 }, /readers must be an integer between 0 and 4294967295, got -1/],
  [{ durability: 5 }, /durability must be a string, got 5/],
  [{ busyTimeout: 'x' }, /busyTimeout must be a number of milliseconds/],
  [{ maxPayloadBytes: -1 }, /maxPayloadBytes must be an integer/],
];

for (const [options, message] of badOpens) {
  test(`open refuses ${JSON.stringify(options)} naming it`, async () => {
    await assert.rejects(
      honker.open(tempPath(), options),
      (e) => e instanceof honker.InvalidArgument && message.test(e.message),
    );
  });
}

for (const [what, call, message] of refused) {
  test(`refused with INVALID_ARGUMENT: ${what}`, async () => {
    const { db } = await testDb();
    const q = db.queue('q');
    const before = await snapshot(db);
    await assert.rejects(
      async () => call(q, db),
      (e) => e instanceof honker.InvalidArgument && e.code === 'INVALID_ARGUMENT' && message.test(e.message),
    );
    assert.equal(await snapshot(db), before);
    await db.close();
  });
}

test('open refuses a path that is not a string, and creates no file named "undefined"', async () => {
  await assert.rejects(honker.open(undefined), (e) => e instanceof honker.InvalidArgument && /path must be a string/.test(e.message));
  await assert.rejects(honker.open(42), honker.InvalidArgument);
  const fs = await import('node:fs');
  assert.equal(fs.existsSync('undefined'), false);
});

test('an object property that is undefined is left out, as JSON.stringify does', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  const { id } = await q.enqueue({ a: 1, b: undefined });
  assert.deepEqual((await q.getJob(id)).payload, { a: 1 });
  await db.close();
});

test('an ack whose result JSON cannot hold is refused, and the job stays leased', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  await q.enqueue('job');
  const [job] = await q.claimBatch('w');
  const before = await snapshot(db);
  await assert.rejects(job.ack({ result: { n: NaN } }), /payload\.n is NaN/);
  assert.equal(await snapshot(db), before);
  await job.ack({ result: { n: 1 } });
  await db.close();
});
