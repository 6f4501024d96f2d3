// honker.Worker: core's worker runtime with JS handlers (each gets an
// AbortSignal). Mirrors bindings-python/tests/test_worker.py, plus what only
// a process shows: SIGTERM, SIGSTOP past the lease.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import honker from '../index.js';
import { stopWhen, tempPath } from './helpers.mjs';

const { Worker, Permanent, Retry, Snooze, InvalidArgument } = honker;

/** A database on the real clock: leases lapse in real time. */
async function realDb() {
  const file = tempPath();
  return { db: await honker.open(file), file };
}


function peak() {
  const p = { now: {}, peak: {} };
  p.enter = (...keys) => {
    for (const k of keys) {
      p.now[k] = (p.now[k] ?? 0) + 1;
      p.peak[k] = Math.max(p.peak[k] ?? 0, p.now[k]);
    }
  };
  p.leave = (...keys) => {
    for (const k of keys) p.now[k] -= 1;
  };
  return p;
}

test('handlers never exceed the global and per-queue limits', async () => {
  const { db } = await realDb();
  await db.queue('a').enqueueMany([...Array(40).keys()]);
  await db.queue('b').enqueueMany([...Array(40).keys()]);
  const w = new Worker(db, { concurrency: 5 });
  const p = peak();
  const done = [];
  const handler = (q) => async (job) => {
    p.enter(q, 'all');
    await sleep(5);
    p.leave(q, 'all');
    done.push(job.id);
  };
  w.handle('a', handler('a'), { concurrency: 2 }).handle('b', handler('b'), { concurrency: 4 });
  stopWhen(w, () => done.length === 80);
  await w.run();
  assert.equal(new Set(done).size, 80);
  assert.ok(p.peak.a <= 2 && p.peak.b <= 4 && p.peak.all <= 5, JSON.stringify(p.peak));
  assert.ok(p.peak.all >= 3, `handlers ran concurrently: ${JSON.stringify(p.peak)}`);
  await db.close();
});

test('outcomes: a value acks (saved as the result), Retry, an error, Permanent, Snooze, an unstorable result', async () => {
  const { db } = await realDb();
  const q = db.queue('q', { maxAttempts: 2, backoffBase: 50, backoffJitter: 0 });
  const ids = {};
  for (const kind of ['ack', 'retry', 'boom', 'permanent', 'snooze', 'unstorable']) {
    ids[kind] = (await q.enqueue({ kind })).id;
  }
  const w = new Worker(db, { concurrency: 4 });
  const events = [];
  for (const kind of ['start', 'success', 'retry', 'dead', 'snoozed']) w.on(kind, (e) => events.push(e));
  const runs = {};
  w.handle('q', async (job) => {
    const { kind } = job.payload;
    runs[kind] = (runs[kind] ?? 0) + 1;
    if (kind === 'ack') return { sent: true };
    if (kind === 'retry') throw new Retry('429 from the API', { delay: 60_000 });
    if (kind === 'boom') throw new TypeError('flaky');
    if (kind === 'permanent') throw new Permanent('invalid address');
    if (kind === 'snooze') {
      if (runs.snooze === 1) throw new Snooze(50);
      return 'later';
    }
    return { when: new Date() }; // not JSON
  });
  stopWhen(w, async () => {
    const dead = new Set((await q.deadLetters()).map((d) => d.id));
    return dead.has(ids.boom) && dead.has(ids.permanent) && (runs.snooze ?? 0) >= 2 && events.some((e) => e.kind === 'success' && e.jobId === ids.snooze);
  });
  await w.run();

  assert.deepEqual(await q.getResult(ids.ack), { sent: true });
  const retry = await q.getJob(ids.retry);
  assert.deepEqual([retry.state, retry.attempts, retry.lastError], ['scheduled', 1, '429 from the API']);
  assert.ok(retry.runAt.getTime() > Date.now() + 50_000);
  const boom = await q.getJob(ids.boom);
  assert.deepEqual([boom.state, boom.attempts, boom.lastError], ['dead', 2, 'TypeError: flaky']);
  const perm = await q.getJob(ids.permanent);
  assert.deepEqual([perm.state, perm.attempts, perm.lastError], ['dead', 1, 'invalid address']);
  assert.equal(await q.getResult(ids.snooze), 'later');
  assert.equal(runs.snooze, 2);
  const again = events.find((e) => e.kind === 'success' && e.jobId === ids.snooze);
  assert.equal(again.attempts, 1, 'a snooze spends no attempt');
  const unstorable = await q.getJob(ids.unstorable);
  assert.match(unstorable.lastError, /^the handler's result could not be stored: .*Date/);
  const has = (kind, id) => events.some((e) => e.kind === kind && e.jobId === id);
  assert.ok(has('start', ids.ack) && has('success', ids.ack));
  assert.ok(has('retry', ids.retry) && has('dead', ids.permanent) && has('snoozed', ids.snooze));
  const ev = events.find((e) => e.kind === 'dead' && e.jobId === ids.permanent);
  assert.equal(ev.error, 'invalid address');
  assert.equal(ev.queue, 'q');
  assert.equal(typeof ev.ms, 'number');
  await db.close();
});

test('the envelope dispatches by task; unknown tasks and non-envelopes go dead', async () => {
  const { db } = await realDb();
  const q = db.queue('jobs');
  await q.enqueue({ task: 'resize', args: { w: 10 } });
  await q.enqueue({ task: 'email', args: ['a@b.c'] });
  const unknown = (await q.enqueue({ task: 'transcode', args: [] })).id;
  const raw = (await q.enqueue({ no: 'envelope' })).id;
  const w = new Worker(db);
  const got = {};
  w.handle('jobs', (job) => void (got.resize = job.payload.args), { task: 'resize' });
  w.handle('jobs', async (job) => void (got.email = job.payload.args), { task: 'email' });
  assert.throws(() => w.handle('jobs', () => {}), InvalidArgument); // the queue carries tasks
  assert.throws(() => w.handle('jobs', () => {}, { task: 'resize' }), /already has a handler for resize/);
  stopWhen(w, async () => Object.keys(got).length === 2 && (await q.deadLetters()).length === 2);
  await w.run();
  assert.deepEqual(got, { resize: { w: 10 }, email: ['a@b.c'] });
  assert.equal((await q.getJob(unknown)).lastError, 'no handler for task transcode');
  assert.match((await q.getJob(raw)).lastError, /^not a task envelope/);
  assert.equal((await q.stats()).running, 0);
  await db.close();
});

test('a handler running five times its lease is not duplicated', async () => {
  const { db } = await realDb();
  const q = db.queue('slow');
  const id = (await q.enqueue('x')).id;
  const w = new Worker(db, { concurrency: 1 });
  const runs = [];
  const stolen = [];
  w.handle(
    'slow',
    async (job) => {
      runs.push(job.id);
      const end = Date.now() + 1000; // 5x the lease
      while (Date.now() < end) {
        stolen.push(...(await q.claimBatch('thief', 1))); // must find nothing
        await sleep(50);
      }
      return 'done';
    },
    { lease: 200 },
  );
  stopWhen(w, async () => (await q.getResult(id)) === 'done');
  await w.run();
  assert.deepEqual(runs, [id]);
  assert.deepEqual(stolen, []);
  await db.close();
});

test('past its timeout a handler is aborted and its job retried; one that ignores the signal keeps its slot', async () => {
  const { db } = await realDb();
  const q = db.queue('t', { backoffBase: 50, backoffJitter: 0, maxAttempts: 2 });
  const id = (await q.enqueue('x')).id;
  const other = (await q.enqueue('y', { priority: -1 })).id;
  const w = new Worker(db, { concurrency: 1 });
  const events = [];
  w.on('timed_out', (e) => events.push(e));
  w.on('success', (e) => events.push(e));
  const reasons = [];
  let stubbornEnded = 0;
  w.handle(
    't',
    async (job, signal) => {
      if (job.id === other) return 'other';
      if (job.attempts === 1) {
        // Ignores its signal: its slot (the only one) stays taken until it returns.
        await sleep(600);
        stubbornEnded = Date.now();
        reasons.push(signal.aborted && signal.reason.code);
        return 'too late';
      }
      await new Promise((resolve, reject) => {
        const t = setTimeout(resolve, 30_000);
        signal.addEventListener('abort', () => {
          clearTimeout(t);
          reasons.push(signal.reason.code);
          reject(signal.reason);
        });
      });
    },
    { timeout: 200 },
  );
  const otherStarted = [];
  w.on('start', (e) => e.jobId === other && otherStarted.push(Date.now()));
  stopWhen(w, async () => (await q.getJob(id)).state === 'dead' && (await q.getResult(other)) === 'other');
  await w.run();
  assert.deepEqual(reasons, ['TIMEOUT', 'TIMEOUT']);
  const info = await q.getJob(id);
  assert.equal(info.lastError, 'handler timed out after 200 ms');
  assert.equal(await q.getResult(id), null, 'the late value was discarded');
  assert.ok(otherStarted[0] >= stubbornEnded, 'the stubborn handler kept the slot until it returned');
  assert.deepEqual(
    events.filter((e) => e.jobId === id).map((e) => e.kind),
    ['timed_out', 'timed_out'],
  );
  await db.close();
});

test('a handler that acks in its own transaction settles the job', async () => {
  const { db } = await realDb();
  await db.execute('CREATE TABLE sent (job_id INTEGER PRIMARY KEY)');
  const q = db.queue('outbox');
  const ids = (await q.enqueueMany(['a', 'b', 'c'])).map((e) => e.id);
  const w = new Worker(db);
  const events = [];
  w.on('settled', (e) => events.push(e));
  w.handle('outbox', async (job) => {
    await db.transaction(async (tx) => {
      await tx.execute('INSERT INTO sent (job_id) VALUES (?)', [job.id]);
      await job.ack({ tx });
    });
  });
  stopWhen(w, () => events.length === 3);
  await w.run();
  assert.deepEqual((await db.query('SELECT job_id FROM sent ORDER BY 1')).map((r) => r.job_id), ids);
  const s = await q.stats();
  assert.deepEqual([s.running, s.ready], [0, 0]);
  await db.close();
});

test('a handler whose job is cancelled elsewhere is aborted with LeaseLost when its renewal finds it gone', async () => {
  const { db } = await realDb();
  const q = db.queue('c');
  const id = (await q.enqueue('x')).id;
  const w = new Worker(db, { concurrency: 1 });
  const lost = [];
  w.on('lease_lost', (e) => lost.push(e.jobId));
  let started = 0;
  let abortedAfter = null;
  let reason = null;
  w.handle(
    'c',
    async (job, signal) => {
      started = Date.now();
      await new Promise((resolve) => {
        const t = setTimeout(resolve, 30_000);
        signal.addEventListener('abort', () => {
          clearTimeout(t);
          abortedAfter = Date.now() - started;
          reason = signal.reason;
          resolve();
        });
      });
    },
    // Renewed every 100 ms: the first renewal after the cancel finds it gone.
    { lease: 300 },
  );
  const run = w.run();
  while (!started) await sleep(10);
  assert.equal(await q.cancel(id), true);
  while (abortedAfter === null && Date.now() - started < 10_000) await sleep(10);
  w.stop();
  await run;
  assert.ok(abortedAfter !== null && abortedAfter < 5_000, `aborted after ${abortedAfter} ms`);
  assert.equal(reason.code, 'LEASE_LOST');
  assert.deepEqual(lost, [id]);
  await db.close();
});

test('an AbortSignal stops the worker: short jobs finish, the long one is released past the grace and aborted', async () => {
  const { db } = await realDb();
  const q = db.queue('q');
  await q.enqueueMany(['short', 'long']);
  const w = new Worker(db, { grace: 500 });
  const started = [];
  const finished = [];
  const aborted = [];
  w.handle('q', async (job, signal) => {
    started.push(job.payload);
    await new Promise((resolve) => {
      const t = setTimeout(resolve, job.payload === 'short' ? 50 : 30_000);
      signal.addEventListener('abort', () => {
        clearTimeout(t);
        aborted.push(job.payload);
        resolve();
      });
    });
    if (!signal.aborted) finished.push(job.payload);
  });
  const ac = new AbortController();
  const run = w.run({ signal: ac.signal });
  while (started.length < 2) await sleep(10);
  const t0 = Date.now();
  ac.abort();
  await run;
  assert.ok(Date.now() - t0 < 5000);
  assert.deepEqual(finished, ['short']);
  assert.deepEqual(aborted, ['long']);
  await sleep(50); // the aborted handler's late outcome is discarded
  const s = await q.stats();
  assert.deepEqual([s.ready, s.running], [1, 0], 'the long one was released');
  assert.equal((await q.claimBatch('x', 1))[0].attempts, 1, 'its attempt was given back');
  await db.close();
});

test('bad options are InvalidArgument and change nothing', async () => {
  const { db } = await realDb();
  assert.throws(() => new Worker(db, { concurrency: 0 }), InvalidArgument);
  assert.throws(() => new Worker(db, { grace: -1 }), InvalidArgument);
  assert.throws(() => new Worker({}), InvalidArgument);
  const w = new Worker(db);
  assert.throws(() => w.handle('q', () => {}, { timeout: 0 }), InvalidArgument);
  assert.throws(() => w.handle('q', 'not a function'), InvalidArgument);
  assert.throws(() => w.handle('q', () => {}, { timeout: 'soon' }), InvalidArgument);
  assert.throws(() => w.on('finished', () => {}), InvalidArgument);
  assert.throws(() => new Snooze('soon'), InvalidArgument);
  await assert.rejects(w.run(), /no handler/);
  w.handle('q', () => {}, { concurrency: 2 });
  assert.throws(() => w.handle('q', () => {}, { task: 'x', concurrency: 3 }), /other options/);
  assert.deepEqual(w.queues, ['q']);
  const ac = new AbortController();
  ac.abort();
  await w.run({ signal: ac.signal });
  await assert.rejects(w.run(), /runs once/);
  assert.equal((await db.query('SELECT count(*) AS n FROM _honker_jobs'))[0].n, 0);
  await db.close();
});

// ----- processes ------------------------------------------------------------

const INDEX = fileURLToPath(new URL('../index.js', import.meta.url));

const APP = `
const fs = require('node:fs');
const honker = require(${JSON.stringify(INDEX)});
const env = process.env;
const log = (...parts) => fs.appendFileSync(env.APP_LOG, JSON.stringify(parts) + '\\n');
(async () => {
  const db = await honker.open(env.APP_DB);
  const worker = new honker.Worker(db, { concurrency: Number(env.APP_CONCURRENCY ?? 4), grace: Number(env.APP_GRACE ?? 2000), workerId: 'app' });
  worker.on('lease_lost', (e) => console.log('lease_lost job', e.jobId));
  worker.on('released', (e) => console.log('released job', e.jobId));
  worker.handle('work', async (job, signal) => {
    log('start', job.id, job.payload);
    const end = Date.now() + job.payload.sleep;
    while (Date.now() < end) {
      if (signal.aborted) return log('aborted', job.id);
      await new Promise((r) => setTimeout(r, 10));
    }
    log('done', job.id);
    return 'by app';
  }, { lease: Number(env.APP_LEASE ?? 60000) });
  await worker.run({ signals: true });
  console.log('shut down');
  await db.close();
})();
`;

function startApp(file, env) {
  const dir = fs.mkdtempSync(path.join(path.dirname(file), 'app-'));
  fs.writeFileSync(path.join(dir, 'app.js'), APP);
  const log = path.join(dir, 'app.log');
  const child = spawn(process.execPath, [path.join(dir, 'app.js')], {
    env: { ...process.env, APP_DB: file, APP_LOG: log, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.output = '';
  child.stdout.on('data', (d) => (child.output += d));
  child.stderr.on('data', (d) => (child.output += d));
  child.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, log };
}

function readLog(log) {
  if (!fs.existsSync(log)) return [];
  return fs.readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

async function waitUntil(cond, timeout = 30_000) {
  const deadline = Date.now() + timeout;
  while (!(await cond())) {
    assert.ok(Date.now() < deadline, 'timed out');
    await sleep(20);
  }
}

test('SIGTERM: no claim after it, short jobs acked, the long one released within the grace', async () => {
  const { db, file } = await realDb();
  const q = db.queue('work');
  const short = [];
  for (let i = 0; i < 3; i++) short.push((await q.enqueue({ sleep: 300 })).id);
  const long = (await q.enqueue({ sleep: 60_000 })).id;
  const waiting = (await q.enqueueMany(Array(5).fill({ sleep: 0 }), { priority: -1 })).map((e) => e.id);
  const { child, log } = startApp(file, { APP_CONCURRENCY: '4', APP_GRACE: '2000' });
  try {
    await waitUntil(() => readLog(log).filter((e) => e[0] === 'start').length === 4);
    const t0 = Date.now();
    child.kill('SIGTERM');
    const code = await child.exited;
    const elapsed = Date.now() - t0;
    assert.equal(code, 0, child.output);
    assert.ok(elapsed < 3500, `exited within the grace period (+ slack): ${elapsed} ms`);
  } finally {
    child.kill('SIGKILL');
  }
  const started = new Set(readLog(log).filter((e) => e[0] === 'start').map((e) => e[1]));
  assert.deepEqual([...started].sort(), [...short, long].sort(), 'no claim after the signal');
  for (const id of short) assert.equal(await q.getResult(id), 'by app');
  const info = await q.getJob(long);
  assert.deepEqual([info.state, info.attempts], ['ready', 0], 'released, attempt given back');
  for (const id of waiting) {
    const j = await q.getJob(id);
    assert.deepEqual([j.state, j.attempts], ['ready', 0]);
  }
  assert.deepEqual(readLog(log).filter((e) => e[0] === 'aborted').map((e) => e[1]), [long], 'told to stop');
  assert.match(child.output, new RegExp(`released job ${long}`));
  assert.match(child.output, /shut down/);
  await db.close();
});

test('a SIGSTOPped worker loses its job; its late ack is refused', async () => {
  const { db, file } = await realDb();
  const q = db.queue('work');
  const id = (await q.enqueue({ sleep: 1000 })).id;
  const { child, log } = startApp(file, { APP_CONCURRENCY: '1', APP_LEASE: '500' });
  try {
    await waitUntil(() => readLog(log).some((e) => e[0] === 'start'));
    child.kill('SIGSTOP');
    await sleep(800); // past the lease: renewals cannot run
    const [job] = await q.claimBatch('rescuer', 1);
    assert.equal(job.id, id);
    assert.equal(job.attempts, 2);
    child.kill('SIGCONT');
    // It finishes, or is told to stop first (its lease is gone).
    await waitUntil(() => readLog(log).some((e) => e[0] === 'done' || e[0] === 'aborted'));
    await waitUntil(() => /lease_lost job/.test(child.output));
    await job.ack({ result: 'by rescuer' });
    child.kill('SIGTERM');
    assert.equal(await child.exited, 0, child.output);
  } finally {
    child.kill('SIGKILL');
  }
  assert.equal(await q.getResult(id), 'by rescuer', 'the late ack was refused');
  assert.match(child.output, /lease_lost job/);
  await db.close();
});
