// Platform play, step 2 of 3 (scripts/platform-runs.sh): Node claims every
// job Python enqueued on FILE and acks each with a result, but for the one
// whose lease it leaves to SQL (step 3).
import { open } from 'honker';

const db = await open(process.argv[2]);
const emails = db.queue('emails');
const jobs = await emails.claimBatch('node-worker', 10);
if (jobs.length !== 3) throw new Error(`claimed ${jobs.length} jobs, wanted 3`);
const left = [];
for (const job of jobs) {
  if (job.payload.n === 3) left.push(`${job.id} ${job.token}`);
  else await job.ack({ result: { sent: job.payload.to } });
}
await db.close();
console.log(`acked ${jobs.length - 1}, left ${left.join(' ')}`);
