// The demo's mailer (Node): claims confirmation emails from the same SQLite
// file the shop writes, "sends" them and acks them. It sleeps until work
// arrives (no polling loop of its own) and stops cleanly on SIGTERM.
import { open } from 'honker';

const db = await open(process.argv[2]);
const emails = db.queue('emails');
const stop = new AbortController();
process.on('SIGTERM', () => stop.abort());
console.log('[mailer]    waiting for emails...');
for await (const job of emails.claim('mailer-1', { signal: stop.signal })) {
  const { to, order } = job.payload;
  const waited = Date.now() - job.runAt.getTime();
  console.log(`[mailer]    sent order-confirmed to ${to} (order ${order}, job ${job.id}, ${waited} ms after commit)`);
  await job.ack();
}
await db.close();
console.log('[mailer]    stopped');
