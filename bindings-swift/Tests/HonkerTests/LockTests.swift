// Locks with fencing tokens and rate limits through Swift: grants and
// tokens, the fence rolling back a stale holder's transaction, withLock
// renewed while its body runs and cancelling the body when the lock is
// lost, a cancelled wait that holds nothing, GCRA decisions on the test
// clock, parameters shared through the file, refunds on rollback, and typed
// errors that change nothing. Mirrors bindings-python/tests/test_locks.py.
import Foundation
import Honker
import XCTest

final class LockTests: XCTestCase {
    func testWithLockRenewsWhileTheBodyRunsAndReleasesAfter() async throws {
        let db = try Database(path: tempPath())
        let lock = try db.lock("job")
        let token = try await lock.withLock(owner: "a", ttl: 0.3) { held in
            try await Task.sleep(nanoseconds: 1_000_000_000)
            let other = try await lock.tryAcquire(owner: "b", ttl: 1)
            XCTAssertNil(other, "renewed, not lapsed")
            XCTAssertGreaterThanOrEqual(held.renewals, 2)
            XCTAssertFalse(held.isLost)
            try await db.transaction { tx in try held.fence(tx) }
            return held.token
        }
        XCTAssertGreaterThan(token, 0)
        let after = try await lock.info()
        XCTAssertNil(after)
        // Held elsewhere: Timeout after the wait.
        let otherTaken = try await lock.tryAcquire(owner: "b", ttl: 30)
        let other = try XCTUnwrap(otherTaken)
        await assertThrows({ try await lock.withLock(owner: "a", ttl: 1, wait: 0.2) { _ in 0 } }) { e in
            XCTAssertEqual((e as? HonkerError)?.code, "TIMEOUT")
        }
        // A waiting withLock is woken by the release.
        Task {
            try await Task.sleep(nanoseconds: 200_000_000)
            try await lock.release(token: other.token)
        }
        let next = try await lock.withLock(owner: "a", ttl: 5, wait: 30) { $0.token }
        XCTAssertGreaterThan(next, other.token)
    }

    /// Issue 53: tasks that give the same owner name (a worker's id, a
    /// process's) are each their own holder: never two inside at once, each
    /// with its own token.
    func testBodiesThatNameOneOwnerExcludeEachOther() async throws {
        let db = try Database(path: tempPath())
        let lock = try db.lock("nightly")
        let overlaps = Counter()
        let inside = Inside()
        let tokens = try await withThrowingTaskGroup(of: Int64.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    try await lock.withLock(owner: "worker-1", ttl: 30, wait: 30) { held in
                        if await inside.enter() > 1 { await overlaps.add() }
                        try await Task.sleep(nanoseconds: 5_000_000)
                        try await db.transaction { tx in try held.fence(tx) }
                        await inside.leave()
                        return held.token
                    }
                }
            }
            var all: [Int64] = []
            for try await t in group { all.append(t) }
            return all
        }
        let n = await overlaps.value
        XCTAssertEqual(n, 0)
        XCTAssertEqual(Set(tokens).count, 8, "every hold its own token")
        let taken = try await lock.tryAcquire(owner: "worker-1", ttl: 5)
        XCTAssertNotNil(taken)
        let again = try await lock.tryAcquire(owner: "worker-1", ttl: 5)
        XCTAssertNil(again, "the same owner name is another holder")
    }

    /// More bodies held at once than the shared pool has threads (64): a
    /// watch per body from its start took every thread, and their releases
    /// (which need one) waited forever. None starts one until its first
    /// renewal is due; a long body beside them is renewed and not lost.
    func testManyBodiesHeldAtOnceNeedNoThreadEachBesideALongRenewedOne() async throws {
        let db = try Database(path: tempPath())
        let entered = Counter()
        let long = Task {
            try await db.lock("long").withLock(owner: "a", ttl: 0.3) { held in
                try await Task.sleep(nanoseconds: 1_000_000_000)
                return (held.renewals, held.isLost)
            }
        }
        let started = Date()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<100 {
                group.addTask {
                    try await db.lock("short-\(i)").withLock(owner: "r", ttl: 30) { _ in
                        // Every body waits until all hundred are held.
                        await entered.add()
                        while await entered.value < 100 {
                            try await Task.sleep(nanoseconds: 1_000_000)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        // A liveness bound, not a speed goal: about 1 s here; a watch per
        // body from its start starved the pool for ~100 s (Linux's GCD then
        // adds threads slowly), and for good on a pool that adds none.
        XCTAssertLessThan(Date().timeIntervalSince(started), 30, "the bodies waited for the pool")
        let (renewals, lost) = try await long.value
        XCTAssertGreaterThanOrEqual(renewals, 3)
        XCTAssertFalse(lost)
        let held = try db.query("SELECT count(*) AS n FROM _honker_lock_holders WHERE name != ''")
        XCTAssertEqual(held[0]["n"], .integer(value: 0), "every hold released")
    }

    func testALostLockCancelsTheBodyAndWithLockThrowsLeaseLost() async throws {
        let t = try testDb()
        let lock = try t.db.lock("job")
        let clock = t.clock
        let started = Date()
        await assertThrows({
            try await lock.withLock(owner: "a", ttl: 10, every: 0.1) { held in
                try clock.advance(ms: 20_000)
                let b = try await lock.tryAcquire(owner: "b", ttl: 10)
                XCTAssertNotNil(b)
                // Sleeps until cancelled by the loss.
                do {
                    try await Task.sleep(nanoseconds: 60_000_000_000)
                } catch is CancellationError {
                    XCTAssertTrue(held.isLost)
                    do {
                        try await t.db.transaction { tx in try held.fence(tx) }
                        XCTFail("a lost hold's fence must fail")
                    } catch let e as HonkerError {
                        XCTAssertEqual(e.code, "LEASE_LOST")
                    }
                    throw CancellationError()
                }
                return 0
            }
        }) { e in
            XCTAssertEqual((e as? HonkerError)?.code, "LEASE_LOST")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        let info = try await lock.info()
        XCTAssertEqual(info?.owner, "b", "the end of the body released nothing")
    }

    func testACancelledWaitEndsAtOnceAndHoldsNothing() async throws {
        let db = try Database(path: tempPath())
        let lock = try db.lock("job")
        let gTaken = try await lock.tryAcquire(owner: "a", ttl: 30)
        let g = try XCTUnwrap(gTaken)
        let waiter = Task { try await lock.acquire(owner: "b", ttl: 30, wait: 60) }
        let holder = Task { try await lock.withLock(owner: "c", ttl: 30, wait: 60) { _ in 1 } }
        try await Task.sleep(nanoseconds: 200_000_000)
        let started = Date()
        waiter.cancel()
        holder.cancel()
        let got = try await waiter.value
        XCTAssertNil(got)
        await assertThrows({ try await holder.value }) { e in XCTAssertTrue(e is CancellationError, "\(e)") }
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        let info = try await lock.info()
        XCTAssertEqual(info?.token, g.token)
    }

    func testBadLockInputIsInvalidArgumentAndChangesNothing() async throws {
        let t = try testDb()
        let lock = try t.db.lock("x")
        for ttl in [0, -1, 31 * 86_400, .infinity, .nan] as [TimeInterval] {
            XCTAssertThrowsError(try lock.tryAcquire(owner: "a", ttl: ttl, tx: nil)) { e in
                XCTAssertEqual((e as? HonkerError)?.code, "INVALID_ARGUMENT", "\(ttl)")
            }
        }
        XCTAssertThrowsError(try lock.tryAcquire(owner: "", ttl: 1, tx: nil))
        XCTAssertThrowsError(try t.db.lock(""))
        await assertThrows({ try await lock.withLock(owner: "a", ttl: 1, every: 1) { _ in 0 } }) { e in
            XCTAssertEqual((e as? HonkerError)?.code, "INVALID_ARGUMENT")
        }
        XCTAssertThrowsError(try lock.release(token: 0, tx: nil))
        // The row named '' is the token counter, not a holder.
        XCTAssertEqual(try t.db.query("SELECT count(*) FROM _honker_lock_holders WHERE name != ''")[0][0], .integer(value: 0))
    }

    func testRateLimitsAnswerInFullOnTheTestClock() async throws {
        let t = try testDb()
        let rl = try await t.db.rateLimiter("api", limit: 10, per: 1, burst: 6)
        var remaining: [Int64] = []
        for _ in 0..<6 {
            let d = try await rl.tryAcquire(key: "k")
            XCTAssertTrue(d.allowed)
            remaining.append(d.remaining)
        }
        XCTAssertEqual(remaining, [5, 4, 3, 2, 1, 0])
        let seventh = try await rl.tryAcquire(key: "k")
        XCTAssertFalse(seventh.allowed)
        XCTAssertEqual(seventh.retryAfter, 0.1, accuracy: 1e-9)
        XCTAssertEqual(seventh.resetAfter, 0.6, accuracy: 1e-9)
        try t.clock.advance(ms: 100)
        let later = try await rl.tryAcquire(key: "k")
        XCTAssertTrue(later.allowed)
        let peek = try await rl.tryAcquire(key: "new", cost: 0)
        XCTAssertEqual(peek.remaining, 6)
        let four = try await rl.tryAcquire(key: "new", cost: 4)
        XCTAssertEqual(four.remaining, 2)
        await assertThrows({ try await rl.tryAcquire(key: "new", cost: 7) }) { e in
            XCTAssertEqual((e as? HonkerError)?.code, "INVALID_ARGUMENT")
        }
        let params = try await rl.params()
        XCTAssertEqual(params, RateLimit(limit: 10, per: 1, burst: 6))
    }

    // Tokens, release, info, lapse, renewal and the fence are tests-interop's
    // lock_fencing and lock_lapse; sharing, conflicts, updates and refunds of
    // rate limits its rate_limit_params and rate_limit_refund.
    func testALimiterNoProcessSetIsNotFound() async throws {
        let t = try testDb()
        await assertThrows({ try await t.db.rateLimiter("nope") }) { e in
            XCTAssertEqual((e as? HonkerError)?.code, "NOT_FOUND")
        }
    }

    /// Issue 53 §12: a wait over ~584 years passed validation and trapped
    /// converting the sleep to nanoseconds.
    func testAnAcquireWaitBeyondTheLimitIsInvalidArgumentNotATrap() async throws {
        let t = try testDb()
        let rl = try await t.db.rateLimiter("mail", limit: 1, per: 1)
        for wait: TimeInterval in [1e12, 1e10, .infinity, -1] {
            await assertThrows({ _ = try await rl.acquire(key: "k", wait: wait) }) { e in
                XCTAssertEqual((e as? HonkerError)?.code, "INVALID_ARGUMENT", "\(wait)")
            }
        }
    }

    func testAcquireSleepsRetryAfter() async throws {
        let db = try Database(path: tempPath())
        let rl = try await db.rateLimiter("w", limit: 10, per: 1)
        let first = try await rl.tryAcquire()
        XCTAssertTrue(first.allowed)
        let started = Date()
        let d = try await rl.acquire(wait: 5)
        XCTAssertTrue(d.allowed)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.08)
        let refused = try await rl.acquire(wait: 0.01)
        XCTAssertFalse(refused.allowed)
        // A waiting acquire (its time, 3 s, within the wait) ends when its
        // Task is cancelled.
        let slow = try await db.rateLimiter("slow", limit: 1, per: 3)
        let taken = try await slow.tryAcquire()
        XCTAssertTrue(taken.allowed)
        let waiter = Task { try await slow.acquire(wait: 10) }
        try await Task.sleep(nanoseconds: 200_000_000)
        let cancelled = Date()
        waiter.cancel()
        await assertThrows({ _ = try await waiter.value }) { e in
            XCTAssertTrue(e is CancellationError, "\(e)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(cancelled), 2)
    }
}

final class QueueRateLimitTests: XCTestCase {
    func testARateLimitedQueueStartsWhatItsLimitAllows() async throws {
        let t = try testDb()
        let q = try t.db.queue("mail")
        for i in 0..<20 { try await q.enqueue(i) }
        try await q.setRateLimit(RateLimit(limit: 10, per: 1, burst: 3))
        let stored = try await t.db.queue("mail").rateLimit()
        XCTAssertEqual(stored, RateLimit(limit: 10, per: 1, burst: 3))
        let first = try await q.claimBatch(workerId: "w", n: 10)
        XCTAssertEqual(first.count, 3)
        let none = try await q.claimBatch(workerId: "w", n: 10)
        XCTAssertEqual(none.count, 0)
        try t.clock.advance(ms: 100)
        let one = try await q.claimBatch(workerId: "w", n: 10)
        XCTAssertEqual(one.count, 1)
        XCTAssertEqual(try t.db.query("SELECT count(*) FROM _honker_jobs WHERE attempts = 0")[0][0], .integer(value: 16))
        try await q.setRateLimit(nil)
        let lifted = try await q.rateLimit()
        XCTAssertNil(lifted)
        let rest = try await q.claimBatch(workerId: "w", n: 100)
        XCTAssertEqual(rest.count, 16)
    }
}

/// A count shared by tasks.
actor Counter {
    private(set) var value = 0
    func add() { value += 1 }
}

/// How many tasks are inside a block.
actor Inside {
    private var n = 0
    func enter() -> Int { n += 1; return n }
    func leave() { n -= 1 }
}
