// Shared helpers: a fresh file per test, on a clock the test moves.
import Foundation
import Honker
import XCTest

func tempPath() -> String {
    let dir = FileManager.default.temporaryDirectory
        .appendingPathComponent("honker-swift-\(UUID().uuidString)")
    try! FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir.appendingPathComponent("app.db").path
}

struct TestDb {
    let db: Database
    let clock: ManualClock
    let path: String
}

func testDb() throws -> TestDb {
    let clock = try ManualClock(nowMs: 1_700_000_000_000)
    let path = tempPath()
    let db = try Database(path: path, clock: clock)
    try db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, status TEXT)")
    return TestDb(db: db, clock: clock, path: path)
}

/// Everything honker stores, to prove a failed call changed nothing.
func snapshot(_ db: Database) throws -> [[Row]] {
    try ["_honker_jobs", "_honker_finished", "_honker_results"].map {
        try db.query("SELECT * FROM \($0) ORDER BY 1")
    }
}

struct Email: Codable, Equatable {
    var to: String
    var template: String
}

/// `XCTAssertThrowsError` for async code (its autoclosure cannot await).
func assertThrows<T>(_ body: () async throws -> T, file: StaticString = #filePath, line: UInt = #line,
                     _ check: (Error) -> Void = { _ in }) async {
    do {
        _ = try await body()
        XCTFail("no error was thrown", file: file, line: line)
    } catch {
        check(error)
    }
}
