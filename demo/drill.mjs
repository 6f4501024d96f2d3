// The outbox article's drill (Node): a mailer that dies after its external
// call and before its ack. The "mail service" is a stand-in that, like real
// ones (an Idempotency-Key header), sends a message once per key; the mailer
// passes the job's id, which stays the same however often the job runs.
//
//   node demo/drill.mjs DB die    claims one email, sends it, is SIGKILLed before the ack
//   node demo/drill.mjs DB        claims the email again once its lease lapsed, sends, acks
import { open } from 'honker';

const [path, mode] = process.argv.slice(2);
const db = await open(path);
await db.execute(
  'CREATE TABLE IF NOT EXISTS mail_service (idempotency_key TEXT PRIMARY KEY, recipient TEXT NOT NULL)',
);

/** The fake mail service: one message per idempotency key. */
async function send(key, to) {
  const stored = await db.execute('INSERT OR IGNORE INTO mail_service VALUES (?, ?)', [key, to]);
  return stored === 1 ? 'sent' : 'already sent under this key: not sent again';
}

const emails = db.queue('emails');
const [job] = await emails.claimBatch(mode === 'die' ? 'drill-doomed' : 'drill-rescuer', 1, {
  lease: 2000,
  wait: 10_000,
});
if (!job) throw new Error('no email to send');
const outcome = await send(`email-job-${job.id}`, job.payload.to);
console.log(`[drill]     ${job.payload.to} (job ${job.id}, attempt ${job.attempts}): ${outcome}`);
if (mode === 'die') {
  console.log('[drill]     mailer killed after the send, before the ack');
  process.kill(process.pid, 'SIGKILL');
}
await job.ack();
console.log(`[drill]     job ${job.id} acked`);
await db.close();
