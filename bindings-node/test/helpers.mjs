// Shared helpers: a fresh file per test, on a clock the test moves.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import honker from '../index.js';

// Every directory tempDir made, removed when the test file's process exits
// (node --test runs each file in a process of its own).
const made = [];
process.on('exit', () => {
  for (const dir of made) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory under the system's temp dir, gone when the process exits. */
export function tempDir(prefix = 'honker-node-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export function tempPath() {
  return path.join(tempDir(), 'app.db');
}

export async function testDb() {
  const clock = new honker.ManualClock(1_700_000_000_000);
  const file = tempPath();
  const db = await honker.open(file, { clock });
  await db.execute('CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, status TEXT)');
  return { db, clock, file };
}

/** Everything honker stores, to prove a failed call changed nothing. */
export async function snapshot(db) {
  const out = [];
  for (const t of ['_honker_jobs', '_honker_finished', '_honker_results']) {
    out.push(await db.query(`SELECT * FROM ${t} ORDER BY 1`));
  }
  return JSON.stringify(out);
}

/** Stops `worker` once `cond()` holds (checked every 10 ms). */
export function stopWhen(worker, cond) {
  const deadline = Date.now() + 60_000;
  const t = setInterval(async () => {
    if ((await cond()) || Date.now() > deadline) {
      clearInterval(t);
      worker.stop();
    }
  }, 10);
}
