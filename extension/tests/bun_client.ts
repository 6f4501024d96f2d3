// A Honker client in Bun, written from Honker's published contract (its Bun
// package's calls): bun:sqlite with the extension loaded, the watcher C ABI
// looked up in the same file with bun:ffi, and a worker loop that claims
// with honker_claim_batch, acks with honker_ack_batch and sleeps in
// honker_watcher_wait until the next claim time or a commit.
//
//   bun extension/tests/bun_client.ts DB EXT N
//
// Drains N jobs of queue "bun" (from another process), then prints one JSON
// line: the payloads in claim order and the wait results.
import { Database } from "bun:sqlite";
import { dlopen, FFIType } from "bun:ffi";

const [dbPath, ext, count] = process.argv.slice(2);
const want = Number(count);

const db = new Database(dbPath, { create: true, readwrite: true });
db.exec("PRAGMA busy_timeout = 5000;");
db.loadExtension(ext);
db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
db.exec("SELECT honker_bootstrap()");

const lib = dlopen(`${ext}.so`, {
  honker_watcher_open_v2: {
    args: [FFIType.ptr, FFIType.ptr, FFIType.u64, FFIType.ptr, FFIType.u64],
    returns: FFIType.ptr,
  },
  honker_watcher_wait: { args: [FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
  honker_watcher_close: { args: [FFIType.ptr], returns: FFIType.void },
});
const cstr = (s: string) => Buffer.from(`${s}\0`, "utf8");
const error = Buffer.alloc(1024);
const handle = lib.symbols.honker_watcher_open_v2(cstr(dbPath), cstr(""), 1n, error, BigInt(error.length));
if (!handle) throw new Error(error.toString("utf8").replace(/\0.*$/s, ""));

const claim = db.query<{ v: string }, [string, string, number, number]>(
  "SELECT honker_claim_batch(?, ?, ?, ?) AS v",
);
const ackBatch = db.query<{ v: number }, [string, string]>("SELECT honker_ack_batch(?, ?) AS v");
const nextClaimAt = db.query<{ v: number }, [string]>("SELECT honker_queue_next_claim_at(?) AS v");

const done: unknown[] = [];
const waits: number[] = [];
const deadline = Date.now() + 30_000;
while (done.length < want && Date.now() < deadline) {
  const rows = JSON.parse(claim.get("bun", "bun-worker", 8, 30)!.v) as {
    id: number;
    payload: string;
    attempts: number;
  }[];
  if (rows.length > 0) {
    const acked = ackBatch.get(JSON.stringify(rows.map((r) => r.id)), "bun-worker")!.v;
    if (acked !== rows.length) throw new Error(`acked ${acked} of ${rows.length}`);
    for (const r of rows) done.push(JSON.parse(r.payload));
    continue;
  }
  const next = nextClaimAt.get("bun")!.v;
  const timeout = next === 0 ? 10_000 : Math.max(0, next * 1000 - Date.now());
  waits.push(lib.symbols.honker_watcher_wait(handle, BigInt(Math.ceil(timeout))));
}
lib.symbols.honker_watcher_close(handle);
db.close();
console.log(JSON.stringify({ done, waits }));
