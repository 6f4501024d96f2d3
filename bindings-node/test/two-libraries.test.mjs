// honker's SQLite and better-sqlite3's (a second SQLite library, bundled in
// its addon) on one file in one Node process, without the extension: in both
// orders of opening, writers of both lose nothing and the file stays sound,
// and honker's close leaves better-sqlite3's open connection whole (issue 15
// §1, ADR 13: honker locks with open-file-description locks, so the two
// libraries exclude each other as two processes would). Another process
// checks every file.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import honker from '../index.js';
import { tempPath } from './helpers.mjs';

const RUNS = 50;
const ROWS = 1500;
const betterSqlite3 = createRequire(import.meta.url).resolve('better-sqlite3');

function orders(file) {
  const db = new Database(file, { timeout: 30_000 });
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, t INTEGER, n INTEGER)');
  return db;
}

// integrity_check, orders and jobs of each file, read by another process.
function seenByAnotherProcess(files) {
  const script = `
    const Database = require(${JSON.stringify(betterSqlite3)});
    const out = JSON.parse(process.argv[1]).map((f) => {
      const db = new Database(f);
      try {
        return [
          db.pragma('integrity_check', { simple: true }),
          db.prepare('SELECT count(*) AS n FROM orders').get().n,
          db.prepare('SELECT count(*) AS n FROM _honker_jobs').get().n,
        ];
      } catch (e) {
        return [String(e), -1, -1];
      } finally {
        db.close();
      }
    });
    console.log(JSON.stringify(out));`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script, JSON.stringify(files)], { encoding: 'utf8' }));
}

// better-sqlite3 on a worker thread opens a connection, commits rows one by
// one and closes it, three times, while honker enqueues as many jobs from the
// main thread: two SQLite libraries writing one file at the same moment.
const writer = `
  const { parentPort, workerData } = require('node:worker_threads');
  const Database = require(workerData.betterSqlite3);
  parentPort.postMessage('ready');
  for (let t = 0; t < 3; t++) {
    const conn = new Database(workerData.file, { timeout: 30000 });
    const insert = conn.prepare('INSERT INTO orders (t, n) VALUES (?, ?)');
    for (let n = 0; n < workerData.rows / 3; n++) insert.run(t, n);
    conn.close();
  }
  parentPort.postMessage('done');`;

async function concurrentWriters(file, betterSqliteFirst) {
  let holder = betterSqliteFirst ? orders(file) : null;
  const db = await honker.open(file);
  holder ??= orders(file);
  const q = db.queue('work');
  const worker = new Worker(writer, { eval: true, workerData: { betterSqlite3, file, rows: ROWS } });
  const [ready] = await once(worker, 'message');
  assert.equal(ready, 'ready');
  const done = once(worker, 'message');
  for (let n = 0; n < ROWS; n++) await q.enqueue({ n });
  assert.deepEqual(await done, ['done']);
  await db.close();
  holder.close();
}

for (const [name, first] of [
  ['better-sqlite3 opened first', true],
  ['honker opened first', false],
]) {
  test(`${name}: writers of both libraries lose nothing`, async () => {
    const files = [];
    for (let i = 0; i < RUNS; i++) {
      files.push(tempPath());
      await concurrentWriters(files[i], first);
    }
    assert.deepEqual(seenByAnotherProcess(files), Array(RUNS).fill(['ok', ROWS, ROWS]));
  });
}

test("honker's close leaves better-sqlite3's open connection whole", async () => {
  // Another process that commits 3 rows to a file and reports how many rows
  // of better-sqlite3's it sees.
  const helper = spawn(
    process.execPath,
    [
      '-e',
      `const Database = require(${JSON.stringify(betterSqlite3)});
       require('node:readline').createInterface({ input: process.stdin }).on('line', (f) => {
         const db = new Database(f, { timeout: 30_000 });
         for (let n = 0; n < 3; n++) db.prepare('INSERT INTO orders (t, n) VALUES (2, ?)').run(n);
         console.log(db.prepare('SELECT count(*) AS n FROM orders WHERE t = 1').get().n);
         db.close();
       });`,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: helper.stdout })[Symbol.asyncIterator]();
  const files = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      const file = tempPath();
      files.push(file);
      const conn = orders(file);
      conn.prepare('INSERT INTO orders (t, n) VALUES (0, 0)').run();
      const db = await honker.open(file);
      await db.queue('work').enqueue({ i });
      await db.close();
      for (let n = 0; n < 3; n++) conn.prepare('INSERT INTO orders (t, n) VALUES (1, ?)').run(n);
      helper.stdin.write(`${file}\n`);
      assert.equal((await lines.next()).value, '3', 'the other process sees better-sqlite3 commits');
      conn.close();
    }
  } finally {
    helper.stdin.end();
    await once(helper, 'exit');
  }
  assert.deepEqual(seenByAnotherProcess(files), Array(RUNS).fill(['ok', 7, 1]));
});

// Issue 53 §3: a honker transaction held across an await while
// better-sqlite3 writes on the JS thread. better-sqlite3 waits for the write
// lock asleep on the JS thread, so the transaction can never go on: the loop
// froze for better-sqlite3's whole busy timeout, then its write failed. The
// stall watch (src/stall.rs) rolls the transaction back within a few of its
// samples instead: better-sqlite3's write goes through at once, and the
// transaction fails ROLLED_BACK with a message naming the cause. Linux only.
test('a transaction held across an await that freezes better-sqlite3 on the loop is rolled back, not waited out', { skip: process.platform !== 'linux' }, async () => {
  const file = tempPath();
  const conn = orders(file); // busy timeout 30 s: the freeze this avoids
  const db = await honker.open(file);
  try {
    let blocked = null;
    const outcome = db
      .transaction(async (tx) => {
        await db.queue('mail').enqueue({ order: 1 }, { tx });
        await tx.execute('INSERT INTO orders (t, n) VALUES (1, 1)');
        // Another request of this process writes meanwhile, synchronously.
        await new Promise((resolve) => setTimeout(resolve, 10));
        const t0 = performance.now();
        conn.prepare('INSERT INTO orders (t, n) VALUES (2, 2)').run();
        blocked = performance.now() - t0;
        await tx.execute('INSERT INTO orders (t, n) VALUES (1, 2)');
      })
      .then(
        () => null,
        (e) => e,
      );
    const err = await outcome;
    assert.ok(err instanceof honker.RolledBack, `expected RolledBack, got ${err}`);
    assert.match(err.message, /another SQLite library's busy wait/);
    // Rolled back after a few 50 ms samples, not after 30 s (CI machines
    // are slow: a generous bound that the freeze could never meet).
    assert.ok(blocked < 10_000, `better-sqlite3 waited ${blocked} ms`);
    // Nothing of the transaction was committed; better-sqlite3's row was.
    assert.deepEqual(
      conn.prepare('SELECT t, n FROM orders ORDER BY t, n').all().map((r) => [r.t, r.n]),
      [[2, 2]],
    );
    assert.deepEqual(await db.queue('mail').stats().then((s) => s.ready), 0);
    // The database goes on: the next transaction commits.
    await db.transaction(async (tx) => {
      await db.queue('mail').enqueue({ order: 2 }, { tx });
    });
    assert.equal((await db.queue('mail').stats()).ready, 1);
  } finally {
    await db.close();
    conn.close();
  }
});

// The watch rolls back only for a thread asleep in a busy wait: a JS thread
// busy computing while a transaction is open between awaits, for longer
// than the watch's samples, leaves the transaction alone.
test('a transaction held while the loop computes is not rolled back', { skip: process.platform !== 'linux' }, async () => {
  const file = tempPath();
  const db = await honker.open(file);
  try {
    await db.transaction(async (tx) => {
      await db.queue('mail').enqueue({ order: 1 }, { tx });
      const until = performance.now() + 600;
      let spins = 0;
      while (performance.now() < until) spins++;
      assert.ok(spins > 0);
      await new Promise((resolve) => setTimeout(resolve, 300)); // and idle too
      await db.queue('mail').enqueue({ order: 2 }, { tx });
    });
    assert.equal((await db.queue('mail').stats()).ready, 2);
  } finally {
    await db.close();
  }
});
