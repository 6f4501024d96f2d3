// The queue through Swift: the seed's reference behaviours (lease lapse ->
// reclaim -> dead letter), scheduling, dedupe, results, dead letters.
// Mirrors bindings-python/tests/test_queue.py.
import Foundation
import Honker
import XCTest

final class QueueTests: XCTestCase {
    func testEnqueueClaimAck() async throws {
        let t = try testDb()
        let q = try t.db.queue("emails")
        let e = try await q.enqueue(Email(to: "alice@example.com", template: "order-confirmed"))
        XCTAssertFalse(e.existing)
        let jobs = try await q.claimBatch(workerId: "mailer-1", n: 32)
        XCTAssertEqual(jobs.map { $0.id }, [e.id])
        XCTAssertEqual(try jobs[0].payload(as: Email.self).to, "alice@example.com")
        XCTAssertEqual(jobs[0].attempts, 1)
        try await jobs[0].ack()
        let stats = try await q.stats()
        XCTAssertEqual(stats.ready, 0)
    }

    // Priority, then age, across surfaces: tests-interop's claim_order.
    func testADelayInSecondsWaitsOnTheTestClock() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        try await q.enqueue("later", delay: 5)
        try await q.enqueue("now")
        var got = try await q.claimBatch(workerId: "w", n: 10).map { try $0.payload(as: String.self) }
        XCTAssertEqual(got, ["now"])
        try t.clock.advance(ms: 5_000)
        got = try await q.claimBatch(workerId: "w", n: 10).map { try $0.payload(as: String.self) }
        XCTAssertEqual(got, ["later"])
    }

    // Cancelling a held job: tests-interop's cancel_fences, every surface.
    func testReleaseAndHeartbeatOnTheTestClock() async throws {
        let t = try testDb()
        let q = try t.db.queue("q", lease: 10)
        try await q.enqueue("x")
        var job = try await q.claimBatch(workerId: "w")[0]
        try await job.release()
        job = try await q.claimBatch(workerId: "w")[0]
        XCTAssertEqual(job.attempts, 1)
        try t.clock.advance(ms: 8_000)
        let before = job.leaseExpiresAt
        let after = try await job.heartbeat()
        XCTAssertGreaterThan(after, before)
        try t.clock.advance(ms: 8_000)
        let none = try await q.claimBatch(workerId: "other")
        XCTAssertTrue(none.isEmpty) // still held
        try await job.ack()
    }

    func testResultsAndBytes() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        let e = try await q.enqueue(Data([0, 255, 7]))
        let job = try await q.claimBatch(workerId: "w")[0]
        XCTAssertEqual(try job.payload(as: Data.self), Data([0, 255, 7]))
        try await job.ack(result: ["sent": true])
        let result = try await q.waitResult(e.id, as: [String: Bool].self, timeout: 1)
        XCTAssertEqual(result, ["sent": true])
    }

    // Requeueing and purging dead letters: tests-interop's dead_letter.
    func testAckManyTakesTheClaimedJobs() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        try await q.enqueueMany(["a", "b", "c"])
        let acked = try await q.ackMany(try await q.claimBatch(workerId: "w", n: 3))
        XCTAssertEqual(acked, 3)
    }

    func testAJobRecordCarriesEveryFieldAndMaintainPrunesPastRetention() async throws {
        let t = try testDb()
        let q = try t.db.queue("q", maxAttempts: 1)
        let e = try await q.enqueue("a", priority: 7, dedupeKey: "k", expires: 3600)
        let record = try await q.job(e.id)
        XCTAssertEqual(record.priority, 7)
        XCTAssertEqual(record.dedupeKey, "k")
        XCTAssertEqual(record.expiresAt, record.createdAt.addingTimeInterval(3600))
        XCTAssertNil(record.leaseExpiresAt)
        let job = try await q.claimBatch(workerId: "w")[0]
        let running = try await q.job(e.id)
        XCTAssertEqual(running.leaseExpiresAt, job.leaseExpiresAt)
        try await job.fail("bad")
        let kept = try await t.db.maintain()
        XCTAssertEqual(kept.dead, 0)
        try t.clock.advance(ms: 8 * 86_400_000) // past the 7 days dead letters are kept
        let report = try await t.db.maintain()
        XCTAssertEqual(report.dead, 1)
        let stats = try await q.stats()
        XCTAssertEqual(stats.dead, 0)
    }

    func testKeepAliveRenewsTheLease() async throws {
        let t = try testDb()
        let q = try t.db.queue("q", lease: 30)
        try await q.enqueue("x")
        let job = try await q.claimBatch(workerId: "w")[0]
        let first = job.leaseExpiresAt
        try await job.keepAlive(every: 0.01) {
            for _ in 0..<3 {
                try t.clock.advance(ms: 20_000)
                let seen = job.leaseExpiresAt
                while job.leaseExpiresAt == seen { try await Task.sleep(nanoseconds: 2_000_000) }
            }
        }
        XCTAssertEqual(job.leaseExpiresAt.timeIntervalSince(first), 60, accuracy: 0.001)
        let none = try await q.claimBatch(workerId: "other")
        XCTAssertTrue(none.isEmpty)
    }

    func testKeepAliveStopsAndReportsWhenTheLeaseIsLost() async throws {
        let t = try testDb()
        let q = try t.db.queue("q", lease: 30)
        let e = try await q.enqueue("x")
        let job = try await q.claimBatch(workerId: "w")[0]
        do {
            try await job.keepAlive(every: 0.01) {
                let cancelled = try await q.cancel(e.id, reason: "operator")
                XCTAssertTrue(cancelled)
                try await Task.sleep(nanoseconds: 100_000_000)
            }
            XCTFail("keepAlive did not report the lost lease")
        } catch HonkerError.LeaseLost {
            // reported: the work's outcome cannot be recorded
        }
    }

    func testAJobIsRebuiltFromItsLease() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        let e = try await q.enqueue("x")
        let claimed = try await q.claimBatch(workerId: "w")[0]
        let job = try await q.job(id: claimed.id, token: claimed.token)
        XCTAssertEqual(job.id, e.id)
        XCTAssertEqual(job.workerId, "w")
        XCTAssertEqual(try job.payload(as: String.self), "x")
        XCTAssertEqual(job.leaseExpiresAt, claimed.leaseExpiresAt)
        try await job.ack()
        do {
            _ = try await q.job(id: claimed.id, token: claimed.token)
            XCTFail("rebuilt a finished job")
        } catch HonkerError.LeaseLost {
            // acked and removed: what ack with this lease would say
        }
        do {
            _ = try await q.job(id: 10_000, token: "t")
            XCTFail("rebuilt a job that never existed")
        } catch HonkerError.NotFound {
            // never existed
        }
        let stale = try await q.enqueue("y")
        do {
            _ = try await q.job(id: stale.id, token: "not-the-token")
            XCTFail("rebuilt a job nobody holds")
        } catch HonkerError.LeaseLost {
            // ready, not leased
        }
    }

    func testOpenOptionsReachCoreInsteadOfFixedValues() async throws {
        // maxPayloadBytes and readers used to be fixed at 1 MiB and 4.
        let db = try Database(path: tempPath(), readers: 2, maxPayloadBytes: 16)
        let q = try db.queue("q")
        try await q.enqueue("short")
        do {
            try await q.enqueue(String(repeating: "x", count: 64))
            XCTFail("a payload over maxPayloadBytes was accepted")
        } catch HonkerError.InvalidArgument {
            // over the limit given here
        }
        do {
            _ = try Database(path: tempPath(), readers: 0)
            XCTFail("readers: 0 was accepted")
        } catch HonkerError.InvalidArgument {
            // out of range, checked by core
        }
    }

    /// A queue's stored settings as Swift reads and writes them. That every
    /// surface's handle made afterwards claims with them (issue 53 §4) is
    /// the queue_settings interop scenario.
    func testAQueuesSettingsAreStoredReadBackAndRefusedWhenBad() async throws {
        let db = try Database(path: tempPath())
        try await db.queue("emails").configure(lease: 5, maxAttempts: 7)
        let stored = try await db.queue("emails").settings()
        XCTAssertEqual(stored.leaseMs, 5000)
        XCTAssertEqual(stored.maxAttempts, 7)
        XCTAssertNil(stored.backoffBaseMs)
        do {
            _ = try db.queue("emails", lease: -1)
            XCTFail("a negative lease was taken")
        } catch let e as HonkerError {
            XCTAssertEqual(e.code, "INVALID_ARGUMENT")
        }
        do {
            try await db.queue("emails").configure(lease: 0)
            XCTFail("a zero lease was stored")
        } catch let e as HonkerError {
            XCTAssertEqual(e.code, "INVALID_ARGUMENT")
        }
        try await db.queue("emails").clearSettings()
        let cleared = try await db.queue("emails").settings()
        XCTAssertNil(cleared.leaseMs)
    }

    /// Pause and resume as Swift calls them; what a pause does on every
    /// surface is the pause interop scenario. A claim sequence sleeps
    /// through the pause and the enqueue, and wakes on the resume's commit
    /// from another open of the file.
    func testConcurrencyCapsAsSwiftPassesThem() async throws {
        // What the caps do across processes and languages is the caps interop scenario.
        let path = tempPath()
        let db = try Database(path: path)
        let other = try Database(path: path)
        let q = try db.queue("q")
        for key in ["a", "a", "b", nil] as [String?] {
            try await q.enqueue("x", concurrencyKey: key)
        }
        try await q.limitConcurrency(maxRunning: 3, maxRunningPerKey: 1)
        let stats = try await other.queue("q").stats()
        XCTAssertEqual(stats.maxRunning, 3)
        XCTAssertEqual(stats.maxRunningPerKey, 1)
        let jobs = try await other.queue("q").claimBatch(workerId: "w", n: 10)
        var keys: [String] = []
        for j in jobs {
            keys.append(try await q.job(j.id).concurrencyKey ?? "none")
        }
        XCTAssertEqual(keys.sorted(), ["a", "b", "none"])
        let none = try await q.claimBatch(workerId: "w", n: 10)
        XCTAssertEqual(none.count, 0)
        try await jobs[0].ack()
        do {
            try await q.limitConcurrency(maxRunning: 0)
            XCTFail("a cap of 0 was taken")
        } catch let e as HonkerError {
            XCTAssertEqual(e.code, "INVALID_ARGUMENT")
        }
        let kept = try await q.stats().maxRunning
        XCTAssertEqual(kept, 3)
        try await q.limitConcurrency()
        let lifted = try await q.stats().maxRunning
        XCTAssertNil(lifted)
        let rest = try await q.claimBatch(workerId: "w", n: 10)
        XCTAssertEqual(rest.count, 1)
    }

    func testUniqueModesAsSwiftPassesThem() async throws {
        // ADR 37 as Swift passes it: the options, the mode that acted
        // (through the packed batch form too), the checks. The modes'
        // semantics across surfaces are tests-interop's unique_modes.
        let t = try testDb()
        let q = try t.db.queue("q")
        let first = try await q.enqueue(["user": 1], dedupeKey: "w:1", unique: "period", uniqueFor: 3600)
        XCTAssertNil(first.unique)
        try await q.claimBatch(workerId: "w", n: 1)[0].ack()
        try t.clock.advance(ms: 3_599_000)
        let held = try await q.enqueue(["user": 1], dedupeKey: "w:1", unique: "period", uniqueFor: 3600)
        XCTAssertEqual(held.id, first.id)
        XCTAssertEqual(held.existing, true)
        XCTAssertEqual(held.unique, "period")
        let got = try await q.enqueueMany([["a": 1, "b": 2], ["b": 2, "a": 1], ["a": 2]], dedupeByPayload: true)
        XCTAssertEqual(got.map(\.unique), [nil, "live", nil])
        XCTAssertEqual(got[1].id, got[0].id)
        let d = try await q.enqueue(["v": 1], delay: 60, dedupeKey: "d", unique: "debounce")
        let again = try await q.enqueue(["v": 2], delay: 60, dedupeKey: "d", unique: "debounce")
        XCTAssertEqual(again.id, d.id)
        XCTAssertEqual(again.unique, "debounce")
        let replaced = try await q.job(d.id)
        XCTAssertEqual(try replaced.payload(as: [String: Int].self), ["v": 2])
        for bad in [("period", nil), (nil, 10.0), ("sometimes", nil)] as [(String?, TimeInterval?)] {
            do {
                try await q.enqueue("x", dedupeKey: "k", unique: bad.0, uniqueFor: bad.1)
                XCTFail("bad unique options were taken: \(bad)")
            } catch let e as HonkerError {
                XCTAssertEqual(e.code, "INVALID_ARGUMENT")
            }
        }
    }

    func testFairnessTakesKeysInTurnAndLimitsEachKey() async throws {
        // ADR 36 as Swift passes it: round-robin order, a rate limit per
        // key, the checks; another open of the file obeys both.
        let path = tempPath()
        let db = try Database(path: path)
        let other = try Database(path: path)
        let q = try db.queue("q")
        try await q.setFairness(order: "round_robin")
        _ = try await q.enqueueMany(Array(0..<100), concurrencyKey: "big")
        for key in ["x", "y", "z"] {
            _ = try await q.enqueueMany([1, 2], concurrencyKey: key)
        }
        let oq = try other.queue("q")
        var keys: [String] = []
        for _ in 0..<8 {
            for j in try await oq.claimBatch(workerId: "w", n: 1) {
                keys.append(try await q.job(j.id).concurrencyKey ?? "none")
            }
        }
        XCTAssertEqual(keys, ["big", "x", "y", "z", "big", "x", "y", "z"])
        try await q.setFairness(order: "round_robin", keyLimit: 1, keyPer: 60)
        let stats = try await oq.stats()
        XCTAssertEqual(stats.roundRobin, true)
        XCTAssertEqual(stats.keyLimit, 1)
        XCTAssertEqual(stats.keyPerMs, 60_000)
        let one = try await oq.claimBatch(workerId: "w", n: 10)
        XCTAssertEqual(one.count, 1)
        let none = try await oq.claimBatch(workerId: "w", n: 10)
        XCTAssertEqual(none.count, 0)
        for bad in [("fifo", nil), (nil, UInt32(5))] as [(String?, UInt32?)] {
            do {
                try await q.setFairness(order: bad.0, keyLimit: bad.1)
                XCTFail("bad fairness was taken: \(bad)")
            } catch let e as HonkerError {
                XCTAssertEqual(e.code, "INVALID_ARGUMENT")
            }
        }
        let kept = try await q.stats().keyLimit
        XCTAssertEqual(kept, 1)
        try await q.setFairness()
        let lifted = try await q.stats()
        XCTAssertEqual(lifted.roundRobin, false)
        XCTAssertNil(lifted.keyLimit)
        let rest = try await oq.claimBatch(workerId: "w", n: 200)
        XCTAssertEqual(rest.count, 97)
    }

    func testAPausedQueueKeepsItsClaimSequenceWaitingUntilResumed() async throws {
        let path = tempPath()
        let db = try Database(path: path)
        let other = try Database(path: path)
        let q = try db.queue("q")
        try await q.pause(note: "deploy")
        let pausedFirst = try await q.stats().paused
        XCTAssertTrue(pausedFirst)
        do {
            try await q.pause(note: String(repeating: "x", count: 513))
            XCTFail("a long note was taken")
        } catch let e as HonkerError {
            XCTAssertEqual(e.code, "INVALID_ARGUMENT")
        }
        let claimed = Task { () -> Int64? in
            for try await job in q.claim(workerId: "w", wait: 0.1) {
                try await job.ack()
                return job.id
            }
            return nil
        }
        let e = try await other.queue("q").enqueue("x")
        try await Task.sleep(nanoseconds: 300_000_000)
        // A broken pause hands the job out within a moment of the enqueue.
        let ready = try await other.queue("q").stats().ready
        XCTAssertEqual(ready, 1)
        let resumed = try await other.queue("q").resume()
        XCTAssertTrue(resumed)
        let id = try await claimed.value
        XCTAssertEqual(id, e.id)
        let resumedAgain = try await q.resume()
        XCTAssertFalse(resumedAgain)

        try await db.pauseAll(note: "migration")
        let pausedByAll = try await other.queue("q").stats().paused
        XCTAssertTrue(pausedByAll)
        let resumedAll = try await other.resumeAll()
        XCTAssertTrue(resumedAll)
        let resumedAllAgain = try await other.resumeAll()
        XCTAssertFalse(resumedAllAgain)
        let pausedAtEnd = try await q.stats().paused
        XCTAssertFalse(pausedAtEnd)
    }
}
