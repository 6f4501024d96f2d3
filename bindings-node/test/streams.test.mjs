// Streams and pub/sub through Node's idioms: { tx }, Buffers, async
// iteration and break, AbortSignal, nextWithin, start positions, TRIMMED,
// other processes, a SIGKILLed consumer and memory over 1,000,000 events.
// The semantic cases every surface shares (the outbox, consumers' own
// places, what a listener hears) are tests-interop's scenarios.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import honker from '../index.js';
import { tempPath, testDb } from './helpers.mjs';

const index = createRequire(import.meta.url).resolve('../index.js');

async function events(db, stream) {
  const rows = await db.query(
    'SELECT "offset" AS o FROM _honker_stream_events WHERE stream = ? ORDER BY 1',
    [stream],
  );
  return rows.map((r) => r.o);
}

// What a publish in the caller's transaction leaves when it commits or rolls
// back (no gap), and consumers' own places: tests-interop's stream_consumer.
test('publish takes { tx }, returns the offset, and is refused inside db.transaction() without it', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  const offset = await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO orders (user_id, status) VALUES (2, 'new')");
    return s.publish({ order: 2 }, { tx, key: 'user-2' });
  });
  assert.equal(offset, 1);
  const [e] = await s.read();
  assert.deepEqual([e.offset, e.key, e.payload], [1, 'user-2', { order: 2 }]);
  assert.ok(e.createdAt instanceof Date);
  // Inside db.transaction() a call without { tx } would wait for itself.
  await assert.rejects(
    db.transaction(() => s.publish('x')),
    (err) => err instanceof honker.InvalidArgument && /pass the transaction/.test(err.message),
  );
});

test('a priority is stored with the event and handed to its readers', async () => {
  const { db } = await testDb();
  const s = db.stream('alerts');
  await s.publish({ n: 1 });
  await s.publish({ n: 2 }, { priority: 9 });
  await s.publish({ n: 3 }, { priority: -1 });
  assert.deepEqual((await s.read()).map((e) => [e.offset, e.priority]), [[1, 0], [2, 9], [3, -1]]);
  const sub = s.subscribe('pager', { wait: 100 });
  const got = [];
  for (let i = 0; i < 3; i++) got.push((await sub.nextWithin(100)).priority);
  await sub.close();
  assert.deepEqual(got, [0, 9, -1]);
  for (const bad of [2 ** 31, 'high', 1.5]) {
    await assert.rejects(s.publish({ n: 4 }, { priority: bad }), /priority must be an integer/);
  }
  assert.equal((await s.info()).length, 3);
});

test('publishMany, read pages, Buffer payloads', async () => {
  const { db } = await testDb();
  const s = db.stream('raw');
  assert.deepEqual(await s.publishMany([Buffer.from([1, 2]), 'two', { three: 3 }]), [1, 2, 3]);
  const page = await s.read({ after: 1, limit: 1 });
  assert.deepEqual(
    page.map((e) => e.payload),
    ['two'],
  );
  const [bytes] = await s.read({ limit: 1 });
  assert.ok(Buffer.isBuffer(bytes.payload));
  assert.deepEqual([...bytes.payload], [1, 2]);
  assert.deepEqual(await s.publishMany([]), []);
  // JSON only crosses packed (newline-joined): strings holding newlines
  // still make one event each.
  const texts = ['a\nb', { t: 'c\r\nd' }, '', [1, '\n']];
  const offsets = await s.publishMany(texts);
  assert.ok(Array.isArray(offsets));
  assert.deepEqual(offsets, [4, 5, 6, 7]);
  assert.deepEqual(
    (await s.read({ after: 3 })).map((e) => e.payload),
    texts,
  );
});

test('each consumer reads every event once, in order, from its own place', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  await s.publishMany([1, 2, 3, 4]);
  const read = async (consumer, n) => {
    const got = [];
    const sub = s.subscribe(consumer, { wait: 50 });
    for await (const e of sub) {
      got.push(e.payload);
      if (got.length === n) break; // break closes and commits what was passed
    }
    return got;
  };
  assert.deepEqual(await read('a', 2), [1, 2]);
  assert.deepEqual(await read('b', 4), [1, 2, 3, 4]);
  // a passed 1 only (2 was handed out, then break): at-least-once, 2 again.
  assert.deepEqual(await read('a', 3), [2, 3, 4]);
  const info = await s.info();
  assert.deepEqual([info.length, info.firstOffset, info.lastOffset], [4, 1, 4]);
  assert.deepEqual(
    info.consumers.map((c) => [c.consumer, c.nextOffset, c.lag]),
    [
      ['a', 4, 1],
      ['b', 4, 1],
    ],
  );
  assert.equal(await s.position('nobody'), null);
});

test('a commit inside the caller\'s transaction rolls back with it', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  await s.publishMany(['a', 'b']);
  const sub = s.subscribe('projector', { autoCommit: false, wait: 50 });
  const first = (await sub.next()).value;
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'projected')");
      await sub.commit(first, { tx });
      throw new Error('projection failed');
    }),
    /projection failed/,
  );
  assert.equal(await s.position('projector'), 1);
  await db.transaction(async (tx) => {
    await tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'projected')");
    await sub.commit(first, { tx });
  });
  assert.equal(await s.position('projector'), 2);
  await sub.close(); // no auto-commit: the place stays where it was committed
  assert.equal(await s.position('projector'), 2);
  assert.equal(sub.closed, true);
  assert.deepEqual(await sub.next(), { done: true, value: undefined });
});

test('auto-commit every N events and at close', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  await s.publishMany([1, 2, 3, 4, 5]);
  const sub = s.subscribe('c', { commitEvery: 2, commitInterval: 3_600_000, wait: 50 });
  for (let i = 0; i < 4; i++) await sub.next();
  assert.equal(await s.position('c'), 3); // two passed, committed
  await sub.close();
  assert.equal(await s.position('c'), 4); // the fourth was handed out, not passed
});

test('start positions; a stored offset wins; past the end and before the first are refused', async () => {
  const { db, clock } = await testDb();
  const s = db.stream('orders');
  await s.publishMany([1, 2]);
  const t = new Date(clock.now() + 1);
  clock.advance(1000);
  await s.publishMany([3, 4]);
  const firstOf = async (consumer, start) => {
    const sub = s.subscribe(consumer, { start, autoCommit: false, wait: 20 });
    const r = await Promise.race([sub.next(), new Promise((res) => setTimeout(res, 100, null))]);
    await sub.close();
    return r && r.value.payload;
  };
  assert.equal(await firstOf('b', 'beginning'), 1);
  assert.equal(await firstOf('o', 3), 3);
  assert.equal(await firstOf('t', t), 3);
  assert.equal(await firstOf('l', 'latest'), null);
  assert.equal(await s.position('l'), 5);
  assert.equal(await firstOf('o', 'beginning'), 3); // its stored place wins
  await s.seek('o', 2);
  assert.equal(await firstOf('o', 'latest'), 2);
  await assert.rejects(s.subscribe('far', { start: 9 }).next(), honker.InvalidArgument);
  assert.equal(await s.position('far'), null);
});

test('a consumer behind age retention gets Trimmed once with the missed count', async () => {
  const { db, clock } = await testDb();
  const s = db.stream('metrics');
  assert.deepEqual(await s.retention(), { maxAge: 7 * 86_400_000, maxCount: null, trimPassed: false });
  await s.setRetention({ maxAge: 60_000 });
  assert.deepEqual(await s.retention(), { maxAge: 60_000, maxCount: null, trimPassed: false });
  await s.publishMany([0, 1, 2, 3, 4]);
  await s.subscribe('slow').close(); // stores its place: offset 1
  clock.advance(120_000);
  await s.publishMany([5, 6]);
  assert.equal(await s.trim(), 5);
  const sub = s.subscribe('slow', { wait: 50 });
  const got = [];
  for (;;) {
    try {
      for await (const e of sub) {
        got.push(e.payload);
        if (e.payload === 6) break;
      }
      break;
    } catch (e) {
      assert.ok(e instanceof honker.Trimmed);
      assert.equal(e.code, 'TRIMMED');
      assert.equal(e.missed, 5);
      got.push(`missed ${e.missed}`);
    }
  }
  assert.deepEqual(got, ['missed 5', 5, 6]);
  // An explicit start below the first retained offset is Trimmed too.
  await assert.rejects(s.subscribe('new', { start: 2 }).next(), honker.Trimmed);
});

test('count retention never removes what a consumer has not passed; trimPassed removes what all passed', async () => {
  const { db } = await testDb();
  const s = db.stream('audit');
  await s.setRetention({ maxAge: null, maxCount: 2 });
  await s.publishMany([1, 2, 3, 4, 5, 6]);
  await s.commit('reader', 3);
  assert.equal((await db.maintain()).streamEvents, 2); // 1 and 2: passed, over count
  assert.deepEqual(await events(db, 'audit'), [3, 4, 5, 6]);
  await s.setRetention({ maxAge: null, trimPassed: true });
  await s.commit('reader', 5);
  assert.equal(await s.trim(), 2);
  assert.deepEqual(await events(db, 'audit'), [5, 6]);
});

test('an AbortSignal ends a waiting iteration at once, and a loop body keeps its event', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  const ac = new AbortController();
  const sub = s.subscribe('c', { wait: 10_000, signal: ac.signal });
  const started = Date.now();
  setTimeout(() => ac.abort(), 100);
  for await (const e of sub) assert.fail(`nothing was published, got ${e}`);
  assert.ok(Date.now() - started < 2000, `abort took ${Date.now() - started} ms`);
  assert.equal(sub.closed, true);
  // An already aborted signal: the iteration ends before it starts.
  const l = db.listen('ch', { signal: AbortSignal.abort() });
  assert.deepEqual(await l.next(), { done: true, value: undefined });
  // Symbol.asyncDispose (what `await using` calls on leaving its block)
  // closes and commits.
  await s.publishMany([1, 2]);
  const u = s.subscribe('d', { wait: 50 });
  await u.next();
  await u.next();
  await u[Symbol.asyncDispose]();
  assert.equal(await s.position('d'), 2);
});

test('nextWithin: one bounded wait for a subscription, a listener and a group member', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  const sub = s.subscribe('poller', { autoCommit: false });
  // Nothing there: null after the wait, not before it.
  let started = Date.now();
  assert.equal(await sub.nextWithin(200), null);
  assert.ok(Date.now() - started >= 150, `returned after ${Date.now() - started} ms`);
  assert.equal(await sub.nextWithin(0), null);
  // A publish during the wait ends it with the event.
  started = Date.now();
  setTimeout(() => s.publish({ n: 1 }), 50);
  const e = await sub.nextWithin(10_000);
  assert.deepEqual([e.offset, e.payload], [1, { n: 1 }]);
  assert.ok(Date.now() - started < 5000, `woke after ${Date.now() - started} ms`);
  // It shares the iterator's place.
  await s.publishMany([2, 3]);
  assert.equal((await sub.nextWithin(0)).payload, 2);
  assert.equal((await sub.next()).value.payload, 3);
  await sub.commit(3);
  await sub.close();
  assert.equal(await sub.nextWithin(10), null); // closed
  assert.equal(await s.position('poller'), 4); // the place after the committed event
  const l = db.listen('ch');
  await db.notify('ch', 'hello');
  assert.equal((await l.nextWithin(5000)).payload, 'hello');
  assert.equal(await l.nextWithin(20), null);
  await l.close();
  const g = s.group('workers');
  await g.create({ start: 'beginning' });
  const member = g.consume('m1');
  const ge = await member.nextWithin(5000);
  assert.equal(ge.offset, 1);
  await ge.ack();
  await member.close();
  for (const bad of [-1, Number.NaN, Infinity, '10', undefined]) {
    await assert.rejects(sub.nextWithin(bad), honker.InvalidArgument);
  }
});

// What is heard, in which order, and what never is (rolled back, before
// listening, another channel): tests-interop's notify_listen.
test('a listener iterates notifications with their seq, and break closes it', async () => {
  const { db } = await testDb();
  const l = db.listen('orders', { wait: 50 });
  assert.equal(l.channel, 'orders');
  await db.notify('orders', 'one');
  await db.transaction(async (tx) => {
    await db.notify('orders', 'two', { tx });
    await db.notify('orders', { n: 3 }, { tx });
  });
  const got = [];
  for await (const n of l) {
    got.push([n.seq, n.payload]);
    if (got.length === 3) break;
  }
  assert.deepEqual(got, [
    [1, 'one'],
    [2, 'two'],
    [3, { n: 3 }],
  ]);
  assert.equal(l.closed, true);
});

test('a listener behind the window gets Trimmed with the count, then the rest', async () => {
  const { db } = await testDb();
  assert.deepEqual(await db.channelRetention('busy'), { maxAge: 3_600_000, maxCount: 100_000 });
  await db.setChannelRetention('busy', { maxAge: 60_000, maxCount: 3 });
  assert.deepEqual(await db.channelRetention('busy'), { maxAge: 60_000, maxCount: 3 });
  const l = db.listen('busy', { wait: 50 });
  for (let i = 0; i < 10; i++) await db.notify('busy', i);
  assert.equal((await db.maintain()).notifications, 7);
  await assert.rejects(l.next(), (e) => e instanceof honker.Trimmed && e.missed === 7);
  const rest = [];
  for await (const n of l) {
    rest.push(n.payload);
    if (rest.length === 3) break;
  }
  assert.deepEqual(rest, [7, 8, 9]);
});

// Another process: a publisher (and notifier) in a child.
const PUBLISHER = `
const honker = require(process.argv[1]);
(async () => {
  const db = await honker.open(process.argv[2]);
  const s = db.stream('orders');
  for (let i = 0; i < Number(process.argv[3]); i++) await s.publish({ n: i });
  await db.notify('done', 'published');
  await db.close();
})();
`;

test('events and notifications from another process wake this one', async () => {
  const file = tempPath();
  const db = await honker.open(file);
  const sub = db.stream('orders').subscribe('here', { wait: 10_000 });
  const l = db.listen('done', { wait: 10_000 });
  const child = spawn(process.execPath, ['-e', PUBLISHER, index, file, '50'], { stdio: 'inherit' });
  // Listened for now: the child may exit before the reads below finish, and
  // a later once() would wait for an exit that already happened.
  const exited = once(child, 'exit');
  const got = [];
  for await (const e of sub) {
    got.push(e.payload.n);
    if (got.length === 50) break;
  }
  assert.deepEqual(
    got,
    Array.from({ length: 50 }, (_, i) => i),
  );
  assert.equal((await l.next()).value.payload, 'published');
  const [code] = await exited;
  assert.equal(code, 0);
  await l.close();
  await db.close();
});

const CONSUMER = `
const honker = require(process.argv[1]);
(async () => {
  const db = await honker.open(process.argv[2]);
  await db.execute('CREATE TABLE IF NOT EXISTS seen ("offset" INTEGER PRIMARY KEY)');
  const sub = db.stream('orders').subscribe('projector', { autoCommit: false });
  for await (const e of sub) {
    await db.transaction(async (tx) => {
      await tx.execute('INSERT INTO seen VALUES (?)', [e.offset]);
      await sub.commit(e, { tx });
    });
    if (e.offset === Number(process.argv[3])) {
      process.stdout.write('ready\\n');
      await new Promise((r) => setTimeout(r, 60_000)); // killed here
    }
  }
})();
`;

async function consumeUntil(file, offset) {
  const child = spawn(process.execPath, ['-e', CONSUMER, index, file, String(offset)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = await once(child.stdout, 'data');
  assert.equal(String(line).trim(), 'ready');
  child.kill('SIGKILL');
  await once(child, 'exit');
}

test('a SIGKILLed consumer resumes at its committed offset', async () => {
  const file = tempPath();
  const db = await honker.open(file);
  const s = db.stream('orders');
  await s.publishMany(Array.from({ length: 20 }, (_, i) => i));
  await consumeUntil(file, 8);
  assert.equal(await s.position('projector'), 9);
  await consumeUntil(file, 20);
  // The primary key on `seen` would have failed on any event processed twice.
  assert.deepEqual(await db.query('SELECT count(*) AS n, min("offset") AS lo, max("offset") AS hi FROM seen'), [
    { n: 20, lo: 1, hi: 20 },
  ]);
  await db.close();
});

const rss = () => {
  const pages = Number(fs.readFileSync('/proc/self/statm', 'utf8').split(' ')[1]);
  return pages * 4096;
};

test('memory stays flat while a consumer reads 1,000,000 events', { skip: !fs.existsSync('/proc/self/statm') }, async () => {
  const file = tempPath();
  const db = await honker.open(file);
  const s = db.stream('firehose');
  for (let start = 0; start < 1_000_000; start += 10_000) {
    await s.publishMany(Array.from({ length: 10_000 }, (_, i) => ({ i: start + i })));
  }
  const sub = s.subscribe('reader', { batch: 500, commitEvery: 10_000 });
  let n = 0;
  let after100k = 0;
  for await (const e of sub) {
    n++;
    if (n === 100_000) {
      globalThis.gc?.();
      after100k = rss();
    }
    if (n === 1_000_000) {
      assert.deepEqual(e.payload, { i: 999_999 });
      break;
    }
  }
  globalThis.gc?.();
  const growth = rss() - after100k;
  assert.equal(await s.position('reader'), 1_000_000); // the last was handed out, not passed
  assert.ok(growth < 32 * 1024 * 1024, `RSS grew ${(growth / 2 ** 20).toFixed(1)} MiB from 100k to 1M`);
  await db.close();
});

test('bad input is a typed error and changes nothing', async () => {
  const { db } = await testDb();
  const s = db.stream('orders');
  await s.publish('kept');
  const before = JSON.stringify([await events(db, 'orders'), await db.query('SELECT * FROM _honker_stream_offsets')]);
  const bad = (fn) => assert.throws(fn, honker.InvalidArgument);
  const badAsync = (p) => assert.rejects(p, honker.InvalidArgument);
  bad(() => db.stream(''));
  bad(() => db.stream(7));
  await badAsync(s.publish(NaN));
  await badAsync(s.publish(new Map()));
  await badAsync(s.publishMany(['ok', () => 1]));
  await badAsync(s.publish('x', { key: 5 }));
  bad(() => s.subscribe('c', { start: 'middle' }));
  bad(() => s.subscribe('c', { start: 1.5 }));
  bad(() => s.subscribe('c', { start: new Date(NaN) }));
  bad(() => s.subscribe('c', { wait: 0 }));
  bad(() => s.subscribe('c', { wait: null }));
  bad(() => s.subscribe('c', { commitInterval: null }));
  bad(() => s.subscribe('c', { autoCommit: 'yes' }));
  bad(() => s.subscribe('c', { signal: {} }));
  await badAsync(s.subscribe('c', { batch: 0 }).next());
  await badAsync(s.subscribe('c', { commitInterval: -1 }).next());
  await badAsync(s.commit('c', -1));
  await badAsync(s.commit('c'));
  await badAsync(s.setRetention({ maxAge: -1 }));
  await badAsync(s.setRetention({}));
  await badAsync(s.setRetention({ maxAge: 60_000, maxCount: 0 }));
  await badAsync(s.read({ limit: -1 }));
  await badAsync(s.read({ after: -1 }));
  const sub = s.subscribe('c2', { autoCommit: false });
  await badAsync(sub.commit('x'));
  await sub.close();
  assert.equal(
    JSON.stringify([await events(db, 'orders'), await db.query('SELECT * FROM _honker_stream_offsets WHERE consumer != ?', ['c2'])]),
    before,
  );
  assert.deepEqual(await s.retention(), { maxAge: 7 * 86_400_000, maxCount: null, trimPassed: false });
  await badAsync(db.notify('ch', 'x'.repeat(64 * 1024 + 1)));
  await badAsync(db.notify('', 'x'));
  bad(() => db.listen(''));
  bad(() => db.listen('ch', { wait: -5 }));
  await badAsync(db.setChannelRetention('ch', { maxAge: 500, maxCount: 10 }));
  await badAsync(db.setChannelRetention('ch', { maxAge: 60_000 }));
});
