// Errors through Node: `err.code` from the stable codes, one class each, bad
// input refused before anything is written. Mirrors test_errors.py.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import honker from '../index.js';
import { snapshot, tempPath, testDb } from './helpers.mjs';

test('every core error code has its own class', () => {
  assert.deepEqual(Object.keys(honker.ERROR_CLASSES).sort(), [...honker.ERROR_CODES].sort());
  const classes = new Set(Object.values(honker.ERROR_CLASSES));
  assert.equal(classes.size, honker.ERROR_CODES.length);
  for (const [code, cls] of Object.entries(honker.ERROR_CLASSES)) {
    const e = new cls(code, 'm');
    assert.ok(e instanceof honker.HonkerError && e instanceof Error);
    assert.equal(e.code, code);
    assert.equal(e.message, `${code}: m`);
  }
});

const bad = {
  'negative delay': (q) => q.enqueue('x', { delay: -1 }),
  'zero max attempts': (q) => q.enqueue('x', { maxAttempts: 0 }),
  'delay and runAt': (q) => q.enqueue('x', { delay: 1, runAt: new Date() }),
  'empty dedupe key': (q) => q.enqueue('x', { dedupeKey: '' }),
  'too large': (q) => q.enqueue('x'.repeat(2 << 20)),
  'undefined payload': (q) => q.enqueue(undefined),
  'zero batch': (q) => q.claimBatch('w', 0),
  'negative batch': (q) => q.claimBatch('w', -1),
  'empty worker': (q) => q.claimBatch('', 1),
  'NaN lease': (q) => q.claimBatch('w', 1, { lease: NaN }),
  'string delay': (q) => q.enqueue('x', { delay: 'soon' }),
};

for (const [name, call] of Object.entries(bad)) {
  test(`bad argument (${name}) is INVALID_ARGUMENT and changes nothing`, async () => {
    const { db } = await testDb();
    const q = db.queue('q');
    await q.enqueue('seed');
    const before = await snapshot(db);
    await assert.rejects(call(q), (e) => e instanceof honker.InvalidArgument && e.code === 'INVALID_ARGUMENT');
    assert.equal(await snapshot(db), before);
  });
}

test('open refuses :memory: and unknown durability', async () => {
  await assert.rejects(honker.open(':memory:'), honker.InvalidArgument);
  await assert.rejects(honker.open(tempPath(), { durability: 'sometimes' }), honker.InvalidArgument);
});

test('unknown ids are NOT_FOUND; SQL errors SQLITE; closed CLOSED', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  await assert.rejects(q.getJob(424242), (e) => e.code === 'NOT_FOUND');
  await assert.rejects(db.execute('INSERT INTO nope VALUES (1)'), (e) => e.code === 'SQLITE');
  await db.close();
  await assert.rejects(q.stats(), honker.Closed);
});

test('waitResult times out', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  const e = await q.enqueue('x');
  await assert.rejects(q.waitResult(e.id, { timeout: 10 }), honker.Timeout);
});

test('arguments of the wrong type are INVALID_ARGUMENT too', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  await assert.rejects(q.getJob('not a number'), honker.InvalidArgument);
  await assert.rejects(q.claimBatch('w', 'many'), honker.InvalidArgument);
  await assert.rejects(db.execute('SELECT ?', [{ an: 'object' }]), honker.InvalidArgument);
  assert.throws(() => db.queue(42, { lease: 'long' }), honker.InvalidArgument);
});

test('a ManualClock refuses times and advances outside 1970 to 9999, and throws', async () => {
  // Issue 53 §23: NaN, Infinity, 1e300 and negative values were taken
  // silently (advance returned a failure object nobody read), and 1e300
  // made a lock granted for 60 s lapse at once.
  for (const bad of [NaN, Infinity, 1e300, -1, 1.5, '5']) {
    assert.throws(() => new honker.ManualClock(bad), { code: 'INVALID_ARGUMENT' }, String(bad));
  }
  const clock = new honker.ManualClock(1_700_000_000_000);
  for (const bad of [NaN, Infinity, -1, 1e300]) {
    assert.throws(() => clock.advance(bad), { code: 'INVALID_ARGUMENT' }, String(bad));
  }
  assert.equal(clock.now(), 1_700_000_000_000, 'unchanged');
  const century = 100 * 365 * 86_400_000;
  assert.throws(() => {
    for (let i = 0; i < 200; i++) clock.advance(century);
  }, { code: 'INVALID_ARGUMENT' });
  assert.ok(clock.now() <= 253_402_300_799_999);
  const db = await honker.open(tempPath(), { clock });
  const lock = db.lock('l');
  assert.ok(await lock.tryAcquire('a'));
  assert.equal(await lock.tryAcquire('b'), null);
  await db.close();
});

test('bad options, lists and functions are InvalidArgument with a code, and change nothing', async () => {
  // Issue 53 §9 and §21: unknown option keys were ignored ({ delya: 5 }
  // enqueued with no delay); null options, a missing list and a
  // non-function threw plain TypeErrors with no code; a payload nested
  // ~10,000 deep threw a RangeError.
  const { db } = await testDb();
  const q = db.queue('q');
  const s = db.stream('s');
  await q.enqueue('a');
  const [job] = await q.claimBatch('w');
  const before = await snapshot(db);
  let deep = [];
  for (let i = 0; i < 20_000; i++) deep = [deep];
  const calls = {
    'unknown enqueue option': () => q.enqueue('x', { delya: 5 }),
    'unknown claim option': () => q.claimBatch('w', 1, { leese: 5 }),
    'unknown publish option': () => s.publish('x', { idempotency: 'k' }),
    'unknown lock option': () => db.lock('l').tryAcquire('o', { tll: 5 }),
    'null enqueue options': () => q.enqueue(1, null),
    'options not an object': () => q.enqueue(1, 5),
    'null retry options': () => job.retry(null),
    'null heartbeat options': () => job.heartbeat(null),
    'enqueueMany(undefined)': () => q.enqueueMany(undefined),
    'enqueueMany of a string': () => q.enqueueMany('abc'),
    'publishMany(undefined)': () => s.publishMany(undefined),
    'ackMany(undefined)': () => q.ackMany(undefined),
    'keepAlive(5)': () => job.keepAlive(5),
    'a payload nested 20,000 deep': () => q.enqueue(deep),
  };
  for (const [what, call] of Object.entries(calls)) {
    await assert.rejects(
      (async () => call())(),
      (e) => e instanceof honker.InvalidArgument && e.code === 'INVALID_ARGUMENT',
      what,
    );
  }
  await assert.rejects(q.enqueue('x', { delya: 5 }), /unknown option "delya"; the options here are delay, runAt/);
  assert.deepEqual(await snapshot(db), before, 'a refused call changed something');
  await job.ack();
  await db.close();
});

test("maxAttempts out of range is told in core's words, whichever side refuses it", async () => {
  // Issue 53 §9: -1 and 0 were told different ranges.
  const { db } = await testDb();
  const q = db.queue('q');
  const told = new Set();
  for (const bad of [-1, 0, 1001]) {
    await assert.rejects(q.enqueue('x', { maxAttempts: bad }), (e) => {
      told.add(e.message.split(', got')[0]);
      return e.code === 'INVALID_ARGUMENT';
    });
  }
  assert.throws(() => db.queue('q2', { maxAttempts: 2000 }), (e) => {
    told.add(e.message.split(', got')[0]);
    return e.code === 'INVALID_ARGUMENT';
  });
  assert.deepEqual([...told], ['INVALID_ARGUMENT: maxAttempts must be an integer between 1 and 1000']);
  await db.close();
});
