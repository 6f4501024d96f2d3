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
        try await t.db.transaction { tx in
            try tx.execute("INSERT INTO orders (user_id, status) VALUES (?, ?)", [42, "paid"])
            try emails.enqueue(Email(to: "alice@example.com", template: "order-confirmed"), tx: tx)
        }
        XCTAssertEqual(try t.db.query("SELECT user_id FROM orders")[0]["user_id"], SqlValue.integer(value: 42))
        let jobs = try await emails.claimBatch(workerId: "mailer-1")
        XCTAssertEqual(try jobs[0].payload(as: Email.self).template, "order-confirmed")
    }

    /// Issue 53 §11: while one task held `begin()` across an await, 11 of 12
    /// concurrent `await q.cancel(id)` failed with a false INVALID_ARGUMENT
    /// (their inline attempt ran on the thread the transaction was opened
    /// on). They wait for the writer, as they did before the inline path.
    func testCallsBesideATransactionHeldAcrossAnAwaitWaitForIt() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        var ids: [Int64] = []
        for i in 0..<12 { ids.append(try await q.enqueue(i).id) }
        let tx = try t.db.begin()
        try tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'held')")
        let cancelled = try await withThrowingTaskGroup(of: Bool.self) { group in
            for id in ids { group.addTask { try await q.cancel(id) } }
            try await Task.sleep(nanoseconds: 200_000_000)  // held across an await
            try tx.commit()
            var out: [Bool] = []
            for try await r in group { out.append(r) }
            return out
        }
        XCTAssertEqual(cancelled.filter { $0 }.count, 12)
    }

    func testRowsKeepRepeatedColumnNamesByPositionAndName() throws {
        // SELECT * over a join: two columns named id (dictionaries trapped).
        let t = try testDb()
        try t.db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        try t.db.execute("INSERT INTO users (id, name) VALUES (7, 'ada')")
        try t.db.execute("INSERT INTO orders (id, user_id, status) VALUES (3, 7, 'paid')")
        let sql = "SELECT * FROM orders JOIN users ON users.id = orders.user_id"
        for rows in [try t.db.query(sql), try t.db.transaction { tx in try tx.query(sql) }] {
            XCTAssertEqual(rows.count, 1)
            let row = rows[0]
            XCTAssertEqual(row.columns, ["id", "user_id", "status", "id", "name"])
            XCTAssertEqual(row["id"], .integer(value: 3), "the first column of that name")
            XCTAssertEqual(row.values(named: "id"), [.integer(value: 3), .integer(value: 7)])
            XCTAssertEqual(row[3], .integer(value: 7))
            XCTAssertEqual(row["name"], .text(value: "ada"))
            XCTAssertNil(row["missing"])
        }
    }

    func testAThrownErrorRollsBackTheOrderAndItsJob() async throws {
        let t = try testDb()
        let emails = try t.db.queue("emails")
        await assertThrows {
            try await t.db.transaction { tx in
                try tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'paid')")
                try emails.enqueue(Email(to: "x", template: "y"), tx: tx)
                throw PaymentFailed()
            }
        }
        XCTAssertEqual(try t.db.query("SELECT count(*) AS n FROM orders")[0]["n"], SqlValue.integer(value: 0))
        let stats = try await emails.stats()
        XCTAssertEqual(stats.ready, 0)
        try await emails.enqueue("after") // the writer is free again
    }

    func testAckInsideTheTransactionThatRecordsTheEffect() async throws {
        let t = try testDb()
        let q = try t.db.queue("q")
        try await q.enqueue(["n": 1])
        let job = try await q.claimBatch(workerId: "w")[0]
        await assertThrows {
            try await t.db.transaction { tx in
                try tx.execute("INSERT INTO orders (user_id, status) VALUES (1, 'sent')")
                try job.ack(tx: tx)
                throw PaymentFailed()
            }
        }
        var stats = try await q.stats()
        XCTAssertEqual(stats.running, 1)
        try await t.db.transaction { tx in
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
