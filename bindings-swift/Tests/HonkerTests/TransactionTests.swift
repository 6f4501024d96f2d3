// The outbox through Swift: commits with the closure, rolls back when it
// throws. Mirrors bindings-python/tests/test_transaction.py.
import Foundation
import Honker
import XCTest

struct PaymentFailed: Error {}

final class TransactionTests: XCTestCase {
    func testTheOrderAndItsEmailCommitTogether() async throws {
        let t = try testDb()
        let emails = try t.db.queue("emails")
        try t.db.transaction { tx in
            try tx.execute("INSERT INTO orders (user_id, status) VALUES (?, ?)", [42, "paid"])
            try emails.enqueue(Email(to: "alice@example.com", template: "order-confirmed"), tx: tx)
        }
        XCTAssertEqual(try t.db.query("SELECT user_id FROM orders")[0]["user_id"], SqlValue.integer(value: 42))
        let jobs = try await emails.claimBatch(workerId: "mailer-1")
        XCTAssertEqual(try jobs[0].payload(as: Email.self).template, "order-confirmed")
    }

    func testAThrownErrorRollsBackTheOrderAndItsJob() async throws {
        let t = try testDb()
        let emails = try t.db.queue("emails")
        XCTAssertThrowsError(try t.db.transaction { tx in
            try tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'paid')")
            try emails.enqueue(Email(to: "x", template: "y"), tx: tx)
            throw PaymentFailed()
        })
        XCTAssertEqual(try t.db.query("SELECT count(*) AS n FROM orders")[0]["n"], SqlValue.integer(value: 0))
        let stats = try await emails.stats()
        XCTAssertEqual(stats.ready, 0)
        try emails.enqueue("after") // the writer is free again
    }

    func testAckInsideTheTransactionThatRecordsTheEffect() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        try q.enqueue(["n": 1])
        let job = try await q.claimBatch(workerId: "w")[0]
        XCTAssertThrowsError(try t.db.transaction { tx in
            try tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'sent')")
            try job.ack(tx: tx)
            throw PaymentFailed()
        })
        var stats = try await q.stats()
        XCTAssertEqual(stats.running, 1)
        try t.db.transaction { tx in
            try tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'sent')")
            try job.ack(tx: tx)
        }
        stats = try await q.stats()
        XCTAssertEqual(stats.running, 0)
    }

    func testTheTransactionSeesItsOwnWrites() throws {
        let t = try testDb()
        try t.db.transaction { tx in
            try tx.execute("INSERT INTO orders (user_id, status) VALUES (7, 'paid')")
            XCTAssertEqual(try tx.query("SELECT count(*) AS n FROM orders")[0]["n"], SqlValue.integer(value: 1))
        }
    }
}
