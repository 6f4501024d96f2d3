// The outbox inside the app's own SQLite connection (GRDB's, Core Data's
// store, SQLite.swift's): a raw handle opened here with the system SQLite's
// C API stands in for `grdbDb.sqliteConnection`. honker runs on that same
// library (it has no SQLite of its own), so its functions can be
// registered on the app's connection and its typed enqueue can join the
// app's transaction.
import CSQLite
import Foundation
import Honker
import XCTest

/// A connection the "app" opened itself, with its own table.
final class AppConnection: @unchecked Sendable {
    let handle: OpaquePointer

    init(path: String) throws {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
        guard rc == SQLITE_OK, let db else { throw HonkerError.Sqlite(message: "open", sqliteCode: rc) }
        handle = db
        try exec("CREATE TABLE IF NOT EXISTS shipments (id INTEGER PRIMARY KEY, who TEXT NOT NULL)")
    }

    func exec(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        if rc != SQLITE_OK {
            throw HonkerError.Sqlite(message: message.map { String(cString: $0) } ?? "?", sqliteCode: rc)
        }
    }

    func count(_ sql: String) -> Int64 {
        var stmt: OpaquePointer?
        sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        defer { sqlite3_finalize(stmt) }
        return sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : -1
    }

    deinit { sqlite3_close_v2(handle) }
}

final class SharedConnectionTests: XCTestCase {
    /// A consumer already waiting in this process when the app commits.
    func waitingConsumer(_ q: Queue) -> Task<(String, TimeInterval), Error> {
        Task {
            let started = Date()
            for try await job in q.claim(workerId: "consumer", wait: 10) {
                let to = try job.payload(as: [String: String].self)["to"] ?? "?"
                try await job.ack()
                return (to, Date().timeIntervalSince(started))
            }
            throw CancellationError()
        }
    }

    func testSqlFunctionsOnTheAppsConnectionCommitAndRollBackWithItsRows() async throws {
        let path = tempPath()
        let db = try Database(path: path)
        let q = try db.queue("emails")
        let app = try AppConnection(path: path)
        try db.registerFunctions(on: app.handle)

        try app.exec("BEGIN")
        try app.exec("INSERT INTO shipments (who) VALUES ('mallory')")
        try app.exec(#"SELECT honker_enqueue('emails', '{"to":"mallory"}', NULL, NULL, 0, NULL, NULL)"#)
        try app.exec("ROLLBACK")
        var stats = try await q.stats()
        XCTAssertEqual(stats.ready, 0, "the rollback took the job with the row")

        let consumer = waitingConsumer(q)
        try await Task.sleep(nanoseconds: 100_000_000)
        try app.exec("BEGIN")
        try app.exec("INSERT INTO shipments (who) VALUES ('carol')")
        try app.exec(#"SELECT honker_enqueue('emails', '{"to":"carol"}', NULL, NULL, 0, NULL, NULL)"#)
        try app.exec("COMMIT")
        let (to, waited) = try await consumer.value
        XCTAssertEqual(to, "carol")
        XCTAssertLessThan(waited, 5, "woken by the app's commit, not by the wait running out")
        XCTAssertEqual(app.count("SELECT count(*) FROM shipments"), 1)
        stats = try await q.stats()
        XCTAssertEqual(stats.ready + stats.running, 0)
    }

    func testTheTypedEnqueueJoinsTheAppsTransaction() async throws {
        let path = tempPath()
        let db = try Database(path: path)
        let q = try db.queue("emails")
        let app = try AppConnection(path: path)

        try app.exec("BEGIN")
        try app.exec("INSERT INTO shipments (who) VALUES ('mallory')")
        try q.enqueue(["to": "mallory"], on: app.handle)
        try app.exec("ROLLBACK")
        let stats = try await q.stats()
        XCTAssertEqual(stats.ready, 0)

        let consumer = waitingConsumer(q)
        try await Task.sleep(nanoseconds: 100_000_000)
        try app.exec("BEGIN")
        try app.exec("INSERT INTO shipments (who) VALUES ('carol')")
        let e = try q.enqueue(["to": "carol"], on: app.handle, priority: 3)
        XCTAssertGreaterThan(e.id, 0)
        try app.exec("COMMIT")
        let (to, waited) = try await consumer.value
        XCTAssertEqual(to, "carol")
        XCTAssertLessThan(waited, 5)

        // Autocommit: its own transaction.
        let next = waitingConsumer(q)
        try await Task.sleep(nanoseconds: 100_000_000)
        try q.enqueue(["to": "dave"], on: app.handle)
        let (dave, _) = try await next.value
        XCTAssertEqual(dave, "dave")
    }

    func testAnotherFilesConnectionIsRefusedAndNothingChanges() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("emails")
        let other = try AppConnection(path: tempPath())
        XCTAssertThrowsError(try db.registerFunctions(on: other.handle)) { error in
            XCTAssertEqual((error as? HonkerError)?.code, "INVALID_ARGUMENT", "\(error)")
        }
        XCTAssertThrowsError(try q.enqueue(["to": "x"], on: other.handle)) { error in
            XCTAssertEqual((error as? HonkerError)?.code, "INVALID_ARGUMENT", "\(error)")
        }
        XCTAssertThrowsError(try other.exec("SELECT honker_version()"))
        let stats = try await q.stats()
        XCTAssertEqual(stats.ready, 0)
    }

    /// One SQLite library in the process: the one the app's handle came
    /// from is the one honker's own connections report.
    func testHonkerAndTheAppShareOneSQLiteLibrary() throws {
        let db = try Database(path: tempPath())
        let honkers = try db.query("SELECT sqlite_version() AS v")[0]["v"]
        XCTAssertEqual(honkers, .text(value: String(cString: sqlite3_libversion())))
        #if os(Linux)
        // procfs files report size 0: read to the end, not by size.
        let file = try XCTUnwrap(FileHandle(forReadingAtPath: "/proc/self/maps"))
        let maps = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(maps.contains("libsqlite3.so"), "honker links the system's shared SQLite")
        #endif
    }

    /// SQLite's own result code travels with an `SQLITE` error.
    func testAnSqliteErrorCarriesSqlitesResultCode() throws {
        let db = try Database(path: tempPath())
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)")
        try db.execute("INSERT INTO t (v) VALUES ('a')")
        XCTAssertThrowsError(try db.execute("INSERT INTO t (v) VALUES ('a')")) { error in
            let e = error as? HonkerError
            XCTAssertEqual(e?.code, "SQLITE")
            XCTAssertEqual(e?.sqliteCode, 2067, "SQLITE_CONSTRAINT_UNIQUE: \(error)")
            XCTAssertTrue(e?.localizedDescription.hasPrefix("SQLITE: ") == true, "\(error)")
        }
        XCTAssertThrowsError(try db.execute("SELEC 1")) { error in
            XCTAssertEqual((error as? HonkerError)?.sqliteCode, SQLITE_ERROR, "\(error)")
        }
        XCTAssertNil(HonkerError.LeaseLost(message: "x").sqliteCode)
    }
}
