// The Node benchmark: W1–W6 of the core benchmark through the Node binding,
// next to better-sqlite3 (v12) doing the same operations, in the same run.
//
//   node bench/node/run.mjs [--quick | --smoke]
//
// `--smoke` runs tiny counts to check the benchmark works (scripts/test.sh);
// its numbers mean nothing. Ratios are the result; nothing is asserted.
// better-sqlite3 comes from bindings-node's dev dependencies: `npm install`
// in bindings-node, then in bench/node.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const workloads = path.join(here, 'workloads.mjs');
const scales = {
  full: { W1: 10_000, W2: 100, W3: 10_000, W4: 20_000, W5: 20_000, W6: 500, W7: 10_000 },
  quick: { W1: 2_000, W2: 20, W3: 2_000, W4: 6_400, W5: 8_000, W6: 200, W7: 3_000 },
  smoke: { W1: 50, W2: 2, W3: 50, W4: 64, W5: 200, W6: 5, W7: 50 },
};
const mode = process.argv.includes('--smoke') ? 'smoke' : process.argv.includes('--quick') ? 'quick' : 'full';
const scale = scales[mode];
if (mode === 'smoke') process.env.HONKER_BENCH_IDLE_MS = '200';
const libs = ['honker', 'better-sqlite3'];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'honker-bench-node-'));

function run(lib, workload, file, count, onLine) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [workloads, lib, workload, file, String(count)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (onLine && out.includes('ready\n')) {
        onLine();
        onLine = null;
      }
    });
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${lib} ${workload} failed`));
      resolve(JSON.parse(out.trim().split('\n').pop()));
    });
  });
}

function fresh(name) {
  const f = path.join(tmp, `${name}.db`);
  for (const s of ['', '-wal', '-shm']) fs.rmSync(f + s, { force: true });
  return f;
}

async function rate(lib, w) {
  const n = scale[w];
  const file = fresh(`${lib}-${w}`);
  if (w === 'W1' || w === 'W2') {
    const r = await run(lib, w, file, n);
    return r.ops / r.seconds;
  }
  await run(lib, 'fill', file, n);
  if (w === 'W3' || w === 'W4') {
    const r = await run(lib, w, file, n);
    if (r.ops !== n) throw new Error(`${lib} ${w}: ${r.ops} of ${n}`);
    return r.ops / r.seconds;
  }
  const started = performance.now();
  const results = await Promise.all([0, 1, 2, 3].map(() => run(lib, 'drain', file, n)));
  const done = results.reduce((a, r) => a + r.ops, 0);
  if (done !== n) throw new Error(`${lib} W5: ${done} of ${n}`);
  return n / ((performance.now() - started) / 1000);
}

async function latency(lib) {
  const file = fresh(`${lib}-W6`);
  await run(lib, 'fill', file, 0);
  let startProducer;
  const ready = new Promise((r) => (startProducer = r));
  const consumer = run(lib, 'W6', file, scale.W6, () => startProducer());
  await ready;
  await new Promise((r) => setTimeout(r, 200));
  await run(lib, 'W6-producer', file, scale.W6);
  const r = await consumer;
  const lat = r.latenciesMs;
  return {
    p50: lat[Math.floor(lat.length / 2)],
    p99: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))],
    idle: r.idleCpuPercent,
  };
}

const names = {
  W1: 'W1 enqueue, 1 per tx (jobs/s)',
  W2: 'W2 enqueue, 1,000 per tx (jobs/s)',
  W3: 'W3 claim 1 + ack 1 (jobs/s)',
  W4: 'W4 claim 32 + ack 32 (jobs/s)',
  W5: 'W5 4 processes drain (jobs/s)',
};
console.log(`honker Node benchmark (${mode}); Node ${process.version}`);
console.log(`${'workload'.padEnd(34)}${libs.map((l) => l.padStart(16)).join('')}${'ratio'.padStart(9)}`);
for (const [w, label] of Object.entries(names)) {
  const r = {};
  for (const lib of libs) r[lib] = await rate(lib, w);
  const cells = libs.map((l) => `${r[l].toFixed(0)}/s`.padStart(16)).join('');
  console.log(`${label.padEnd(34)}${cells}${`${(r.honker / r['better-sqlite3']).toFixed(2)}x`.padStart(9)}`);
}
for (const lib of libs) {
  const l = await latency(lib);
  const kind = lib === 'honker' ? 'for await' : '1 ms polling';
  console.log(
    `W6 wake latency ${lib.padEnd(15)} ${kind.padEnd(13)} p50 ${l.p50.toFixed(3)} ms, ` +
      `p99 ${l.p99.toFixed(3)} ms, idle CPU ${l.idle.toFixed(2)} %`,
  );
}
// W7: the worker runtime (no-op handler) against the hand-written loop.
async function worker(w) {
  const r = await run('honker', w, fresh(`honker-${w}`), scale.W7);
  return { rate: r.ops / r.seconds, lag: r.lagP99Ms };
}
const hand = await worker('W7-hand');
console.log(`W7 hand loop (for await claim, ack) ${hand.rate.toFixed(0).padStart(8)}/s, loop lag p99 ${hand.lag.toFixed(2)} ms`);
for (const c of [1, 8, 64]) {
  const r = await worker(`W7-${c}`);
  console.log(
    `W7 Worker, concurrency ${String(c).padEnd(3)}         ${r.rate.toFixed(0).padStart(8)}/s, ` +
      `loop lag p99 ${r.lag.toFixed(2)} ms, ${(r.rate / hand.rate).toFixed(2)}x hand loop`,
  );
}
console.log('targets: >= 0.9x the hand loop at concurrency 1, above it at 8');
fs.rmSync(tmp, { recursive: true, force: true });
