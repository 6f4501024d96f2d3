// The outbox through Node: a transaction that commits with the callback and
// rolls back when it throws. Mirrors bindings-python/tests/test_transaction.py.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import honker from '../index.js';
import { tempPath, testDb } from './helpers.mjs';

test('the order and its email commit together', async () => {
  const { db } = await testDb();
  const emails = db.queue('emails');
  await db.transaction(async (tx) => {
    await tx.execute('INSERT INTO orders (user_id, status) VALUES (?, ?)', [42, 'paid']);
    await emails.enqueue({ to: 'alice@example.com', template: 'order-confirmed' }, { tx });
  });
  assert.deepEqual(await db.query('SELECT user_id, status FROM orders'), [{ user_id: 42, status: 'paid' }]);
  const [job] = await emails.claimBatch('mailer-1');
  assert.equal(job.payload.template, 'order-confirmed');
});

test('a thrown error rolls back the order and its job', async () => {
  const { db } = await testDb();
  const emails = db.queue('emails');
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.execute('INSERT INTO orders (user_id, status) VALUES (1, ?)', ['paid']);
      await emails.enqueue({ to: 'x' }, { tx });
      throw new Error('payment failed');
    }),
    /payment failed/,
  );
  assert.deepEqual(await db.query('SELECT count(*) AS n FROM orders'), [{ n: 0 }]);
  assert.equal((await emails.stats()).ready, 0);
  // The writer is free again: a forgotten commit cannot leave it locked.
  await emails.enqueue('after');
});

test('the job is visible exactly when the row is', async () => {
  const { db, file } = await testDb();
  const other = await honker.open(file);
  const emails = db.queue('emails');
  let release;
  const hold = new Promise((r) => (release = r));
  const committing = db.transaction(async (tx) => {
    await tx.execute('INSERT INTO orders (user_id, status) VALUES (1, ?)', ['paid']);
    await emails.enqueue({ order: 1 }, { tx });
    assert.deepEqual(await tx.query('SELECT count(*) AS n FROM orders'), [{ n: 1 }]);
    await hold;
  });
  await new Promise((r) => setTimeout(r, 20));
  assert.equal((await other.queue('emails').stats()).ready, 0);
  assert.deepEqual(await other.query('SELECT count(*) AS n FROM orders'), [{ n: 0 }]);
  release();
  await committing;
  assert.equal((await other.queue('emails').stats()).ready, 1);
  await other.close();
});

test('ack inside the transaction that records the effect', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  await q.enqueue({ n: 1 });
  const [job] = await q.claimBatch('w');
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'sent')");
      await job.ack({ tx });
      throw new Error('crash before commit');
    }),
  );
  assert.equal((await q.stats()).running, 1);
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'sent')");
    await job.ack({ tx });
  });
  assert.equal((await q.stats()).running, 0);
});

test('a honker call inside the callback without { tx } fails fast', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  const started = Date.now();
  await assert.rejects(
    db.transaction(async () => {
      await q.enqueue('x'); // would wait for the writer the transaction holds
    }),
    honker.InvalidArgument,
  );
  assert.ok(Date.now() - started < 1000);
});

test('parameters and rows', async () => {
  const db = await honker.open(tempPath());
  await db.execute('CREATE TABLE t (a, b, c, d)');
  await db.execute('INSERT INTO t VALUES (?, ?, ?, ?)', [1, 2.5, 'x', Buffer.from('hi')]);
  await db.execute('INSERT INTO t VALUES (?, ?, ?, ?)', [null, true, '', Buffer.alloc(0)]);
  const rows = await db.query('SELECT * FROM t ORDER BY rowid');
  assert.deepEqual(rows[0], { a: 1, b: 2.5, c: 'x', d: Buffer.from('hi') });
  assert.deepEqual(rows[1].a, null);
  assert.equal(rows[1].b, 1);
  await db.close();
});

test('SQLite ending the transaction makes it dead: ROLLED_BACK, nothing autocommits', async () => {
  const { db } = await testDb();
  const emails = db.queue('emails');
  await db.execute("INSERT INTO orders (id, status) VALUES (1, 'before')");
  const seen = [];
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.execute("INSERT INTO orders (id, status) VALUES (2, 'paid')");
      await emails.enqueue({ order: 2 }, { tx });
      for (const call of [
        () => tx.execute("INSERT OR ROLLBACK INTO orders (id, status) VALUES (1, 'dup')"),
        () => tx.execute("INSERT INTO orders (id, status) VALUES (3, 'late')"),
        () => emails.enqueue({ order: 3 }, { tx }),
      ]) {
        await assert.rejects(call(), (e) => {
          seen.push(e.code);
          return e instanceof honker.RolledBack;
        });
      }
      // The callback returns normally: the commit is what fails.
    }),
    (e) => e instanceof honker.RolledBack && e.code === 'ROLLED_BACK',
  );
  assert.deepEqual(seen, ['ROLLED_BACK', 'ROLLED_BACK', 'ROLLED_BACK']);
  assert.deepEqual(await db.query('SELECT id FROM orders'), [{ id: 1 }]);
  assert.equal((await emails.stats()).ready, 0);
  await emails.enqueue('the writer is free');
});

test('transaction control through tx.execute is INVALID_ARGUMENT', async () => {
  const { db } = await testDb();
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO orders (id, status) VALUES (1, 'paid')");
    for (const sql of ['COMMIT', 'ROLLBACK', 'BEGIN', 'END', 'RELEASE nope']) {
      await assert.rejects(tx.execute(sql), (e) => e instanceof honker.InvalidArgument);
    }
  });
  assert.deepEqual(await db.query('SELECT id FROM orders'), [{ id: 1 }]);
});

test('a claim inside a transaction cannot wait', async () => {
  const { db } = await testDb();
  const q = db.queue('q');
  await q.enqueue('x');
  await db.transaction(async (tx) => {
    await assert.rejects(q.claimBatch('w', 1, { tx, wait: 500 }), honker.InvalidArgument);
    assert.equal((await q.claimBatch('w', 1, { tx })).length, 1);
  });
});
