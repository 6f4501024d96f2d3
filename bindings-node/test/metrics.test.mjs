// Queue metrics from Node (ADR 27): what this binding does is counted in the
// file together with another process's (written when it closed; this one's
// own are written before it reads them); the Prometheus text parses.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import honker from '../index.js';
import { testDb } from './helpers.mjs';

test('counts are the file\'s: this process\'s and another\'s', async () => {
  const { db, clock, file } = await testDb();
  const q = db.queue('emails');
  await q.enqueue({ to: 'a' });
  await q.enqueue({ to: 'b' });
  await assert.rejects(
    db.transaction(async (tx) => {
      await q.enqueue({ to: 'rolled back' }, { tx });
      throw new Error('no');
    }),
  );
  clock.advance(200);
  const jobs = await q.claimBatch('w', 2);
  await jobs[0].ack();
  await jobs[1].fail('550');
  // Another process (Python would do as well) enqueues on the same file and
  // exits without closing it: its counts are written at exit.
  execFileSync(process.execPath, [
    '-e',
    `require(${JSON.stringify(new URL('../index.js', import.meta.url).pathname)}).open(process.argv[1])
      .then(async (db) => { await db.queue('emails').enqueue({ to: 'c' }); process.exit(0); })`,
    file,
  ]);
  const m = await q.metrics();
  assert.deepEqual(
    [m.enqueued, m.claimed, m.acked, m.dead, m.retried, m.ready, m.deadLetters],
    [3, 2, 1, 1, 0, 1, 1],
  );
  assert.equal(m.claimLatency.count, 2);
  assert.equal(m.claimLatency.sum, 400);
  assert.deepEqual(m.claimLatency.buckets.at(-1), { le: Infinity, count: 2 });
  assert.deepEqual(m.claimLatency.buckets.find((b) => b.le === 250), { le: 250, count: 2 });
  assert.deepEqual((await db.metrics()).map((x) => x.queue), ['emails']);
  await db.close();
});

test('metricsText is Prometheus text', async () => {
  const { db } = await testDb();
  await db.queue('emails').enqueue({});
  const text = await db.metricsText();
  await db.close();
  assert.ok(text.includes('honker_jobs_total{queue="emails",event="enqueued"} 1\n'));
  for (const line of text.trimEnd().split('\n')) {
    if (line.startsWith('#')) {
      assert.ok(['HELP', 'TYPE'].includes(line.split(' ')[1]), line);
      continue;
    }
    const [series, value] = [line.slice(0, line.lastIndexOf(' ')), line.slice(line.lastIndexOf(' ') + 1)];
    assert.ok(!Number.isNaN(Number(value)), line);
    assert.match(series, /^[a-z_]+\{.*\}$/);
  }
  assert.equal(typeof honker.open, 'function');
});
