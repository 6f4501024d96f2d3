// The outbox on better-sqlite3's own connection, with honker's extension
// loaded into it (one SQLite library in this process: better-sqlite3's), and
// a honker worker in another process. Mirrors docs/orm.md's Node recipe.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import honker from '../index.js';
import { tempPath } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
// The extension that ships with the addon (the prebuilt package carries it;
// a checkout's build puts it next to the addon), as users load it.
const EXT = honker.extensionPath;

function appDb(file) {
  const db = new Database(file, { timeout: 10_000 });
  db.pragma('journal_mode = WAL');
  db.loadExtension(EXT);
  db.prepare('SELECT honker_bootstrap()').get();
  db.exec('CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, status TEXT)');
  return db;
}

// The recipe: a better-sqlite3 transaction begun IMMEDIATE, the business row
// and the job in it.
function placeOrder(db, id, { fail = false } = {}) {
  // docs/orm.md's recipe, as written there.
  const enqueue = db.prepare('SELECT honker_queue_enqueue(?, ?) AS id');
  const insert = db.prepare('INSERT INTO orders (id, status) VALUES (?, ?)');
  return db
    .transaction(() => {
      const job = enqueue.get('emails', JSON.stringify({ order: id })).id;
      insert.run(id, 'paid');
      if (fail) throw new Error('payment declined');
      return job;
    })
    .immediate();
}

test('better-sqlite3 with the extension: commit leaves one job, rollback none', () => {
  const file = tempPath();
  const db = appDb(file);
  const id = placeOrder(db, 1);
  assert.throws(() => placeOrder(db, 2, { fail: true }), /payment declined/);
  assert.deepEqual(db.prepare('SELECT id FROM orders').all(), [{ id: 1 }]);
  assert.deepEqual(db.prepare('SELECT id, payload FROM _honker_jobs').all(), [
    { id, payload: '{"order":1}' },
  ]);
  db.close();

  // A honker worker in another process claims and acks it.
  const worker = `
    const honker = require(${JSON.stringify(path.join(here, '..', 'index.js'))});
    (async () => {
      const db = await honker.open(process.argv[1]);
      const [job] = await db.queue('emails').claimBatch('mailer', 10);
      await job.ack();
      await db.close();
      console.log(job.payload.order);
    })();`;
  const out = execFileSync(process.execPath, ['-e', worker, file], { encoding: 'utf8' });
  assert.equal(out.trim(), '1');
  const check = new Database(file);
  assert.equal(check.prepare('SELECT count(*) AS n FROM _honker_jobs').get().n, 0);
  check.close();
});

test('fromSqliteError turns a driver error with a honker code into its class', () => {
  const db = appDb(tempPath());
  let caught;
  try {
    db.prepare(`SELECT honker_queue_enqueue('emails', '{}', '{"max_attempts": 0}')`).get();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof Database.SqliteError, String(caught));
  const e = honker.fromSqliteError(caught);
  assert.ok(e instanceof honker.InvalidArgument);
  assert.equal(e.code, 'INVALID_ARGUMENT');
  assert.equal(e.cause, caught);
  // Anything else comes back unchanged.
  const plain = new Error('UNIQUE constraint failed: orders.id');
  assert.equal(honker.fromSqliteError(plain), plain);
  assert.equal(honker.fromSqliteError('text'), 'text');
  db.close();
});
