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
            .Timeout(message: ""), .RateLimited(message: ""), .Sqlite(message: ""),
            .Internal(message: ""), .Unsafe(message: ""), .RolledBack(message: ""),
        ]
        XCTAssertEqual(cases.map(\.code).sorted(), honkerErrorCodes.sorted())
    }

    func testBadArgumentsAreInvalidArgumentAndChangeNothing() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        try q.enqueue("seed")
        let before = try snapshot(t.db)
        let calls: [() async throws -> Void] = [
            { try q.enqueue("x", maxAttempts: 0) },
            { try q.enqueue("x", delay: 1, runAt: Date()) },
            { try q.enqueue("x", dedupeKey: "") },
            { try q.enqueue(String(repeating: "x", count: 2 << 20)) },
            { _ = try await q.claimBatch(workerId: "w", n: 0) },
            { _ = try await q.claimBatch(workerId: "", n: 1) },
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
