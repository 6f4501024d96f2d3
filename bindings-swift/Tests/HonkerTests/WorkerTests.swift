// The worker runtime from Swift: concurrency limits, outcomes, timeouts,
// lease renewal and a graceful shutdown by cancelling run's Task. Mirrors
// test_worker.py and worker.test.mjs.
import Foundation
import Honker
import XCTest

/// A counter that records its peak, shared by handlers.
final class Gauge: @unchecked Sendable {
    private let lock = NSLock()
    private var now = 0
    private(set) var peak = 0
    private(set) var total = 0
    private(set) var cancelled = 0

    func enter() {
        lock.lock(); now += 1; total += 1; peak = max(peak, now); lock.unlock()
    }

    func leave() {
        lock.lock(); now -= 1; lock.unlock()
    }

    func sawCancel() {
        lock.lock(); cancelled += 1; lock.unlock()
    }

    var seen: (Int, Int) {
        lock.lock(); defer { lock.unlock() }
        return (total, cancelled)
    }
}

/// Waits until `done` holds (polling), or fails the test after `timeout`.
func eventually(_ timeout: TimeInterval = 10, _ what: String, _ done: () async throws -> Bool) async throws {
    let end = Date().addingTimeInterval(timeout)
    while try await !done() {
        if Date() > end { XCTFail("timed out waiting for \(what)"); return }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
}

/// Whether job `id` was acked (an acked job without a result is gone).
func acked(_ q: Queue, _ id: Int64) async throws -> Bool {
    do {
        return try await q.job(id).state == "done"
    } catch HonkerError.NotFound {
        return true
    }
}

final class WorkerTests: XCTestCase {
    func testConcurrencyLimitIsReachedAndNeverExceeded() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q")
        try await q.enqueueMany(Array(0..<40))
        let gauge = Gauge()
        let worker = try Worker(db, concurrency: 8)
        try worker.handle("q", concurrency: 4) { (_: Job) in
            gauge.enter()
            defer { gauge.leave() }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let run = Task { try await worker.run() }
        try await eventually(20, "40 acks") { try await q.stats().ready + q.stats().running == 0 && gauge.seen.0 == 40 }
        run.cancel()
        try await run.value
        XCTAssertEqual(gauge.peak, 4)
        XCTAssertEqual(gauge.total, 40)
    }

    func testOutcomesResultsAndTheTaskEnvelope() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q")
        let ok = try await q.enqueue(["kind": "ok"])
        let permanent = try await q.enqueue(["kind": "permanent"])
        let retry = try await q.enqueue(["kind": "retry"])
        let snooze = try await q.enqueue(["kind": "snooze"])
        let thrown = try await q.enqueue(["kind": "thrown"])
        let tasks = try db.queue("tasks")
        let add = try await tasks.enqueue(TaskEnvelope(task: "add", args: [2, 3]))
        let unknown = try await tasks.enqueue(TaskEnvelope(task: "nope", args: [1]))
        let floats = try db.queue("floats", backoffBase: 3600)
        let nan = try await floats.enqueue(["x": 1])
        let events = Events()
        let worker = try Worker(db, concurrency: 4)
        for kind in WorkerEvent.Kind.allCases { worker.on(kind) { events.add($0) } }
        try worker.handle("q") { (job: Job) -> String in
            switch try job.payload(as: [String: String].self)["kind"] {
            case "permanent": throw Permanent("invalid address")
            case "retry": throw Retry("429", delay: 3600)
            case "snooze": throw Snooze(3600)
            case "thrown": throw CocoaError(.fileNoSuchFile)
            default: return "sent"
            }
        }
        try worker.handle("tasks", task: "add") { (job: Job) -> Int in
            try job.args(as: [Int].self).reduce(0, +)
        }
        // A result JSON cannot hold: the job runs again, and core says why.
        try worker.handle("floats") { (_: Job) -> Double in .nan }
        XCTAssertThrowsError(try worker.handle("tasks", task: "add") { (_: Job) in }) {
            XCTAssertEqual(($0 as? HonkerError)?.code, "INVALID_ARGUMENT")
        }
        let run = Task { try await worker.run() }
        try await eventually(10, "every outcome") { events.count(where: { $0.kind != .start }) == 8 }
        run.cancel()
        try await run.value

        let okResult = try await q.result(ok.id, as: String.self)
        XCTAssertEqual(okResult, "sent")
        let sum = try await tasks.result(add.id, as: Int.self)
        XCTAssertEqual(sum, 5)
        let dead = try await q.job(permanent.id)
        XCTAssertEqual(dead.state, "dead")
        XCTAssertEqual(dead.lastError, "invalid address")
        let retried = try await q.job(retry.id)
        XCTAssertEqual(retried.state, "scheduled")
        XCTAssertEqual(retried.lastError, "429")
        XCTAssertGreaterThan(retried.runAt.timeIntervalSinceNow, 3000)
        let snoozed = try await q.job(snooze.id)
        XCTAssertEqual(snoozed.state, "scheduled")
        XCTAssertEqual(snoozed.attempts, 0)
        let failed = try await q.job(thrown.id)
        XCTAssertEqual(failed.attempts, 1)
        XCTAssertTrue(failed.lastError?.contains("CocoaError") == true, failed.lastError ?? "nil")
        let orphan = try await tasks.job(unknown.id)
        XCTAssertEqual(orphan.state, "dead")
        XCTAssertEqual(orphan.lastError, "no handler for task nope")
        XCTAssertEqual(events.count(where: { $0.kind == .success }), 2)
        XCTAssertEqual(events.count(where: { $0.kind == .dead }), 2)
        XCTAssertEqual(events.count(where: { $0.kind == .snoozed && $0.state == "scheduled" }), 1)
        let unstorable = try await floats.job(nan.id)
        XCTAssertEqual(unstorable.attempts, 1)
        XCTAssertTrue(unstorable.lastError?.hasPrefix("the handler's result could not be stored: ") == true,
                      unstorable.lastError ?? "nil")
        XCTAssertEqual(events.count(where: { $0.kind == .retry && $0.error == unstorable.lastError }), 1)
        XCTAssertEqual(events.count(where: { $0.kind == .retry }), 3)
    }

    func testATimedOutHandlerIsCancelledAndItsJobRetried() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q", backoffBase: 3600)
        let e = try await q.enqueue("slow")
        let gauge = Gauge()
        let worker = try Worker(db)
        try worker.handle("q", timeout: 0.2) { (_: Job) in
            gauge.enter()
            do {
                try await Task.sleep(nanoseconds: 10_000_000_000)
            } catch {
                gauge.sawCancel()
                throw error
            }
        }
        let started = Date()
        let run = Task { try await worker.run() }
        try await eventually(5, "the handler's cancellation") { gauge.seen.1 == 1 }
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        try await eventually(5, "the free slot") { worker.running == 0 }
        run.cancel()
        try await run.value
        let job = try await q.job(e.id)
        XCTAssertEqual(job.state, "scheduled")
        XCTAssertEqual(job.attempts, 1)
        XCTAssertTrue(job.lastError?.contains("timed out") == true, job.lastError ?? "nil")
    }

    func testAHandlerWhoseJobIsCancelledElsewhereIsCancelledWhenItsRenewalFindsItGone() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q")
        let e = try await q.enqueue("long")
        let gauge = Gauge()
        let worker = try Worker(db)
        try worker.handle("q", lease: 0.3) { (_: Job) in
            gauge.enter()
            do {
                try await Task.sleep(nanoseconds: 30_000_000_000)
            } catch {
                gauge.sawCancel()
                throw error
            }
        }
        let run = Task { try await worker.run() }
        try await eventually(5, "the claim") { gauge.seen.0 == 1 }
        let cancelled = Date()
        let wasLive = try await q.cancel(e.id)
        XCTAssertTrue(wasLive)
        // Renewed every 100 ms: the first renewal after the cancel finds it
        // gone, and core tells the worker, which cancels the handler's Task.
        try await eventually(5, "the handler's cancellation") { gauge.seen.1 == 1 }
        XCTAssertLessThan(Date().timeIntervalSince(cancelled), 5)
        run.cancel()
        try await run.value
    }

    func testAHandlerRunningFiveTimesItsLeaseIsNotDuplicated() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q")
        let e = try await q.enqueue("long")
        let gauge = Gauge()
        let worker = try Worker(db, workerId: "a")
        try worker.handle("q", lease: 0.3) { (_: Job) in
            gauge.enter()
            try await Task.sleep(nanoseconds: 1_500_000_000)
        }
        let run = Task { try await worker.run() }
        try await eventually(5, "the claim") { gauge.seen.0 == 1 }
        // Another worker looks for work for the whole run: the lease is kept.
        let end = Date().addingTimeInterval(1.3)
        while Date() < end {
            let stolen = try await q.claimBatch(workerId: "b", wait: 0.1)
            XCTAssertTrue(stolen.isEmpty, "the job was claimed twice")
        }
        try await eventually(5, "the ack") { try await acked(q, e.id) }
        run.cancel()
        try await run.value
        XCTAssertEqual(gauge.total, 1)
    }

    func testCancellingRunDrainsThenReleasesWhatStillRuns() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q")
        let short = try await q.enqueue("short")
        let long = try await q.enqueue("long")
        let gauge = Gauge()
        let worker = try Worker(db, concurrency: 2, grace: 0.5)
        try worker.handle("q") { (job: Job) in
            gauge.enter()
            if try job.payload(as: String.self) == "short" {
                try await Task.sleep(nanoseconds: 200_000_000)
                return
            }
            do {
                try await Task.sleep(nanoseconds: 30_000_000_000)
            } catch {
                gauge.sawCancel()
                throw error
            }
        }
        let run = Task { try await worker.run() }
        try await eventually(5, "both handlers") { gauge.seen.0 == 2 }
        run.cancel()
        let after = try await q.enqueue("after")
        let stopped = Date()
        try await run.value
        XCTAssertLessThan(Date().timeIntervalSince(stopped), 2, "run outlived its grace")
        let shortAcked = try await acked(q, short.id)
        XCTAssertTrue(shortAcked)
        let l = try await q.job(long.id)
        XCTAssertEqual(l.state, "ready")
        XCTAssertEqual(l.attempts, 0, "a release spends no attempt")
        let a = try await q.job(after.id)
        XCTAssertEqual(a.attempts, 0, "claimed after the shutdown began")
        XCTAssertEqual(gauge.seen.1, 1, "the released handler was not cancelled")
        XCTAssertEqual(gauge.total, 2)
    }

    /// SIGTERM sent by the first handler, the moment the worker has begun:
    /// run's signal sources are registered by then (libdispatch registers
    /// them asynchronously; a signal in between was ignored). Twice, one
    /// worker after another in this process: the second run's sources
    /// must catch SIGTERM too.
    func testSigtermFromTheFirstHandlerStopsEachWorkerInTurn() async throws {
        let db = try Database(path: tempPath())
        for round in 0..<2 {
            let q = try db.queue("q\(round)")
            let first = try await q.enqueue("first \(round)")
            let second = try await q.enqueue("second \(round)")
            let worker = try Worker(db, concurrency: 1, grace: 5)
            try worker.handle("q\(round)") { (job: Job) in
                if try job.payload(as: String.self).hasPrefix("first") {
                    kill(getpid(), SIGTERM)
                    try await Task.sleep(nanoseconds: 100_000_000)
                }
            }
            let run = Task { try await worker.run(signals: true) }
            // A lost SIGTERM leaves run waiting for jobs: stop it, and fail.
            let guardTask = Task {
                try await Task.sleep(nanoseconds: 10_000_000_000)
                if !worker.isStopping {
                    XCTFail("round \(round): SIGTERM did not stop the worker")
                    worker.stop()
                }
            }
            try await run.value
            guardTask.cancel()
            let firstAcked = try await acked(q, first.id)
            XCTAssertTrue(firstAcked, "round \(round): the running handler finished in its grace")
            let s = try await q.job(second.id)
            XCTAssertEqual(s.attempts, 0, "round \(round): claimed after SIGTERM")
        }
    }

    func testAHandlerThatAcksItsJobItselfOnlyFreesItsSlot() async throws {
        let db = try Database(path: tempPath())
        try db.execute("CREATE TABLE sent (job_id INTEGER)")
        let q = try db.queue("q")
        let e = try await q.enqueue("x")
        let events = Events()
        let worker = try Worker(db)
        worker.on(.settled) { events.add($0) }
        try worker.handle("q") { (job: Job) in
            try db.transaction { tx in
                try tx.execute("INSERT INTO sent VALUES (?)", [.integer(value: job.id)])
                try job.ack(tx: tx)
            }
        }
        let run = Task { try await worker.run() }
        try await eventually(5, "the settled event") { events.count(where: { _ in true }) == 1 }
        run.cancel()
        try await run.value
        XCTAssertEqual(try db.query("SELECT count(*) AS n FROM sent")[0]["n"], .integer(value: 1))
        let done = try await acked(q, e.id)
        XCTAssertTrue(done)
    }

    func testBadOptionsAreTypedErrors() throws {
        let db = try Database(path: tempPath())
        XCTAssertThrowsError(try Worker(db, concurrency: 0)) {
            XCTAssertEqual(($0 as? HonkerError)?.code, "INVALID_ARGUMENT")
        }
        XCTAssertThrowsError(try Worker(db, grace: -1)) {
            XCTAssertEqual(($0 as? HonkerError)?.code, "INVALID_ARGUMENT")
        }
        let worker = try Worker(db)
        XCTAssertThrowsError(try worker.handle("q", timeout: .infinity) { (_: Job) in }) {
            XCTAssertEqual(($0 as? HonkerError)?.code, "INVALID_ARGUMENT")
        }
        XCTAssertThrowsError(try worker.handle("q", task: "") { (_: Job) in }) {
            XCTAssertEqual(($0 as? HonkerError)?.code, "INVALID_ARGUMENT")
        }
    }
}

final class Events: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [WorkerEvent] = []

    func add(_ e: WorkerEvent) {
        lock.lock(); list.append(e); lock.unlock()
    }

    func count(where p: (WorkerEvent) -> Bool) -> Int {
        lock.lock(); defer { lock.unlock() }
        return list.filter(p).count
    }
}
