// Shared helpers: a fresh file per test, on a clock the test moves.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import honker from '../index.js';

export function tempPath() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'honker-node-'));
  return path.join(dir, 'app.db');
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
