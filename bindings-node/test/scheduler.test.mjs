// The scheduler through Node: idempotent registration, fires that carry
// their boundary, the schedule's own zone across fall-back, catch-up after
// downtime, update/sync/pause/resume/trigger/remove, typed errors that
// change nothing, and run() on the real clock from many concurrent
// "requests" (each boundary once), stopped by an AbortSignal. Mirrors
// bindings-python/tests/test_scheduler.py.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import honker from '../index.js';
import { tempPath, testDb } from './helpers.mjs';

// 2027-01-04T00:00:00Z, a Monday.
const T0 = 1_799_020_800_000;
const MIN = 60_000;

function at(clock, t) {
  clock.advance(t - clock.now());
}

test('add is idempotent; a fire carries its boundary', async () => {
  const { db, clock } = await testDb();
  at(clock, T0 + 10_000);
  const s = db.scheduler();
  assert.equal(await s.add('report', '*/15 * * * *', 'reports', { kind: 'report' }), true);
  assert.equal(await s.add('report', '*/15 * * * *', 'reports', { kind: 'report' }), false);
  const info = await s.get('report');
  assert.deepEqual(info.nextFireAt, new Date(T0 + 15 * MIN));
  assert.equal(info.timeZone, 'UTC');
  assert.equal(info.catchUp, 'latest');
  assert.deepEqual(await s.nextFires('report', 2), [new Date(T0 + 15 * MIN), new Date(T0 + 30 * MIN)]);
  assert.deepEqual(await s.tick(), []);
  at(clock, T0 + 15 * MIN + 20_000);
  const fires = await s.tick();
  assert.equal(fires.length, 1);
  assert.deepEqual(fires[0].fireAt, new Date(T0 + 15 * MIN));
  const [job] = await db.queue('reports').claimBatch('w', 1);
  assert.deepEqual(job.payload, { kind: 'report' });
  assert.deepEqual(job.runAt, new Date(T0 + 15 * MIN));
  assert.equal(fires[0].jobId, job.id);
  assert.deepEqual(await s.tick(), []);
  const after = await s.get('report');
  assert.deepEqual([after.fires, after.missed], [1, 0]);
  assert.equal(await s.get('none'), null);
  await db.close();
});

test("the schedule's zone across fall-back: fixed time once, wildcards by instant", async () => {
  const { db, clock } = await testDb();
  // New York, 2027-11-07: 02:00 EDT falls back to 01:00 EST (06:00Z).
  const start = Date.UTC(2027, 10, 7, 4, 0) - 1;
  at(clock, start);
  const s = db.scheduler();
  await s.add('once', '30 1 * * *', 'q', null, { timeZone: 'America/New_York' });
  await s.add('quarter', '*/15 1 * * *', 'q', null, { timeZone: 'America/New_York' });
  for (let t = start + MIN; t <= start + 4 * 60 * MIN; t += MIN) {
    at(clock, t);
    await s.tick();
  }
  const once = await s.get('once');
  assert.equal(once.fires, 1);
  assert.deepEqual(once.lastFireAt, new Date(Date.UTC(2027, 10, 7, 5, 30)));
  assert.equal((await s.get('quarter')).fires, 8);
  await db.close();
});

test('catch-up after three days down, by policy', async () => {
  const { db, clock } = await testDb();
  at(clock, T0);
  const s = db.scheduler();
  await s.add('skip', '*/15 * * * *', 'q', null, { catchUp: 'skip' });
  await s.add('latest', '*/15 * * * *', 'q');
  await s.add('all', '*/15 * * * *', 'q', null, { catchUp: 'all', catchUpWindow: 30 * MIN });
  at(clock, T0 + 3 * 1440 * MIN + 7 * MIN);
  const fires = await s.tick();
  const by = (n) => fires.filter((f) => f.schedule === n).map((f) => f.fireAt.getTime());
  const last = T0 + 3 * 1440 * MIN;
  assert.deepEqual(by('skip'), []);
  assert.deepEqual(by('latest'), [last]);
  assert.deepEqual(by('all'), [last - 15 * MIN, last]);
  const missed = Object.fromEntries((await s.list()).map((i) => [i.name, i.missed]));
  assert.deepEqual(missed, { all: 286, latest: 287, skip: 288 });
  await db.close();
});

test('update, sync, pause, resume, triggerNow, remove', async () => {
  const { db, clock } = await testDb();
  at(clock, T0);
  const s = db.scheduler();
  await s.add('a', '@every 1m', 'q', null, { maxAttempts: 7, expires: 30_000 });
  assert.equal(await s.update('a', { priority: 5, expires: null }), true);
  let info = await s.get('a');
  assert.deepEqual([info.priority, info.maxAttempts, info.expiresMs], [5, 7, null]);
  assert.equal(await s.update('a', { priority: 5 }), false);
  assert.equal(await s.update('a', { schedule: '@every 2m' }), true);
  assert.deepEqual((await s.get('a')).nextFireAt, new Date(T0 + 2 * MIN));
  await assert.rejects(s.update('nope', { priority: 1 }), honker.NotFound);
  await assert.rejects(s.update('a', { colour: 'red' }), honker.InvalidArgument);
  await s.pause('a', { note: 'deploying' });
  info = await s.get('a');
  assert.deepEqual([info.paused, info.note], [true, 'deploying']);
  at(clock, T0 + 60 * MIN);
  assert.deepEqual(await s.tick(), []);
  await s.resume('a');
  assert.equal((await s.get('a')).missed, 0);
  const id = await s.triggerNow('a');
  assert.equal((await db.queue('q').getJob(id)).state, 'ready');
  let r = await s.sync([
    { name: 'a', schedule: '@every 2m', queue: 'q', maxAttempts: 7, priority: 5 },
    { name: 'b', schedule: '0 9 * * MON', queue: 'q', timeZone: 'America/New_York' },
  ]);
  assert.deepEqual([r.added, r.removed], [['b'], []]);
  r = await s.sync([{ name: 'b', schedule: '0 9 * * MON', queue: 'q', timeZone: 'America/New_York' }]);
  assert.deepEqual(r, { added: [], changed: [], removed: ['a'] });
  assert.deepEqual((await s.list()).map((i) => i.name), ['b']);
  assert.equal(await s.remove('b'), true);
  assert.equal(await s.remove('b'), false);
  for (const p of [s.pause('x'), s.resume('x'), s.triggerNow('x')]) await assert.rejects(p, honker.NotFound);
  await db.close();
});

test('bad input is InvalidArgument and changes nothing', async () => {
  const { db, clock } = await testDb();
  at(clock, T0);
  const s = db.scheduler();
  await s.add('ok', '* * * * *', 'q');
  const before = JSON.stringify(await s.list());
  const bad = [
    [['x', '61 * * * *', 'q'], /field 1 \(minute\)/],
    [['x', '* * *', 'q'], /3 fields/],
    [['x', '@every 0s', 'q'], /@every/],
    [['x', '* * * * *', 'q', null, { timeZone: 'Mars/Olympus' }], /unknown time zone/],
    [['x', '* * * * *', 'q', null, { catchUp: 'sometimes' }], /catch_up/],
    [['x', '* * * * *', 'q', null, { overlap: 'maybe' }], /overlap/],
    [['x', '* * * * *', 'q', null, { catchUpMax: 0 }], /catch_up_max/],
    [['x', '* * * * *', 'q', null, { jitter: -1 }], /jitter/],
    [['x', '* * * * *', 'q', null, { startAt: 1.5 }], /startAt/],
    [['x', '* * * * *', 'q', null, { cadence: 'daily' }], /unknown schedule option/],
    [['x', '* * * * *', 'q', () => 1], /payload/],
    [['', '* * * * *', 'q'], /name/],
    [[7, '* * * * *', 'q'], /name/],
  ];
  for (const [args, re] of bad) {
    await assert.rejects(s.add(...args), (e) => e instanceof honker.InvalidArgument && re.test(e.message));
  }
  assert.equal(JSON.stringify(await s.list()), before);
  await db.close();
});

test('concurrent requests register at once; four runners fire each boundary once', async () => {
  const db = await honker.open(tempPath());
  await Promise.all(Array.from({ length: 8 }, () => db.scheduler().add('beat', '@every 1s', 'beats')));
  assert.equal((await db.scheduler().list()).length, 1);
  const ac = new AbortController();
  const runs = Array.from({ length: 4 }, () => db.scheduler().run({ signal: ac.signal }));
  await sleep(3500);
  const started = Date.now();
  ac.abort();
  await Promise.all(runs);
  assert.ok(Date.now() - started < 2000, 'run() ends promptly on abort');
  const rows = await db.query("SELECT run_at FROM _honker_jobs WHERE queue = 'beats' ORDER BY run_at");
  const runAts = rows.map((r) => r.run_at);
  assert.ok(runAts.length >= 2 && runAts.length <= 5, JSON.stringify(runAts));
  assert.equal(new Set(runAts).size, runAts.length, 'no boundary twice');
  for (let i = 1; i < runAts.length; i++) assert.equal(runAts[i] - runAts[i - 1], 1000);
  await db.close();
});

test('a Worker runs the scheduler by default; scheduler: false leaves it out', async () => {
  const db = await honker.open(tempPath());
  await db.scheduler().add('beat', '@every 1s', 'beats', { beat: true });
  const seen = [];
  const quiet = new honker.Worker(db, { scheduler: false });
  quiet.handle('beats', async (job) => {
    seen.push(job.runAt);
  });
  setTimeout(() => quiet.stop(), 2200);
  await quiet.run({ signals: false });
  assert.deepEqual(seen, []);
  assert.equal((await db.scheduler().get('beat')).fires, 0);
  const w = new honker.Worker(db);
  w.handle('beats', async (job) => {
    seen.push(job.runAt);
    if (seen.length >= 2) w.stop();
  });
  await w.run({ signals: false });
  assert.ok(seen.length >= 2);
  for (const t of seen) assert.equal(t.getTime() % 1000, 0);
  assert.throws(() => new honker.Worker(db, { scheduler: 'yes' }), honker.InvalidArgument);
  await db.close();
});
