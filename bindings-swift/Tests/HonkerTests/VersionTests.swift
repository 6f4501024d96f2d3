// One version for every package (issue 17 §3): Swift's `honkerVersion`, SQL's
// honker_version() and the Cargo workspace's (scripts/swift-test.sh passes it
// in as HONKER_VERSION) are the same.
import Foundation
import Honker
import XCTest

final class VersionTests: XCTestCase {
    func testTheVersionIsTheOneVersionOfEveryPackage() throws {
        let workspace = try XCTUnwrap(
            ProcessInfo.processInfo.environment["HONKER_VERSION"],
            "scripts/swift-test.sh passes the Cargo workspace's version as HONKER_VERSION")
        XCTAssertEqual(honkerVersion, workspace)
        let t = try testDb()
        let sql = try t.db.transaction { tx in try tx.query("SELECT honker_version() AS v")[0]["v"] }
        XCTAssertEqual(sql, SqlValue.text(value: workspace))
    }
}
