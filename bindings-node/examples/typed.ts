// Uses the whole public API with types; `tsc --noEmit` (scripts/test.sh)
// checks it against index.d.ts. Not run: it only has to type-check.
import honker, {
  type Database,
  type Group,
  type GroupConsumer,
  type GroupDeadLetter,
  type GroupEvent,
  type GroupInfo,
  extensionPath,
  open,
  ManualClock,
  HonkerError,
  LeaseLost,
  InvalidArgument,
  Worker,
  Permanent,
  Retry,
  Snooze,
  Trimmed,
  type ChannelRetention,
  type Listener,
  type Stream,
  type StreamEvent,
  type StreamInfo,
  type StreamRetention,
  type Subscription,
  type ErrorCode,
  type WorkerEvent,
  type Job,
  type JobInfo,
  type QueueMetrics,
  type QueueStats,
  type Enqueued,
  type Fire,
  type ScheduleInfo,
  type Scheduler,
  type SyncReport,
} from 'honker';

export async function everything(path: string): Promise<void> {
  const clock = new ManualClock(Date.now());
  clock.advance(1000);
  const now: number = clock.now();
  const db = await open(path, { durability: 'full', busyTimeout: 5000, readers: 2, clock });
  const emails = db.queue('emails', { lease: 30_000, maxAttempts: 5, backoffBase: 1000, backoffMax: 60_000, backoffJitter: 0.2 });
  const name: string = emails.name;

  const order = await db.transaction(async (tx) => {
    await tx.execute('INSERT INTO orders (user_id, status) VALUES (?, ?)', [42, 'paid']);
    const rows = await tx.query('SELECT id FROM orders WHERE user_id = ?', [42]);
    const e: Enqueued = await emails.enqueue({ to: 'alice@example.com' }, { tx, priority: 1, dedupeKey: 'o-42' });
    await emails.enqueueMany([{ a: 1 }, Buffer.from('raw')], { tx, delay: 100, expires: 60_000 });
    return { rows, e };
  });
  await emails.enqueue('later', { runAt: new Date(now + 5000), maxAttempts: 2 });

  const batch: Job[] = await emails.claimBatch('mailer-1', 10, { lease: 10_000, wait: 50 });
  for (const job of batch) {
    const payload: unknown = job.payload;
    const when: Date = job.leaseExpiresAt;
    void [payload, when, job.attempts, job.maxAttempts, job.priority, job.workerId, job.token, job.runAt, job.createdAt, job.queue];
    await job.keepAlive(async () => 1, { every: 1000 });
    await job.heartbeat({ extend: 5000 });
    const state: 'ready' | 'scheduled' | 'dead' = await job.retry({ delay: 10, error: 'later' });
    void state;
  }
  const ac = new AbortController();
  for await (const job of emails.claim('mailer-2', { signal: ac.signal, batch: 4, lease: 5000, wait: 1000 })) {
    await db.transaction(async (tx) => {
      await tx.execute('UPDATE orders SET status = ? WHERE id = ?', ['sent', 1]);
      await job.ack({ tx, result: { sent: true } });
    });
    ac.abort();
  }
  const [j] = await emails.claimBatch('w');
  if (j) {
    await j.snooze(1000);
    await j.release();
    await j.fail('bad');
  }
  await emails.ackMany(batch);
  const cancelled: boolean = await emails.cancel(order.e.id, { reason: 'dup' });
  const info: JobInfo = await emails.getJob(order.e.id);
  const stats: QueueStats = await emails.stats();
  const counted: QueueMetrics = await emails.metrics();
  const p99ish: number = counted.claimLatency.buckets[0].le + counted.acked + counted.deadLetters;
  const exposition: string = await db.metricsText();
  const everyQueue: QueueMetrics[] = await db.metrics();
  void [p99ish, exposition, everyQueue];
  const dead: JobInfo[] = await emails.deadLetters({ afterId: 0, limit: 10 });
  const requeued: boolean = await emails.requeueDead(info.id);
  const all: number = await emails.requeueAllDead();
  const purged: number = await emails.purgeDead({ olderThan: 1000 });
  const result = await emails.getResult(info.id);
  const waited = await emails.waitResult(info.id, { timeout: 10 });
  const changed: number = await db.execute('DELETE FROM orders');
  const rows = await db.query('SELECT * FROM orders');
  const report = await db.maintain();
  void [name, order, cancelled, stats, dead, requeued, all, purged, result, waited, changed, rows, report, db.path];
  try {
    await j?.ack();
  } catch (e) {
    if (e instanceof LeaseLost || e instanceof InvalidArgument) {
      const code: ErrorCode = e.code;
      void code;
    } else if (e instanceof HonkerError) {
      void e.detail;
    }
  }
  const fromDriver = honker.fromSqliteError(new Error('LEASE_LOST: job 1'));
  if (fromDriver instanceof HonkerError) {
    const code: ErrorCode = fromDriver.code;
    void code;
  }
  const codes: ErrorCode[] = honker.ERROR_CODES;
  const ext: string = extensionPath;

  const worker = new Worker(db, { concurrency: 8, workerId: 'w-1', grace: 10_000 });
  worker
    .handle(emails, async (job: Job, signal: AbortSignal) => {
      if (signal.aborted) throw new Snooze(1000);
      if (job.attempts > 3) throw new Permanent('no such address');
      if (job.payload === null) throw new Retry('not yet', { delay: 500 });
      return { sent: true };
    }, { concurrency: 4, timeout: 30_000, lease: 60_000 })
    .handle('tasks', (job) => job.payload, { task: 'resize' })
    .on('dead', (e: WorkerEvent) => console.log(e.jobId, e.error, e.ms, e.state))
    .on('error', (e) => console.error(e.error, e.jobId));
  const running: string[] = worker.queues;
  worker.grace = 5000;
  const stopper = new AbortController();
  const done: Promise<void> = worker.run({ signal: stopper.signal, signals: true });
  if (!worker.stopping) worker.stop();
  await done;
  void running;
  void [codes, honker.version, honker.ERROR_CLASSES.LEASE_LOST, ext];

  // Streams and pub/sub.
  const orders: Stream = db.stream('orders');
  const offset: number = await db.transaction(async (tx) =>
    orders.publish({ id: 1 }, { tx, key: 'user-1', idempotencyKey: 'order-1' }),
  );
  const offsets: number[] = await orders.publishMany([1, 2], { key: 'k' });
  const page: StreamEvent[] = await orders.read({ after: 0, limit: 10 });
  const next: number = await orders.commit('audit', 2);
  await orders.seek('audit', 1);
  const pos: number | null = await orders.position('audit');
  const sinfo: StreamInfo = await orders.info();
  const lag: number = sinfo.consumers[0]?.lag ?? 0;
  await orders.setRetention({ maxAge: null, maxCount: 1000, trimPassed: true });
  const kept: StreamRetention = await orders.retention();
  const trimmed: number = await orders.trim();
  const sub: Subscription = orders.subscribe('projector', {
    start: new Date(0),
    batch: 100,
    autoCommit: false,
    commitEvery: 500,
    commitInterval: 2000,
    wait: 1000,
    signal: stopper.signal,
  });
  try {
    for await (const event of sub) {
      const at: Date = event.createdAt;
      const key: string | null = event.key;
      await db.transaction(async (tx) => sub.commit(event, { tx }));
      void [at, key, event.offset, event.payload];
    }
  } catch (e) {
    if (e instanceof Trimmed) {
      const missed: number = e.missed;
      void missed;
    }
  } finally {
    await sub.close();
  }
  const id: number = await db.notify('ui', { changed: offset });
  const listener: Listener = db.listen('ui', { signal: stopper.signal });
  for await (const n of listener) {
    const seq: number = n.seq;
    void [seq, n.id, n.payload, n.createdAt, listener.channel, listener.closed];
    break;
  }
  await db.setChannelRetention('ui', { maxAge: 60_000, maxCount: 100 });
  const window: ChannelRetention = await db.channelRetention('ui');
  void [offsets, page, next, pos, lag, kept, trimmed, id, window, sub.consumer];

  // Consumer groups.
  const billing: Group = orders.group('billing');
  const from: number = await billing.create({ start: 'beginning', maxDeliveries: 3, lease: 30_000, memberIdle: 3_600_000 });
  const claimed = await billing.claim('member-1', { n: 2, lease: 10_000, wait: 0 });
  const missedNow: number = claimed.missed;
  for (const e of claimed) {
    const ge: GroupEvent = e;
    const deliveries: number = ge.deliveries;
    const end: Date = await ge.heartbeat({ extend: 5_000 });
    const died: boolean = await ge.retry({ delay: 0, error: 'flaky' });
    void [deliveries, end, died, ge.token, ge.leaseExpiresAt];
  }
  await billing.ackMany([{ offset: 1, token: 't' }]).catch(() => {});
  const member: GroupConsumer = billing.consume('member-1', { batch: 5, wait: 1000, signal: stopper.signal });
  for await (const e of member) {
    await db.transaction(async (tx) => e.ack({ tx }));
    break;
  }
  await member.close();
  const ginfo: GroupInfo = await billing.info();
  const deadLetters: GroupDeadLetter[] = await billing.dead({ after: 0, limit: 10 });
  const freed: number = await billing.removeMember('member-1', { force: true });
  const redriven: number = await billing.redriveAll();
  void [from, missedNow, ginfo.options.maxDeliveries, ginfo.oldestPendingAge, deadLetters, freed, redriven, sinfo.groups];
  const scheduler: Scheduler = db.scheduler();
  const added: boolean = await scheduler.add('nightly', '30 2 * * *', 'reports', { kind: 'nightly' }, {
    timeZone: 'Europe/Berlin',
    catchUp: 'all',
    catchUpWindow: 3_600_000,
    overlap: 'buffer_one',
    startAt: new Date(),
  });
  await scheduler.update('nightly', { maxAttempts: null, priority: 2 });
  const synced: SyncReport = await scheduler.sync([{ name: 'nightly', schedule: '30 2 * * *', queue: 'reports' }]);
  const schedules: ScheduleInfo[] = await scheduler.list();
  const nextFire: Date | null = schedules[0].nextFireAt;
  const upcoming: Date[] = await scheduler.nextFires('nightly', 3);
  const fired: Fire[] = await scheduler.tick();
  await scheduler.run({ signal: AbortSignal.timeout(10) });
  void [added, synced.removed, nextFire, upcoming, fired.map((f) => f.jobId)];
  await db.close();
}

// Typed payloads: a queue, stream or channel named with its payload's type
// checks what is sent and types what is read (no casts); the default is the
// decoded JSON (`unknown`). Each @ts-expect-error line must stay an error.
interface Email {
  to: string;
  subject?: string;
}
interface Receipt {
  messageId: string;
}
interface OrderPlaced {
  orderId: number;
  total: number;
}

export async function typedPayloads(db: Database): Promise<void> {
  const emails = db.queue<Email, Receipt>('emails');
  await emails.enqueue({ to: 'alice@example.com', subject: 'hi' });
  await emails.enqueueMany([{ to: 'bob@example.com' }]);
  // @ts-expect-error a payload of another shape
  await emails.enqueue({ recipient: 'alice@example.com' });
  for await (const job of emails.claim('mailer')) {
    const to: string = job.payload.to;
    // @ts-expect-error not a field of Email
    void job.payload.body;
    await job.ack({ result: { messageId: `<${to}>` } });
    // @ts-expect-error a result of another shape
    await job.ack({ result: { id: 1 } });
    break;
  }
  const stream = emails.claim('mailer', { wait: 1000 });
  const within = await stream.nextWithin(0);
  if (within) void within.payload.to;
  await stream.close();
  const [first] = await emails.claimBatch('mailer', 1);
  if (first) void first.payload.subject?.toUpperCase();
  const receipt = await emails.waitResult(1, { timeout: 10 });
  if (receipt) void receipt.messageId.length;
  const info = await emails.getJob(1);
  void info.payload.to;
  const dead = await emails.deadLetters();
  void dead.map((j) => j.payload.to);

  const worker = new Worker(db);
  worker.handle(emails, async (job) => {
    void job.payload.to.toLowerCase();
    return { messageId: 'm' };
  });

  const orders = db.stream<OrderPlaced>('orders');
  await orders.publish({ orderId: 1, total: 9.5 });
  // @ts-expect-error total must be a number
  await orders.publish({ orderId: 1, total: '9.5' });
  const events = await orders.read();
  void events.map((e) => e.payload.total.toFixed(2));
  for await (const e of orders.subscribe('audit')) {
    const id: number = e.payload.orderId;
    void id;
    break;
  }
  const billing = orders.group('billing');
  for await (const e of billing.consume('m1')) {
    const total: number = e.payload.total;
    await billing.ack(e);
    void total;
    break;
  }
  worker.handle(billing, async (e) => void e.payload.orderId);

  await db.notify<{ changed: number }>('ui', { changed: 1 });
  for await (const n of db.listen<{ changed: number }>('ui')) {
    const changed: number = n.payload.changed;
    void changed;
    break;
  }
  // Untyped handles read the decoded JSON as unknown: a read must narrow it.
  for await (const job of db.queue('any').claim('w')) {
    // @ts-expect-error unknown until narrowed
    void job.payload.to;
    break;
  }
}
