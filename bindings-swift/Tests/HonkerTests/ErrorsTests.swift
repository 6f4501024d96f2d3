// Errors through Swift: one enum case per stable code, bad input refused
// before anything is written. Mirrors bindings-python/tests/test_errors.py.
import Foundation
import Honker
import XCTest

final class ErrorsTests: XCTestCase {
    func testEveryCodeHasACase() {
        let cases: [HonkerError] = [
            .Busy(message: ""), .LeaseLost(message: ""), .NotFound(message: ""),
            .InvalidArgument(message: ""), .SchemaTooNew(message: ""), .Closed(message: ""),
            .Timeout(message: ""), .RateLimited(message: ""), .Sqlite(message: "", sqliteCode: 1),
            .Internal(message: ""), .Unsafe(message: ""), .RolledBack(message: ""),
            .Trimmed(message: "", missed: 0),
        ]
        XCTAssertEqual(cases.map(\.code).sorted(), honkerErrorCodes.sorted())
    }

    func testAnErrorDescribesItselfByCodeAndMessage() throws {
        let t = try testDb()
        do {
            try t.db.execute("INSERT INTO no_such_table VALUES (1)")
            XCTFail("accepted SQL on a missing table")
        } catch let e as HonkerError {
            XCTAssertEqual(e.code, "SQLITE")
            XCTAssertTrue(e.localizedDescription.hasPrefix("SQLITE: "), e.localizedDescription)
            XCTAssertTrue(e.localizedDescription.contains("no_such_table"), e.localizedDescription)
            XCTAssertEqual("\(e)", e.localizedDescription)
        }
        let made = HonkerError.LeaseLost(message: "job 1: its lease was lost")
        XCTAssertEqual(made.localizedDescription, "LEASE_LOST: job 1: its lease was lost")
    }

    /// Issue 53 §23: a clock near the end of Int64 made every expiry
    /// saturate (a lock granted for 60 s lapsed at once).
    func testAManualClockRefusesTimesOutside1970To9999() throws {
        for bad: Int64 in [-1, .max, 253_402_300_800_000] {
            XCTAssertThrowsError(try ManualClock(nowMs: bad)) { e in
                XCTAssertEqual((e as? HonkerError)?.code, "INVALID_ARGUMENT")
            }
        }
        let clock = try ManualClock(nowMs: 253_402_300_799_000)
        XCTAssertThrowsError(try clock.advance(ms: 1_001)) { e in
            XCTAssertEqual((e as? HonkerError)?.code, "INVALID_ARGUMENT")
        }
        XCTAssertEqual(clock.nowMs(), 253_402_300_799_000, "unchanged")
    }

    func testBadDurationsOnAClaimedJobAreInvalidArgumentNotATrap() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        try await q.enqueue("job")
        let job = try await q.claimBatch(workerId: "w")[0]
        let calls: [() async throws -> Void] = [
            { _ = try await job.snooze(.infinity) },
            { _ = try await job.snooze(-1) },
            { _ = try await job.retry(delay: .nan) },
            { _ = try await job.heartbeat(extend: -.infinity) },
            { _ = try await job.keepAlive(every: 0) { 1 } },
            { _ = try await job.keepAlive(every: .infinity) { 1 } },
        ]
        for call in calls {
            do {
                try await call()
                XCTFail("accepted a bad duration")
            } catch let e as HonkerError {
                XCTAssertEqual(e.code, "INVALID_ARGUMENT")
            }
        }
        try await job.ack()  // still leased to us: nothing was changed
    }

    func testBadArgumentsAreInvalidArgumentAndChangeNothing() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        try await q.enqueue("seed")
        let before = try snapshot(t.db)
        let calls: [() async throws -> Void] = [
            { try q.enqueue("x", maxAttempts: 0) },
            { try q.enqueue("x", delay: 1, runAt: Date()) },
            { try q.enqueue("x", dedupeKey: "") },
            { try q.enqueue(String(repeating: "x", count: 2 << 20)) },
            { _ = try await q.claimBatch(workerId: "w", n: 0) },
            { _ = try await q.claimBatch(workerId: "", n: 1) },
            // Durations: infinity and NaN used to trap (a crash of the app),
            // negatives were clamped to 0.
            { try q.enqueue("x", delay: .infinity) },
            { try q.enqueue("x", delay: -1) },
            { try q.enqueue("x", expires: .nan) },
            { _ = try t.db.queue("q2", lease: -5) },
            { _ = try t.db.queue("q2", backoffMax: .infinity) },
            { _ = try await q.claimBatch(workerId: "w", lease: .infinity) },
            { _ = try await q.claimBatch(workerId: "w", wait: -1) },
            { _ = try await q.waitResult(1, as: String.self, timeout: .nan) },
            { _ = try await q.purgeDead(olderThan: -1) },
            { _ = try Database(path: t.db.path, busyTimeout: .infinity) },
        ]
        for call in calls {
            do {
                try await call()
                XCTFail("accepted a bad argument")
            } catch let e as HonkerError {
                XCTAssertEqual(e.code, "INVALID_ARGUMENT")
            }
        }
        XCTAssertEqual(try snapshot(t.db), before)
    }

    func testUnknownIdsSqlErrorsAndClosed() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        do {
            _ = try await q.job(424242)
            XCTFail()
        } catch HonkerError.NotFound {}
        XCTAssertThrowsError(try t.db.execute("INSERT INTO nope VALUES (1)")) {
            XCTAssertEqual(($0 as? HonkerError)?.code, "SQLITE")
        }
        try t.db.close()
        do {
            _ = try await q.stats()
            XCTFail()
        } catch HonkerError.Closed {}
    }
}
