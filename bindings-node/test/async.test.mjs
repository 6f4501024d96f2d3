// for await, AbortSignal, and the event loop: claims wait off the loop, the
// ticker keeps its rhythm while a claim waits and while another process
// holds the write lock. Mirrors bindings-python/tests/test_async.py.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import honker from '../index.js';
import { tempPath } from './helpers.mjs';

function ticker() {
  const t = { worst: 0, ticks: 0 };
  let last = performance.now();
  t.timer = setInterval(() => {
    const now = performance.now();
    t.worst = Math.max(t.worst, now - last);
    t.ticks += 1;
    last = now;
  }, 5);
  return t;
}

test('the seed-shaped worker: for await ... of claim, stopped by an AbortSignal', async () => {
  const db = await honker.open(tempPath());
  const emails = db.queue('emails');
  await emails.enqueue({ to: 'alice@example.com', template: 'order-confirmed' });
  const sent = [];
  const ac = new AbortController();
  for await (const job of emails.claim('mailer-1', { signal: ac.signal })) {
    sent.push(job.payload.to);
    await job.ack();
    ac.abort();
  }
  assert.deepEqual(sent, ['alice@example.com']);
  await db.close();
});

test('the ticker keeps its rhythm while a claim waits', async () => {
  const db = await honker.open(tempPath());
  const q = db.queue('q');
  const t = ticker();
  const ac = new AbortController();
  const got = (async () => {
    for await (const job of q.claim('w', { signal: ac.signal, wait: 5000 })) return job;
  })();
  await new Promise((r) => setTimeout(r, 300)); // the claim waits all this time
  const e = await q.enqueue({ n: 1 });
  const job = await got;
  clearInterval(t.timer);
  assert.equal(job.id, e.id);
  await job.ack();
  assert.ok(t.ticks > 30, `ticks ${t.ticks}`);
  assert.ok(t.worst < 100, `the loop stalled for ${t.worst.toFixed(1)} ms`);
  await db.close();
});

const HOLD_LOCK = `
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
`;

test('the ticker keeps its rhythm while another process holds the write lock', async () => {
  const file = tempPath();
  const db = await honker.open(file);
  const q = db.queue('q');
  await q.enqueue({ n: 1 });
  const holder = spawn('/usr/bin/python3', ['-c', HOLD_LOCK, file, '0.5']);
  // Listened for from the start: the holder may exit before the claim's
  // result reaches this code.
  const exited = new Promise((r) => holder.once('exit', r));
  await new Promise((resolve) => holder.stdout.once('data', resolve)); // "locked"
  const t = ticker();
  const started = performance.now();
  const [job] = await q.claimBatch('w'); // waits for the lock, off the loop
  const waited = performance.now() - started;
  clearInterval(t.timer);
  await exited;
  assert.ok(waited > 200, `the claim should have waited (${waited} ms)`);
  assert.ok(t.worst < 100, `the loop stalled for ${t.worst.toFixed(1)} ms`);
  await job.ack();
  await db.close();
});

test('aborting a waiting claim loses no job', async () => {
  const db = await honker.open(tempPath());
  const q = db.queue('q');
  const ac = new AbortController();
  const loop = (async () => {
    for await (const _ of q.claim('w', { signal: ac.signal, wait: 2000 })) {
      throw new Error('nothing was enqueued yet');
    }
  })();
  await new Promise((r) => setTimeout(r, 100));
  ac.abort();
  await loop; // ends at once, though the native claim still waits
  // This job wakes the abandoned claim; it must come back at once.
  const e = await q.enqueue({ n: 1 });
  await new Promise((r) => setTimeout(r, 300));
  const deadline = Date.now() + 5000;
  let job;
  while (!job) {
    [job] = await q.claimBatch('w2');
    assert.ok(Date.now() < deadline, 'the abandoned claim kept the job');
    if (!job) await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(job.id, e.id);
  assert.equal(job.attempts, 1);
  await db.close();
});

test('breaking out of a batched claim releases what was not handed out', async () => {
  const db = await honker.open(tempPath());
  const q = db.queue('q');
  await q.enqueueMany([0, 1, 2, 3, 4]);
  for await (const job of q.claim('w', { batch: 5 })) {
    await job.ack();
    break;
  }
  const s = await q.stats();
  assert.deepEqual([s.ready, s.running], [4, 0]);
  await db.close();
});

test('a claim stream is a reader: nextWithin claims what is ready, closed and using release the buffer', async () => {
  const db = await honker.open(tempPath());
  const q = db.queue('q');
  await q.enqueueMany([0, 1, 2]);
  const batched = q.claim('w', { batch: 3 });
  const first = await batched.nextWithin(0); // claims the ready jobs without waiting
  assert.equal(first.payload, 0);
  await first.ack();
  assert.equal(batched.closed, false);
  await batched.return(); // as a loop's break, or leaving `await using`
  const s = await q.stats();
  assert.deepEqual([s.ready, s.running], [2, 0], 'the end gave back the two buffered');
  const stream = q.claim('w2');
  await stream.close();
  assert.equal(stream.closed, true);
  assert.equal(await stream.nextWithin(0), null);
  assert.deepEqual(await stream.next(), { done: true, value: undefined });
  const empty = db.queue('empty').claim('w3');
  const started = Date.now();
  assert.equal(await empty.nextWithin(50), null);
  assert.ok(Date.now() - started >= 40);
  await empty.close();
  await db.close();
});
