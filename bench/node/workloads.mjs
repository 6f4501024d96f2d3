// One benchmark process: runs one workload of bench/node/run.mjs with one
// library and prints its result as JSON.
//
//   node workloads.mjs LIBRARY WORKLOAD PATH COUNT
//
// LIBRARY is `honker` (this repository's binding) or `better-sqlite3` (the
// same queue operations as plain SQL: WAL, synchronous=NORMAL, BEGIN
// IMMEDIATE, a partial index for ready jobs, claim as UPDATE ... RETURNING,
// ack as DELETE: the baseline).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
// better-sqlite3 is bindings-node's dev dependency (its tests use it too):
// one copy, compiled once from source where npm finds no prebuilt binary
// for it (about a minute here), not once per folder.
const requireFromBinding = createRequire(new URL('../../bindings-node/package.json', import.meta.url));
const WORKER = 'bench-worker';
const payload = (i) => ({ to: `user${i}@example.com`, template: 'order-confirmed' });

class Honker {
  async init(path) {
    const honker = require('honker');
    this.db = await honker.open(path);
    this.q = this.db.queue('bench');
  }
  async enqueueOne(p) {
    await this.q.enqueue(p);
  }
  async enqueueBatch(ps) {
    await this.q.enqueueMany(ps);
  }
  async claimAck(n) {
    const jobs = await this.q.claimBatch(WORKER, n);
    if (n === 1) for (const j of jobs) await j.ack();
    else if (jobs.length) await this.q.ackMany(jobs);
    return jobs.length;
  }
  async consume(count, onJob, signal) {
    for await (const job of this.q.claim(WORKER, { signal })) {
      onJob(job.payload);
      await job.ack();
      if (--count === 0) return;
    }
  }
  // W7: honker's Worker with a no-op handler, until `count` ran.
  async runWorker(concurrency, count) {
    const { Worker } = require('honker');
    const w = new Worker(this.db, { concurrency, workerId: WORKER });
    let done = 0;
    w.handle(this.q, async () => {
      if (++done === count) w.stop();
    });
    await w.run();
    if (done !== count) throw new Error(`${done} of ${count}`);
  }
  // W7's baseline: what users wrote before the worker (claim, run, ack).
  async runHandLoop(count) {
    const noop = async () => {};
    for await (const job of this.q.claim(WORKER)) {
      await noop(job);
      await job.ack();
      if (--count === 0) return;
    }
  }
}

class Better {
  async init(path) {
    let Database;
    try {
      Database = requireFromBinding('better-sqlite3');
    } catch (e) {
      throw new Error(`better-sqlite3 is bindings-node's dev dependency: run npm install in bindings-node (${e.message})`);
    }
    this.db = new Database(path, { timeout: 10_000 });
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS jobs (
        id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL,
        state TEXT NOT NULL, priority INTEGER NOT NULL, run_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, worker TEXT, lease_until INTEGER);
      CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (queue, priority DESC, run_at, id)
        WHERE state = 'ready';`);
    this.insert = this.db.prepare(
      "INSERT INTO jobs (queue, payload, state, priority, run_at) VALUES ('bench', ?, 'ready', 0, ?)",
    );
    this.claim = this.db.prepare(
      "UPDATE jobs SET state = 'running', worker = ?, lease_until = ?, attempts = attempts + 1 " +
        "WHERE id IN (SELECT id FROM jobs WHERE queue = 'bench' AND state = 'ready' AND run_at <= ? " +
        'ORDER BY priority DESC, run_at, id LIMIT ?) RETURNING id, payload',
    );
    this.ack = this.db.prepare('DELETE FROM jobs WHERE id = ? AND worker = ?');
    this.take = this.db.prepare(
      "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE queue = 'bench' AND state = 'ready' " +
        'AND run_at <= ? ORDER BY priority DESC, run_at, id LIMIT 1) RETURNING payload',
    );
    this.many = this.db.transaction((ps) => {
      const now = Date.now();
      for (const p of ps) this.insert.run(JSON.stringify(p), now);
    });
    this.claimTx = this.db.transaction((n) => {
      const now = Date.now();
      return this.claim.all(WORKER, now + 60_000, now, n);
    });
    this.ackTx = this.db.transaction((rows) => {
      for (const r of rows) this.ack.run(r.id, WORKER);
    });
  }
  async enqueueOne(p) {
    this.many.immediate([p]);
  }
  async enqueueBatch(ps) {
    this.many.immediate(ps);
  }
  async claimAck(n) {
    const rows = this.claimTx.immediate(n);
    for (const r of rows) JSON.parse(r.payload);
    if (rows.length) this.ackTx.immediate(rows);
    return rows.length;
  }
  async consume(count, onJob, signal) {
    // No wake-ups in plain SQLite: poll every millisecond.
    while (count > 0 && !signal?.aborted) {
      const row = this.take.get(Date.now());
      if (row) {
        onJob(JSON.parse(row.payload));
        count -= 1;
      } else {
        await new Promise((r) => setTimeout(r, 1));
      }
    }
  }
}

const [library, workload, path, countText] = process.argv.slice(2);
const count = Number(countText);
const lib = library === 'honker' ? new Honker() : new Better();
await lib.init(path);
const out = {};
const timed = async (fn) => {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
};

// Setup for the claim workloads: `count` jobs, 1,000 per transaction.
async function fill() {
  for (let s = 0; s < count; s += 1000) {
    const batch = [];
    for (let i = s; i < Math.min(count, s + 1000); i++) batch.push(payload(i));
    await lib.enqueueBatch(batch);
  }
}

if (workload === 'fill') {
  await fill();
} else if (workload === 'W1') {
  out.seconds = await timed(async () => {
    for (let i = 0; i < count; i++) await lib.enqueueOne(payload(i));
  });
  out.ops = count;
} else if (workload === 'W2') {
  const batch = Array.from({ length: 1000 }, (_, i) => payload(i));
  out.seconds = await timed(async () => {
    for (let i = 0; i < count; i++) await lib.enqueueBatch(batch);
  });
  out.ops = count * 1000;
} else if (['W3', 'W4', 'drain'].includes(workload)) {
  const n = workload === 'W3' ? 1 : 32;
  let done = 0;
  out.seconds = await timed(async () => {
    for (;;) {
      const got = await lib.claimAck(n);
      if (!got) return;
      done += got;
    }
  });
  out.ops = done;
} else if (workload === 'W6') {
  // Idle first: CPU used by a consumer waiting with nothing to do.
  const idleMs = Number(process.env.HONKER_BENCH_IDLE_MS || 3000);
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const ac = new AbortController();
  const idle = lib.consume(1, () => {}, ac.signal);
  await new Promise((r) => setTimeout(r, idleMs));
  ac.abort();
  await idle;
  const cpu = process.cpuUsage(cpu0);
  out.idleCpuPercent = (100 * (cpu.user + cpu.system)) / 1000 / (performance.now() - wall0);
  const latencies = [];
  process.stdout.write('ready\n');
  await lib.consume(count, (p) => latencies.push(performance.timeOrigin + performance.now() - p.t));
  out.latenciesMs = latencies.sort((a, b) => a - b);
} else if (workload.startsWith('W7-')) {
  // The worker runtime with a no-op handler: jobs/s, and how late a 5 ms
  // timer on the event loop fires meanwhile (loop lag).
  await fill();
  const lags = [];
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    lags.push(Math.max(0, now - last - 5));
    last = now;
  }, 5);
  out.seconds = await timed(() =>
    workload === 'W7-hand' ? lib.runHandLoop(count) : lib.runWorker(Number(workload.slice(3)), count),
  );
  clearInterval(ticker);
  out.ops = count;
  lags.sort((a, b) => a - b);
  out.lagP99Ms = lags.length ? lags[Math.min(lags.length - 1, Math.floor(lags.length * 0.99))] : 0;
} else if (workload === 'W6-producer') {
  for (let i = 0; i < count; i++) {
    await lib.enqueueOne({ t: performance.timeOrigin + performance.now(), i });
    await new Promise((r) => setTimeout(r, 5));
  }
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
