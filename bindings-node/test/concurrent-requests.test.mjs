// Transactions belong to their async context, not to the thread (issue 16
// §1): while one request's db.transaction() awaits a slow API call, every
// other request, the in-process worker's acks and plain writes wait their
// turn off the event loop, in order, and none fails.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import honker from '../index.js';
import { tempPath } from './helpers.mjs';

// A 10 ms interval timer: the loop is blocked when it stops ticking.
function ticker() {
  const t = { gaps: [], ticks: 0 };
  let last = performance.now();
  t.timer = setInterval(() => {
    const now = performance.now();
    t.gaps.push(now - last);
    t.ticks += 1;
    last = now;
  }, 10);
  t.stop = () => {
    clearInterval(t.timer);
    const sorted = [...t.gaps].sort((a, b) => a - b);
    return { worst: sorted.at(-1) ?? 0, p99: sorted[Math.floor(sorted.length * 0.99)] ?? 0, ticks: t.ticks };
  };
  return t;
}

function post(port, agent, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ port, agent, method: 'POST', path: '/orders' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, body: text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

// The web app: each POST /orders inserts an order and enqueues its email
// (and, with `stream`, publishes its event and notifies the dashboard) in one
// transaction that awaits the payment API meanwhile.
async function orderServer(db, emails, stream) {
  await db.execute('CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT)');
  const server = http.createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    try {
      const { customer } = JSON.parse(body);
      const id = await db.transaction(async (tx) => {
        await tx.execute('INSERT INTO orders (customer) VALUES (?)', [customer]);
        const [{ id }] = await tx.query('SELECT last_insert_rowid() AS id');
        await sleep(5 + Math.random() * 15); // the payment API
        await emails.enqueue({ order: id }, { tx });
        if (stream) {
          await stream.publish({ order: id }, { tx });
          await db.notify('dashboard', { order: id }, { tx });
        }
        return id;
      });
      res.writeHead(200).end(JSON.stringify({ id }));
    } catch (e) {
      res.writeHead(500).end(`${e.code}: ${e.message}`);
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: server.address().port };
}

// Posts `n` orders, 64 at a time: every one succeeds; returns their ids,
// which are 1..n.
async function placeOrders(port, n) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const responses = await Promise.all(
    Array.from({ length: n }, (_, i) => post(port, agent, { customer: `c${i}` })),
  );
  agent.destroy();
  const failed = responses.filter((r) => r.status !== 200);
  assert.deepEqual(failed, []);
  const ids = responses.map((r) => JSON.parse(r.body).id).sort((a, b) => a - b);
  assert.deepEqual(ids, Array.from({ length: n }, (_, i) => i + 1));
  return ids;
}

test('an HTTP server: 400 requests at 64 concurrent, each a transaction awaiting an API call, and an in-process worker', async () => {
  const REQUESTS = 400;
  const db = await honker.open(tempPath());
  const emails = db.queue('emails');
  const { server, port } = await orderServer(db, emails);

  const handled = [];
  const ac = new AbortController();
  const worker = (async () => {
    for await (const job of emails.claim('mailer', { signal: ac.signal, batch: 8 })) {
      await job.ack();
      handled.push(job.payload.order);
      if (handled.length === REQUESTS) ac.abort();
    }
  })();

  const t = ticker();
  const ids = await placeOrders(port, REQUESTS);
  await worker;
  const lag = t.stop();
  await new Promise((r) => server.close(r));

  assert.deepEqual([...handled].sort((a, b) => a - b), ids);
  const [{ n }] = await db.query('SELECT count(*) AS n FROM orders');
  assert.equal(n, REQUESTS);
  assert.deepEqual(await emails.stats().then((s) => [s.ready, s.running]), [0, 0]);
  assert.ok(lag.worst < 250, `the loop stalled for ${lag.worst.toFixed(1)} ms`);
  console.log(`event-loop lag with 64 concurrent transactions: p99 ${lag.p99.toFixed(1)} ms, worst ${lag.worst.toFixed(1)} ms (10 ms ticker)`);
  await db.close();
});

test('the same server with honker.Worker in its process: every order gets one email, and the loop never stalls', async () => {
  const REQUESTS = 400;
  const db = await honker.open(tempPath());
  await db.execute('CREATE TABLE sent (job_id INTEGER, order_id INTEGER)');
  const emails = db.queue('emails');
  const { server, port } = await orderServer(db, emails);
  const w = new honker.Worker(db, { concurrency: 16 });
  let sent = 0;
  w.handle(
    'emails',
    async (job) => {
      await sleep(Math.random() * 5); // the mail API
      await db.transaction(async (tx) => {
        await tx.execute('INSERT INTO sent VALUES (?, ?)', [job.id, job.payload.order]);
      });
      sent += 1;
      if (sent === REQUESTS) w.stop();
    },
    { concurrency: 8 },
  );
  const t = ticker();
  const running = w.run();
  const ids = await placeOrders(port, REQUESTS);
  await running;
  const lag = t.stop();
  await new Promise((r) => server.close(r));
  const rows = await db.query('SELECT order_id FROM sent ORDER BY order_id');
  assert.deepEqual(rows.map((r) => r.order_id), ids);
  const s = await emails.stats();
  assert.deepEqual([s.ready, s.scheduled, s.running, s.dead], [0, 0, 0, 0]);
  assert.ok(lag.worst < 250, `the loop stalled for ${lag.worst.toFixed(1)} ms`);
  console.log(`event-loop lag with 64 concurrent requests and a Worker: p99 ${lag.p99.toFixed(1)} ms, worst ${lag.worst.toFixed(1)} ms`);
  await db.close();
});

test('the loop keeps ticking while a Worker drains 10,000 jobs', async () => {
  const JOBS = 10_000;
  const db = await honker.open(tempPath());
  const q = db.queue('q');
  for (let start = 0; start < JOBS; start += 1000) {
    await q.enqueueMany(Array.from({ length: 1000 }, (_, i) => ({ i: start + i })));
  }
  const w = new honker.Worker(db, { concurrency: 32 });
  const seen = new Set();
  w.handle('q', async (job) => {
    await null;
    seen.add(job.payload.i);
    if (seen.size === JOBS) w.stop();
  });
  const t = ticker();
  const t0 = performance.now();
  await w.run();
  const took = performance.now() - t0;
  const lag = t.stop();
  assert.equal(seen.size, JOBS);
  const s = await q.stats();
  assert.deepEqual([s.ready, s.running], [0, 0]);
  assert.ok(lag.worst < 250, `the loop stalled for ${lag.worst.toFixed(1)} ms`);
  console.log(`10,000 jobs in ${(took / 1000).toFixed(1)} s; loop lag p99 ${lag.p99.toFixed(1)} ms, worst ${lag.worst.toFixed(1)} ms`);
  await db.close();
});

test('the loop keeps ticking while a transaction holds the writer for 2 s and 100 other contexts wait', async () => {
  const db = await honker.open(tempPath());
  const q = db.queue('q');
  let release;
  const holding = new Promise((r) => (release = r));
  let began;
  const began_ = new Promise((r) => (began = r));
  const tx = db.transaction(async (tx) => {
    await q.enqueue({ n: 'in the transaction' }, { tx });
    began();
    await holding; // awaits while holding the writer
    // The holder's own calls still run while 100 others wait.
    for (let i = 0; i < 20; i++) await tx.query('SELECT 1');
  });
  await began_;
  const t = ticker();
  const waiting = Array.from({ length: 100 }, (_, n) => q.enqueue({ n }));
  await sleep(2000);
  release();
  await tx;
  const done = await Promise.all(waiting);
  const lag = t.stop();
  assert.equal(done.length, 100);
  // In arrival order: ids follow the order of the calls.
  assert.deepEqual(
    done.map((e) => e.id),
    done.map((_, i) => done[0].id + i),
  );
  assert.ok(lag.ticks > 150, `ticks ${lag.ticks}`);
  assert.ok(lag.worst < 250, `the loop stalled for ${lag.worst.toFixed(1)} ms`);
  assert.equal((await q.stats()).ready, 101);
  await db.close();
});

test('a write waits for another context only up to the busy timeout, then fails with Busy', async () => {
  const db = await honker.open(tempPath(), { busyTimeout: 300 });
  const q = db.queue('q');
  let release;
  const holding = new Promise((r) => (release = r));
  let began;
  const began_ = new Promise((r) => (began = r));
  const tx = db.transaction(async () => {
    began();
    await holding;
  });
  await began_;
  const started = performance.now();
  await assert.rejects(q.enqueue({ n: 1 }), (e) => e instanceof honker.Busy && e.code === 'BUSY');
  assert.ok(performance.now() - started >= 250);
  release();
  await tx;
  await q.enqueue({ n: 2 }); // the writer is free again
  assert.equal((await q.stats()).ready, 1);
  await db.close();
});

test('inside a transaction, a write of the same context without { tx } fails at once', async () => {
  const db = await honker.open(tempPath());
  const q = db.queue('q');
  await db.transaction(async (tx) => {
    await assert.rejects(q.enqueue({ n: 1 }), /pass the transaction/);
    await assert.rejects(db.execute('SELECT 1'), /pass the transaction/);
    await assert.rejects(db.transaction(async () => {}), /pass the transaction/);
    await q.enqueue({ n: 2 }, { tx });
  });
  assert.equal((await q.stats()).ready, 1);
  await db.close();
});

test('the server publishes and notifies while a subscription and a listener in its process keep up', async () => {
  // 300 concurrent order transactions each publish an event and notify; an
  // auto-committing subscription and a listener in the same process see
  // every one once, in commit order (dense offsets), and the loop never stalls.
  const n = 300;
  const db = await honker.open(tempPath());
  const orders = db.stream('orders');
  const { server, port } = await orderServer(db, db.queue('emails'), orders);
  const listener = db.listen('dashboard');
  const events = [];
  const heard = [];
  const consuming = (async () => {
    for await (const e of orders.subscribe('projector', { commitEvery: 50 })) {
      events.push([e.offset, e.payload.order]);
      if (events.length === n) break;
    }
  })();
  const listening = (async () => {
    for await (const m of listener) {
      heard.push(m.payload.order);
      if (heard.length === n) break;
    }
  })();
  const t = ticker();
  await placeOrders(port, n);
  await Promise.all([consuming, listening]);
  const { worst } = t.stop();
  server.close();
  assert.deepEqual(
    events.map(([o]) => o),
    Array.from({ length: n }, (_, i) => i + 1),
  );
  assert.deepEqual(
    [...events.map(([, id]) => id)].sort((a, b) => a - b),
    Array.from({ length: n }, (_, i) => i + 1),
  );
  assert.deepEqual(
    heard,
    events.map(([, id]) => id),
  );
  assert.ok(worst < 250, `the loop stalled for ${worst.toFixed(1)} ms`);
  assert.equal(await orders.position('projector'), n); // the last was handed out, then closed
  await db.close();
});

for (const durability of ['normal', 'full']) test(`idle waits past the native pool hold no thread: writes, wake-ups and results go on (${durability})`, () => {
  // 600 consumers, 150 lock waiters, 150 result waiters, 150 rate-limit
  // waiters and 150 subscriptions, each waiting up to 30 s: more than tokio's 512 blocking
  // threads. None holds one while it waits (each sleeps on the runtime),
  // so each commit wakes what it concerns at once. Before, the first 512
  // waits took the pool and the rest (subscriptions, results) sat queued
  // behind them for up to their 30 s. In a child process, so a stall fails
  // the test instead of hanging it. A take that needs no waiting runs on
  // the runtime's own thread, on the blocking pool under 'full'.
  const script = `
    const honker = require(${JSON.stringify(new URL('../index.js', import.meta.url).pathname)});
    const within = (p, what) => Promise.race([
      p, new Promise((_, no) => setTimeout(() => no(new Error(what + ': not within 10 s')), 10_000)),
    ]);
    (async () => {
      const db = await honker.open(process.argv[1], { durability: process.argv[2] });
      const q = db.queue('q');
      const results = db.queue('r');
      const lock = db.lock('l');
      const stream = db.stream('s');
      const held = await lock.tryAcquire('holder', { ttl: 60_000 });
      const owed = await results.enqueueMany(Array.from({ length: 150 }, (_, i) => ({ i })));
      const stop = new AbortController();
      const got = [];
      let gotOne = () => {};
      for (let i = 0; i < 600; i++) {
        (async () => {
          for await (const job of q.claim('w' + i, { wait: 30_000, signal: stop.signal })) {
            await job.ack();
            got.push(job.id);
            gotOne();
          }
        })();
      }
      const lockers = Array.from({ length: 150 }, (_, i) =>
        lock.acquire('o' + i, { ttl: 60_000, wait: 30_000, signal: stop.signal }));
      const waiting = owed.map((e) => results.waitResult(e.id, { timeout: 30_000 }).catch((e) => e));
      const limiter = await db.rateLimiter('rl', { limit: 1, per: 20_000 });
      await limiter.tryAcquire();
      const raters = Array.from({ length: 150 }, () => limiter.acquire('', { wait: 30_000, signal: stop.signal }));
      const heard = Array.from({ length: 150 }, async (_, i) => {
        for await (const ev of stream.subscribe('c' + i, { wait: 30_000, signal: stop.signal })) return ev.payload;
      });
      await new Promise((r) => setTimeout(r, 1000)); // every wait has begun
      for (let n = 0; n < 5; n++) {
        const arrived = new Promise((r) => (gotOne = r));
        const e = await within(q.enqueue({ now: n }), 'enqueue');
        await within(arrived, 'a job reaching a consumer');
        if (got.at(-1) !== e.id) throw new Error('job ' + got.at(-1) + ' for ' + e.id);
      }
      await within(db.query('SELECT 1 AS one'), 'a query');
      await within(stream.publish({ e: 1 }), 'publish');
      const payloads = await within(Promise.all(heard), 'every subscription hearing the event');
      if (!payloads.every((p) => p.e === 1)) throw new Error(JSON.stringify(payloads));
      await lock.release(held.token);
      const grant = await within(Promise.race(lockers), 'a lock waiter taking the lock');
      if (!grant || grant.token <= held.token) throw new Error('grant ' + JSON.stringify(grant));
      const [job] = await results.claimBatch('x', 1);
      await job.ack({ result: { id: job.id } });
      const r = await within(Promise.race(waiting.filter((_, i) => owed[i].id === job.id)), 'the result');
      if (r.id !== job.id) throw new Error('result ' + JSON.stringify(r));
      stop.abort();
      const refused = await within(Promise.all(raters), 'the rate waiters ending at the abort');
      if (refused.some((d) => d.allowed)) throw new Error('a rate waiter got a call');
      console.log('ok');
      process.exit(0);
    })().catch((e) => { console.error(e); process.exit(1); });
  `;
  const out = execFileSync(process.execPath, ['-e', script, tempPath(), durability], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(out.trim().split('\n').pop(), 'ok');
});
