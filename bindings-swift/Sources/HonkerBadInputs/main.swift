// Every bad input of the Python suite (bindings-python/tests/test_errors.py)
// that Swift's types can express, plus the durations and dates that used to
// trap, each run in a process of its own by BadInputProcessTests: a trap
// shows there as a crashed process, not as a crashed test suite.
//
//     HonkerBadInputs            lists the cases
//     HonkerBadInputs CASE DIR   runs one in a fresh file under DIR; prints
//                                the error's code and message, and whether
//                                the file changed ("unchanged"/"CHANGED")
//
// Python cases Swift's types rule out at compile time (a string priority,
// a negative UInt32, a 2^70 id, a wrong `tx` type) are not listed.
import Foundation
import Honker

struct Bad: Encodable {
    let k: [Double]
}

typealias Case = @Sendable (Database, Queue, Job, String) async throws -> Void

let cases: [(String, Case)] = [
    // test_bad_arguments_raise_invalid_argument_and_change_nothing
    ("enqueue.delay.negative", { _, q, _, _ in try await q.enqueue("x", delay: -1) }),
    ("enqueue.maxAttempts.zero", { _, q, _, _ in try await q.enqueue("x", maxAttempts: 0) }),
    ("enqueue.delay.and.runAt", { _, q, _, _ in
        try await q.enqueue("x", delay: 1, runAt: Date(timeIntervalSince1970: 1_700_000_100)) }),
    ("enqueue.dedupeKey.empty", { _, q, _, _ in try await q.enqueue("x", dedupeKey: "") }),
    ("enqueue.payload.too.large", { _, q, _, _ in try await q.enqueue(String(repeating: "x", count: 2 << 20)) }),
    ("claimBatch.n.zero", { _, q, _, _ in _ = try await q.claimBatch(workerId: "w", n: 0) }),
    ("claimBatch.workerId.empty", { _, q, _, _ in _ = try await q.claimBatch(workerId: "", n: 1) }),
    ("claimBatch.lease.nan", { _, q, _, _ in _ = try await q.claimBatch(workerId: "w", lease: .nan) }),
    // test_bad_queue_options_and_open_options
    ("open.memory", { _, _, _, _ in _ = try Database(path: ":memory:") }),
    // test_bad_arguments_are_invalid_argument_naming_the_parameter
    ("open.readers.zero", { _, _, _, dir in _ = try Database(path: dir + "/other.db", readers: 0) }),
    ("queue.maxAttempts.zero", { db, _, _, _ in _ = try db.queue("q", maxAttempts: 0) }),
    ("queue.name.empty", { db, _, _, _ in _ = try db.queue("") }),
    ("queue.name.nul", { db, _, _, _ in _ = try db.queue("a\u{0}b") }),
    ("job.id.negative", { _, q, _, _ in _ = try await q.job(-1) }),
    ("enqueue.payload.infinity", { _, q, _, _ in try await q.enqueue(Bad(k: [.infinity])) }),
    // Durations and dates that trapped before they were validated.
    ("open.busyTimeout.infinity", { _, _, _, dir in _ = try Database(path: dir + "/o.db", busyTimeout: .infinity) }),
    ("open.busyTimeout.negative", { _, _, _, dir in _ = try Database(path: dir + "/o.db", busyTimeout: -1) }),
    ("queue.lease.nan", { db, _, _, _ in _ = try db.queue("q", lease: .nan) }),
    ("queue.lease.huge", { db, _, _, _ in _ = try db.queue("q", lease: 1e300) }),
    ("queue.backoffBase.infinity", { db, _, _, _ in _ = try db.queue("q", backoffBase: .infinity) }),
    ("queue.backoffMax.negative", { db, _, _, _ in _ = try db.queue("q", backoffMax: -1) }),
    ("enqueue.delay.infinity", { _, q, _, _ in try await q.enqueue("x", delay: .infinity) }),
    ("enqueue.delay.nan", { _, q, _, _ in try await q.enqueue("x", delay: .nan) }),
    ("enqueue.expires.negative", { _, q, _, _ in try await q.enqueue("x", expires: -5) }),
    ("enqueue.runAt.distant", { _, q, _, _ in
        try await q.enqueue("x", runAt: Date(timeIntervalSince1970: 1e300)) }),
    ("claimBatch.wait.infinity", { _, q, _, _ in _ = try await q.claimBatch(workerId: "w", wait: .infinity) }),
    ("claimBatch.wait.negative", { _, q, _, _ in _ = try await q.claimBatch(workerId: "w", wait: -1) }),
    ("claim.wait.nan", { _, q, _, _ in for try await _ in q.claim(workerId: "w", wait: .nan) { break } }),
    ("claim.lease.infinity", { _, q, _, _ in for try await _ in q.claim(workerId: "w", lease: .infinity) { break } }),
    ("waitResult.timeout.nan", { _, q, _, _ in _ = try await q.waitResult(1, as: String.self, timeout: .nan) }),
    ("purgeDead.olderThan.infinity", { _, q, _, _ in _ = try await q.purgeDead(olderThan: .infinity) }),
    ("job.snooze.infinity", { _, _, j, _ in _ = try await j.snooze(.infinity) }),
    ("job.snooze.negative", { _, _, j, _ in _ = try await j.snooze(-1) }),
    ("job.retry.delay.nan", { _, _, j, _ in _ = try await j.retry(delay: .nan) }),
    ("job.heartbeat.extend.negative.infinity", { _, _, j, _ in _ = try await j.heartbeat(extend: -.infinity) }),
    ("job.keepAlive.every.zero", { _, _, j, _ in _ = try await j.keepAlive(every: 0) { 1 } }),
    ("job.keepAlive.every.infinity", { _, _, j, _ in _ = try await j.keepAlive(every: .infinity) { 1 } }),
    ("worker.concurrency.zero", { db, _, _, _ in _ = try Worker(db, workerId: "w", concurrency: 0) }),
    ("worker.grace.nan", { db, _, _, _ in _ = try Worker(db, workerId: "w", grace: .nan) }),
]

/// Everything honker stores, to tell whether a refused call changed it.
func snapshot(_ db: Database) throws -> [[Row]] {
    try ["_honker_jobs", "_honker_finished", "_honker_results"].map {
        try db.query("SELECT * FROM \($0) ORDER BY 1")
    }
}

@main
struct Main {
    static func main() async {
        let args = CommandLine.arguments
        if args.count == 1 {
            print(cases.map(\.0).joined(separator: "\n"))
            return
        }
        guard args.count == 3, let (_, run) = cases.first(where: { $0.0 == args[1] }) else {
            print("usage: HonkerBadInputs [CASE DIR]")
            exit(2)
        }
        do {
            let db = try Database(path: args[2] + "/bad.db")
            let q = try db.queue("q")
            try await q.enqueue("seed")
            let job = try await q.claimBatch(workerId: "holder")[0]
            let before = try snapshot(db)
            var outcome: String
            do {
                try await run(db, q, job, args[2])
                outcome = "ACCEPTED"
            } catch let e as HonkerError {
                outcome = "\(e)"
            } catch {
                outcome = "NOT A HONKER ERROR: \(error)"
            }
            let after = try snapshot(db)
            print(outcome)
            print(after == before ? "unchanged" : "CHANGED")
        } catch {
            print("SETUP FAILED: \(error)")
            exit(1)
        }
    }
}
