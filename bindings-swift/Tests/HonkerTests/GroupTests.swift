// Consumer groups through Swift: competing members under leases and tokens,
// dead letters and re-drive, the consumer sequence (Task cancellation losing
// nothing, close releasing its buffer), the Worker, and typed errors that
// change nothing. The cases every surface shares (per-key order, a lapsed
// lease, the ack in the caller's transaction, the poison event) are
// tests-interop's consumer_group, group_lease_lapse and group_outbox.
import Foundation
import Honker
import XCTest

final class GroupTests: XCTestCase {
    /// Everything a group stores, to prove a failed call changed nothing.
    func groupRows(_ db: Database) throws -> [[Row]] {
        try ["_honker_stream_groups", "_honker_stream_group_events", "_honker_stream_group_members"].map {
            try db.query("SELECT * FROM \($0) ORDER BY 1, 2")
        }
    }

    func testMembersCompeteAndEachEventGoesToOneOfThem() async throws {
        let t = try testDb()
        let s = try t.db.stream("orders")
        try await s.publishMany([0, 1, 2, 3, 4, 5])
        let g = try s.group("billing")
        let from = try await g.create()
        XCTAssertEqual(from, 1)
        let a = try await g.claim(member: "a", n: 4)
        let b = try await g.claim(member: "b", n: 4)
        XCTAssertEqual(a.events.map(\.offset), [1, 2, 3, 4])
        XCTAssertEqual(b.events.map(\.offset), [5, 6])
        XCTAssertEqual(a.missed, 0)
        XCTAssertEqual(try a.events[0].payload(as: Int.self), 0)
        XCTAssertEqual(a.events[0].deliveries, 1)
        XCTAssertGreaterThan(a.events[0].leaseExpiresAt, a.events[0].createdAt)
        var info = try await g.info()
        XCTAssertEqual([info.nextOffset, info.lag, info.pending, info.delivered, info.dead], [7, 6, 6, 6, 0])
        XCTAssertEqual(info.members.map(\.member), ["a", "b"])
        XCTAssertEqual(info.members.map(\.holds), [4, 2])
        XCTAssertEqual(info.options, GroupOptions())
        for e in a.events + b.events { try await g.ack(e) }
        let none = try await g.claim(member: "a", n: 10)
        XCTAssertTrue(none.events.isEmpty)
        info = try await g.info()
        XCTAssertEqual(info.pending, 0)
        XCTAssertNil(info.oldestPendingAge)
        try await s.group("search").create(start: .latest)
        let status = try await s.info()
        XCTAssertEqual(status.groups.map(\.group), ["billing", "search"])
        XCTAssertEqual(status.groups.map(\.nextOffset), [7, 7])
    }

    // The poison event dying at its last delivery while the rest flows, and
    // an ack in the caller's transaction: tests-interop's group_outbox.
    func testDeadLettersAreListedAndRedriven() async throws {
        let t = try testDb()
        let s = try t.db.stream("orders")
        try await s.publish("poison", key: "k")
        let g = try s.group("g")
        try await g.create(maxDeliveries: 1)
        let poison = try await g.claim(member: "m").events[0]
        let died = try await g.retry(poison, error: "boom")
        XCTAssertTrue(died)
        let dead = try await g.dead()
        XCTAssertEqual(dead.map(\.offset), [1])
        XCTAssertEqual(dead[0].lastError, "boom")
        XCTAssertEqual(dead[0].deliveries, 1)
        try await g.redrive(1)
        let again = try await g.claim(member: "m").events[0]
        XCTAssertEqual(again.deliveries, 1)
        try await g.fail(again, error: "still broken")
        let redriven = try await g.redriveAll()
        XCTAssertEqual(redriven, 1)
        await assertThrows({ try await g.redrive(2) }) { e in
            guard case HonkerError.NotFound = e else { return XCTFail("\(e)") }
        }
    }

    func testAConsumerIteratesAndCloseReleasesItsBuffer() async throws {
        let t = try testDb()
        let s = try t.db.stream("orders")
        try await s.publishMany(Array(0..<10))
        let g = try s.group("g")
        try await g.create()
        let consumer = try g.consume(member: "m", batch: 4, wait: 0.05)
        var got: [Int] = []
        for try await e in consumer {
            got.append(try e.payload(as: Int.self))
            try await g.ack(e)
            if got.count == 5 { break }
        }
        let released = await consumer.close()
        XCTAssertEqual(released, 3)
        XCTAssertEqual(got, [0, 1, 2, 3, 4])
        let info = try await g.info()
        XCTAssertEqual([info.pending, info.delivered, info.lag], [3, 0, 5])
    }

    func testCancellingTheIteratingTaskEndsAWaitAtOnceAndLosesNothing() async throws {
        let t = try testDb()
        let s = try t.db.stream("orders")
        let g = try s.group("g")
        try await g.create()
        let consumer = try g.consume(member: "m", wait: 15)
        let waiting = Task { () -> Int in
            var n = 0
            for try await _ in consumer { n += 1 }
            return n
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        let cancelled = Date()
        waiting.cancel()
        let n = try await waiting.value
        let took = Date().timeIntervalSince(cancelled)
        XCTAssertEqual(n, 0)
        XCTAssertLessThan(took, 2, "the 15 s wait ran on after cancellation")
        XCTAssertFalse(consumer.isClosed)
        try await s.publish("after")
        for try await e in consumer {
            XCTAssertEqual(try e.payload(as: String.self), "after")
            try await g.ack(e)
            break
        }
        await consumer.close()
    }

    func testBadInputIsATypedErrorAndChangesNothing() async throws {
        let t = try testDb()
        let s = try t.db.stream("orders")
        try await s.publish("kept")
        let g = try s.group("g")
        try await g.create()
        let held = try await g.claim(member: "m").events[0]
        let before = try groupRows(t.db)
        func invalid(_ body: () async throws -> Void, line: UInt = #line) async {
            await assertThrows(body, line: line) { e in
                guard case HonkerError.InvalidArgument = e else { return XCTFail("\(e)", line: line) }
            }
        }
        for name in ["", String(repeating: "x", count: 1000), "nul\0"] {
            await invalid { _ = try s.group(name) }
            await invalid { _ = try await g.claim(member: name) }
            await invalid { _ = try g.consume(member: name) }
        }
        await invalid { try await g.create(options: GroupOptions(maxDeliveries: 0)) }
        await invalid { try await g.create(options: GroupOptions(maxDeliveries: 1001)) }
        await invalid { try await g.create(options: GroupOptions(lease: 0)) }
        await invalid { try await g.create(options: GroupOptions(lease: -5)) }
        await invalid { try await g.create(options: GroupOptions(lease: .infinity)) }
        await invalid { try await g.create(options: GroupOptions(lease: .nan)) }
        await invalid { try await g.create(options: GroupOptions(memberIdle: 0.5)) }
        await invalid { try await g.create(maxDeliveries: 0) }
        await invalid { try await g.removeMember("m") }  // holds an event: needs force
        await invalid { try await g.create(start: .latest, lease: -1) }
        await invalid { _ = try await g.claim(member: "m", n: 0) }
        await invalid { _ = try await g.claim(member: "m", n: 10_001) }
        await invalid { _ = try await g.claim(member: "m", wait: -1) }
        await invalid { _ = try await g.claim(member: "m", lease: 0) }
        await invalid { try await g.retry(held, delay: -1) }
        await invalid { try await g.heartbeat(held, extend: 0) }
        await invalid { _ = try g.consume(member: "m", batch: 0) }
        await invalid { _ = try g.consume(member: "m", wait: 0) }
        await invalid { try await s.group("g2").create(start: .offset(5)) }
        XCTAssertEqual(try groupRows(t.db), before)
        try await g.ack(held)
    }
}

/// Handled offsets by key, and whether two events of one key ever ran at
/// once (for a worker's handlers).
final class KeyOrder: @unchecked Sendable {
    private let lock = NSLock()
    private var running: [String: Int] = [:]
    private(set) var byKey: [String: [Int64]] = [:]
    private(set) var overlapped = false
    private(set) var kinds: [String] = []

    func enter(_ key: String) {
        lock.lock(); running[key, default: 0] += 1
        if running[key]! > 1 { overlapped = true }
        lock.unlock()
    }

    func leave(_ key: String, _ offset: Int64) {
        lock.lock(); running[key]! -= 1; byKey[key, default: []].append(offset); lock.unlock()
    }

    func saw(_ kind: String) {
        lock.lock(); kinds.append(kind); lock.unlock()
    }

    var count: Int {
        lock.lock(); defer { lock.unlock() }
        return byKey.values.map(\.count).reduce(0, +)
    }
}

final class GroupWorkerTests: XCTestCase {
    func testAWorkerRunsAGroupsEventsInKeyOrderAndSettlesOnesItAcked() async throws {
        let db = try Database(path: tempPath())
        try db.execute("CREATE TABLE projected (\"offset\" INTEGER PRIMARY KEY)")
        let s = try db.stream("orders")
        let g = try s.group("billing")
        try await g.create(options: GroupOptions(maxDeliveries: 2))
        for i in 0..<30 { try await s.publish(i, key: "order-\(i % 3)") }
        try await s.publish(-1)  // poison
        let seen = KeyOrder()
        let worker = try Worker(db, concurrency: 6)
        try worker.handle(g) { (event: GroupEvent) in
            let n = try event.payload(as: Int.self)
            if n < 0 { throw Permanent("cannot bill this") }
            let key = event.key!
            seen.enter(key)
            try await Task.sleep(nanoseconds: 2_000_000)
            seen.leave(key, event.offset)
            if n % 2 == 1 {
                // The row and the ack commit together: the worker settles it.
                try await db.transaction { tx in
                    try tx.execute("INSERT INTO projected VALUES (?)", [.integer(value: event.offset)])
                    try g.ack(event, tx: tx)
                }
            }
        }
        worker.on(.success) { _ in seen.saw("success") }
        worker.on(.settled) { e in seen.saw(e.group == "billing" ? "settled" : "?") }
        XCTAssertEqual(worker.groupNames.map(\.group), ["billing"])
        let run = Task { try await worker.run() }
        try await eventually(20, "31 events") {
            let i = try await g.info()
            return seen.count == 30 && i.pending == 0 && i.dead == 1
        }
        run.cancel()
        try await run.value
        XCTAssertFalse(seen.overlapped, "two events of one key ran at once")
        for k in 0..<3 {
            XCTAssertEqual(seen.byKey["order-\(k)"], (0..<10).map { Int64(1 + k + 3 * $0) })
        }
        XCTAssertEqual(seen.kinds.filter { $0 == "settled" }.count, 15)
        XCTAssertEqual(seen.kinds.filter { $0 == "success" }.count, 15)
        let dead = try await g.dead()
        XCTAssertEqual(dead.map(\.offset), [31])
        XCTAssertEqual(try db.query("SELECT count(*) FROM projected")[0][0], .integer(value: 15))
    }

    func testRegisteringAGroupHandlerChecksItsArguments() async throws {
        let db = try Database(path: tempPath())
        let s = try db.stream("orders")
        let worker = try Worker(db)
        await assertThrows({ try worker.handle(try s.group("missing")) { _ in } }) { e in
            guard case HonkerError.NotFound = e else { return XCTFail("\(e)") }
        }
        let g = try s.group("g")
        try await g.create()
        await assertThrows({ try worker.handle(g, lease: 0) { _ in } })
        try worker.handle(g) { _ in }
        await assertThrows({ try worker.handle(g) { _ in } }) { e in
            guard case HonkerError.InvalidArgument = e else { return XCTFail("\(e)") }
        }
    }
}
