// Locks with fencing tokens and rate limits through Node: grants and tokens,
// the fence rolling back a stale holder's transaction, `await using` and
// withLock renewed while the block runs, the block's AbortSignal aborted
// when the lock is lost, an aborted wait that holds nothing, mutual
// exclusion under concurrent requests, GCRA decisions on the test clock,
// parameters shared through the file, refunds on rollback, and typed errors
// that change nothing. Mirrors bindings-python/tests/test_locks.py.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import honker from '../index.js';
import { tempPath, testDb } from './helpers.mjs';

// Tokens, release, info, lapse, renewal and the fence are tests-interop's
// lock_fencing and lock_lapse, played by every surface.
test('grant times are Dates of the database clock', async () => {
  const { db, clock } = await testDb();
  const lock = db.lock('reindex');
  const a = await lock.tryAcquire('a', { ttl: 10_000 });
  const info = await lock.info();
  assert.ok(info.expiresAt instanceof Date);
  assert.equal(info.expiresAt.getTime(), clock.now() + 10_000);
  assert.equal((await lock.renew(a.token, { ttl: 20_000 })).getTime(), clock.now() + 20_000);
  await db.close();
});

test('await using: renewed while held, released at the end; Timeout when held elsewhere', async () => {
  const db = await honker.open(tempPath());
  const lock = db.lock('job');
  // What `await using` does (Node 20 parses no
  // `using`; TypeScript and Node 24 do): dispose at the end of the block.
  const held = await lock.hold('a', { ttl: 300 });
  try {
    await sleep(1000);
    assert.equal(await lock.tryAcquire('b', { ttl: 1000 }), null, 'renewed, not lapsed');
    assert.ok(held.renewals >= 2 && !held.lost);
    await db.transaction(async (tx) => held.fence(tx));
  } finally {
    await held[Symbol.asyncDispose]();
  }
  assert.equal(await lock.info(), null);
  const other = await lock.tryAcquire('b', { ttl: 30_000 });
  const started = Date.now();
  await assert.rejects(lock.hold('a', { ttl: 1000, wait: 200 }), honker.Timeout);
  assert.ok(Date.now() - started >= 150);
  // A waiting hold is woken by the release.
  setTimeout(() => lock.release(other.token), 200);
  const token = await lock.withLock('a', { ttl: 5000, wait: 30_000 }, async (held) => held.token);
  assert.ok(token > other.token);
  assert.equal(await lock.info(), null);
  await db.close();
});

test("a lost lock aborts the block's signal and withLock rejects with LeaseLost", async () => {
  const { db, clock } = await testDb();
  const lock = db.lock('job');
  let aborted;
  const started = Date.now();
  await assert.rejects(
    lock.withLock('a', { ttl: 10_000, every: 100 }, async (held) => {
      clock.advance(20_000);
      assert.ok(await lock.tryAcquire('b', { ttl: 10_000 }));
      await new Promise((resolve) => held.signal.addEventListener('abort', resolve, { once: true }));
      aborted = held.signal.reason;
      assert.ok(held.lost);
      await assert.rejects(
        db.transaction(async (tx) => {
          await held.fence(tx);
          await tx.execute("INSERT INTO orders (status) VALUES ('stale')");
        }),
        honker.LeaseLost,
      );
    }),
    honker.LeaseLost,
  );
  assert.ok(aborted instanceof honker.LeaseLost);
  assert.ok(Date.now() - started < 5000);
  assert.equal((await lock.info()).owner, 'b', 'the end of the block released nothing');
  assert.deepEqual(await db.query('SELECT count(*) AS n FROM orders'), [{ n: 0 }]);
  await db.close();
});

test('once held.lost is true, held.signal has aborted', async () => {
  // Issue 53 §22: lost turned true up to 1.5 s before the signal aborted,
  // so code that checked the signal before a write learned late.
  const { db, clock } = await testDb();
  const lock = db.lock('job');
  const held = await lock.hold('a', { ttl: 10_000, every: 50 });
  clock.advance(20_000);
  assert.ok(await lock.tryAcquire('b', { ttl: 10_000 }));
  // Spin without yielding: the renewal thread finds the loss meanwhile,
  // while the event loop (which delivers the watch's news) cannot turn.
  const until = Date.now() + 5000;
  while (!held.lost) assert.ok(Date.now() < until, 'the loss was never found');
  assert.ok(held.signal.aborted, 'lost, but the signal had not aborted');
  assert.ok(held.signal.reason instanceof honker.LeaseLost);
  await held.release();
  await db.close();
});

test('an aborted wait ends at once and holds nothing', async () => {
  const db = await honker.open(tempPath());
  const lock = db.lock('job');
  const g = await lock.tryAcquire('a', { ttl: 30_000 });
  const ac = new AbortController();
  const waiting = lock.acquire('b', { ttl: 30_000, wait: 60_000, signal: ac.signal });
  const holding = lock.hold('c', { ttl: 30_000, wait: 60_000, signal: ac.signal });
  // Both settle on the abort: watch the rejection before it can happen, or
  // it may land while the first await is pending and count as unhandled.
  const holdingRejects = assert.rejects(holding, /request gone/);
  await sleep(200);
  const started = Date.now();
  ac.abort(new Error('request gone'));
  assert.equal(await waiting, null);
  await holdingRejects;
  assert.ok(Date.now() - started < 2000);
  assert.equal((await lock.info()).token, g.token);
  await db.close();
});

test('concurrent requests take turns under one lock: no update lost', async () => {
  const db = await honker.open(tempPath());
  await db.execute('CREATE TABLE counter (n INTEGER)');
  await db.execute('INSERT INTO counter VALUES (0)');
  const lock = db.lock('counter');
  const request = async (i) => {
    for (let k = 0; k < 10; k++) {
      await lock.withLock(`req-${i}`, { ttl: 5000, wait: 30_000 }, async (held) => {
        const [{ n }] = await db.query('SELECT n FROM counter');
        await sleep(1);
        await db.transaction(async (tx) => {
          await held.fence(tx);
          await tx.execute('UPDATE counter SET n = ?', [n + 1]);
        });
      });
    }
  };
  await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(request));
  assert.deepEqual(await db.query('SELECT n FROM counter'), [{ n: 80 }]);
  await db.close();
});

test('holds that name one owner exclude each other, each with its own token', async () => {
  // Issue 53's trial: an in-process Worker with concurrency 4 (or requests
  // of one process) holding the nightly lock under one owner name.
  const db = await honker.open(tempPath());
  const lock = db.lock('nightly');
  let inside = 0;
  let overlaps = 0;
  const tokens = new Set();
  const handler = async () => {
    await lock.withLock('worker-1', { ttl: 30_000, wait: 30_000 }, async (held) => {
      if (++inside > 1) overlaps++;
      tokens.add(held.token);
      await sleep(5);
      await db.transaction(async (tx) => held.fence(tx));
      inside--;
    });
  };
  await Promise.all(Array.from({ length: 12 }, handler));
  assert.equal(overlaps, 0);
  assert.equal(tokens.size, 12);
  assert.equal(await lock.info(), null);
  const g = await lock.tryAcquire('worker-1');
  assert.ok(g);
  assert.equal(await lock.tryAcquire('worker-1'), null);
  await db.close();
});

test('600 short holds at once take no thread each; a long hold beside them is renewed', () => {
  // More holds than the native pool has threads (512): a watch per hold
  // from its start would take every thread, and their releases (which need
  // one) would wait forever. In a child process, so a hang fails the test.
  const script = `
    const honker = require(${JSON.stringify(fileURLToPath(new URL('../index.js', import.meta.url)))});
    (async () => {
      const db = await honker.open(process.argv[1]);
      const long = await db.lock('long').hold('a', { ttl: 300 });
      for (let round = 0; round < 3; round++) {
        // All 600 held at once, then all released.
        const held = await Promise.all(
          Array.from({ length: 600 }, (_, i) => db.lock('short-' + i).hold('r', { ttl: 30_000 })),
        );
        await Promise.all(held.map((h) => h.release()));
      }
      await new Promise((r) => setTimeout(r, 500));
      const out = { renewals: long.renewals, lost: long.lost, aborted: long.signal.aborted };
      await long.release();
      const held = await db.query("SELECT count(*) AS n FROM _honker_lock_holders WHERE name != ''");
      out.held = held[0].n;
      console.log(JSON.stringify(out));
      await db.close();
    })().catch((e) => { console.error(e); process.exit(1); });
  `;
  const out = execFileSync(process.execPath, ['-e', script, tempPath()], { encoding: 'utf8', timeout: 120_000 });
  const r = JSON.parse(out.trim().split('\n').pop());
  assert.ok(r.renewals >= 3, `renewals ${r.renewals}`);
  assert.deepEqual([r.lost, r.aborted, r.held], [false, false, 0]);
});

test('bad lock input is InvalidArgument and changes nothing', async () => {
  const { db } = await testDb();
  const lock = db.lock('x');
  for (const ttl of [0, -1, 31 * 86_400_000, 'soon']) {
    await assert.rejects(lock.tryAcquire('a', { ttl }), honker.InvalidArgument, String(ttl));
  }
  await assert.rejects(lock.tryAcquire('', { ttl: 1000 }), honker.InvalidArgument);
  assert.throws(() => db.lock(''), honker.InvalidArgument);
  await assert.rejects(lock.hold('a', { ttl: 1000, every: 1000 }), honker.InvalidArgument);
  await assert.rejects(lock.release(0), honker.InvalidArgument);
  await assert.rejects(lock.fence(undefined, 1), honker.InvalidArgument);
  // The row named '' is the token counter, not a holder.
  assert.deepEqual(await db.query("SELECT * FROM _honker_lock_holders WHERE name != ''"), []);
  await db.close();
});

test('rate limits answer in full on the test clock', async () => {
  const { db, clock } = await testDb();
  const rl = await db.rateLimiter('api', { limit: 10, per: 1000, burst: 6 });
  const got = [];
  for (let i = 0; i < 6; i++) got.push(await rl.tryAcquire('k'));
  assert.deepEqual(
    got.map((d) => [d.allowed, d.remaining]),
    [5, 4, 3, 2, 1, 0].map((r) => [true, r]),
  );
  assert.deepEqual(await rl.tryAcquire('k'), { allowed: false, limit: 10, remaining: 0, retryAfterMs: 100, resetAfterMs: 600 });
  assert.ok((await rl.tryAcquire('other')).allowed, 'keys are independent');
  clock.advance(100);
  assert.ok((await rl.tryAcquire('k')).allowed);
  assert.equal((await rl.tryAcquire('new', { cost: 0 })).remaining, 6);
  assert.equal((await rl.tryAcquire('new', { cost: 4 })).remaining, 2);
  await assert.rejects(rl.tryAcquire('new', { cost: 7 }), honker.InvalidArgument);
  assert.equal((await rl.tryAcquire('new', { cost: 0 })).remaining, 2);
  assert.deepEqual(await rl.params(), { limit: 10, per: 1000, burst: 6 });
  await db.close();
});

// Sharing, conflicts, updates and refunds are tests-interop's
// rate_limit_params and rate_limit_refund.
test('a limiter opens with both parameters or as stored; a check in a transaction needs { tx }', async () => {
  const db = await honker.open(tempPath());
  await assert.rejects(db.rateLimiter('nope'), honker.NotFound);
  await assert.rejects(db.rateLimiter('half', { limit: 5 }), honker.InvalidArgument);
  await db.rateLimiter('mail', { limit: 1, per: 60_000 });
  await assert.rejects(
    db.transaction(async () => {
      const rl = await db.rateLimiter('mail');
      await rl.tryAcquire('k');
    }),
    honker.InvalidArgument,
    'a check without { tx } inside a transaction is refused',
  );
  await db.close();
});

test('acquire sleeps retryAfterMs; bad limits are InvalidArgument', async () => {
  const db = await honker.open(tempPath());
  const rl = await db.rateLimiter('w', { limit: 10, per: 1000 });
  assert.ok((await rl.tryAcquire()).allowed);
  const started = Date.now();
  assert.ok((await rl.acquire('', { wait: 5000 })).allowed);
  assert.ok(Date.now() - started >= 80);
  assert.ok(!(await rl.acquire('', { wait: 10 })).allowed);
  // An abort ends the wait with the last refusal; an aborted signal still
  // makes the one try.
  const slow = await db.rateLimiter('slow', { limit: 1, per: 3000 });
  assert.ok((await slow.tryAcquire()).allowed);
  const c = new AbortController();
  const waiting = slow.acquire('', { wait: 5000, signal: c.signal });
  setTimeout(() => c.abort(), 50);
  const aborted = Date.now();
  const d = await waiting;
  assert.ok(!d.allowed && d.retryAfterMs > 0, JSON.stringify(d));
  assert.ok(Date.now() - aborted < 1000, 'ended by the abort');
  assert.ok((await slow.acquire('other', { wait: 5000, signal: AbortSignal.abort() })).allowed);
  assert.ok(!(await slow.acquire('other', { wait: 5000, signal: AbortSignal.abort() })).allowed);
  await assert.rejects(rl.acquire(7), honker.InvalidArgument);
  await assert.rejects(rl.acquire('', { cost: -1 }), honker.InvalidArgument);
  for (const o of [{ limit: 0, per: 1 }, { limit: 1, per: 0 }, { limit: 1, per: 1, burst: 0 }, { limit: 1.5, per: 1 }]) {
    await assert.rejects(db.rateLimiter('x', o), honker.InvalidArgument, JSON.stringify(o));
  }
  await assert.rejects(rl.tryAcquire(5), honker.InvalidArgument);
  await db.close();
});

test('a rate-limited queue starts what its limit allows; the rest keep their attempts', async () => {
  const { db, clock } = await testDb();
  const q = db.queue('mail');
  await q.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ n: i })));
  await q.setRateLimit({ limit: 10, per: 1000, burst: 3 });
  assert.deepEqual(await db.queue('mail').rateLimit(), { limit: 10, per: 1000, burst: 3 });
  assert.equal((await q.claimBatch('w', 10)).length, 3);
  assert.equal((await q.claimBatch('w', 10)).length, 0);
  clock.advance(100);
  assert.equal((await q.claimBatch('w', 10)).length, 1);
  assert.deepEqual(await db.query('SELECT count(*) AS n FROM _honker_jobs WHERE attempts = 0'), [{ n: 16 }]);
  await assert.rejects(q.setRateLimit({ limit: 0, per: 1000 }), honker.InvalidArgument);
  await q.setRateLimit(null);
  assert.equal(await q.rateLimit(), null);
  assert.equal((await q.claimBatch('w', 100)).length, 16);
  await db.close();
});
