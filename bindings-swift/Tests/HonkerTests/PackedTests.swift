// The packed forms of enqueueMany and claimBatch (Packed.swift, packed.rs):
// every field of a claimed job as the record path (`job(id)`, a UniFFI
// record) reads it, every payload kind and size byte for byte, and each
// enqueue result in order.
import Foundation
import XCTest

@testable import Honker

final class PackedTests: XCTestCase {
    func testClaimedJobsCarryEveryFieldThroughThePackedForm() async throws {
        let t = try testDb()
        let q = try t.db.queue("packed", maxAttempts: 5)
        let big = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let text = "q\"\\/\n\té🦆\u{2028}"
        var ids: [Int64] = []
        ids += try await q.enqueueMany([big, Data()], priority: 3).map(\.id)
        ids += try await q.enqueueMany([["text": text]], runAt: Date(timeIntervalSince1970: 1_600_000_000.123),
                                       priority: -7, maxAttempts: 9).map(\.id)
        let tx = try t.db.begin()
        let options = #"{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}"#
        let traced = try tx.query("SELECT honker_queue_enqueue('packed', '[1,2]', ?)", [.text(value: options)])
        try tx.commit()
        guard case .integer(let tracedId)? = traced.first?[0] else { return XCTFail("\(traced)") }
        ids.append(tracedId)

        // A second attempt, so that attempts is not the default.
        let first = try await q.claimBatch(workerId: "w0", n: 1)
        XCTAssertEqual(first.map(\.id), [ids[0]], "the highest priority first, then the lowest id")
        _ = try await first[0].retry(delay: 0, error: "again")
        try t.clock.advance(ms: 1)
        let jobs = try await q.claimBatch(workerId: "w1", n: 10, lease: 42)
        XCTAssertEqual(Set(jobs.map(\.id)), Set(ids))
        for job in jobs {
            let r = try await q.job(job.id)
            XCTAssertEqual(job.attempts, r.attempts)
            XCTAssertEqual(job.maxAttempts, r.maxAttempts)
            XCTAssertEqual(job.priority, r.priority)
            XCTAssertEqual(job.runAt, r.runAt)
            XCTAssertEqual(job.createdAt, r.createdAt)
            XCTAssertEqual(job.leaseExpiresAt, r.leaseExpiresAt)
            XCTAssertEqual(job.traceContext, r.traceContext)
            XCTAssertEqual(job.workerId, "w1")
            XCTAssertEqual(job.rawPayload, r.payload)
            try await job.heartbeat() // the token read is the lease's
        }
        let byId = Dictionary(uniqueKeysWithValues: jobs.map { ($0.id, $0) })
        XCTAssertEqual(byId[ids[0]]?.rawPayload, .bytes(data: big))
        XCTAssertEqual(byId[ids[1]]?.rawPayload, .bytes(data: Data()))
        XCTAssertEqual(try byId[ids[2]]?.payload(as: [String: String].self), ["text": text])
        XCTAssertEqual(byId[ids[0]]?.attempts, 2)
        XCTAssertEqual(byId[ids[2]]?.attempts, 1)
        XCTAssertEqual(byId[ids[2]]?.maxAttempts, 9)
        XCTAssertEqual(byId[ids[2]]?.priority, -7)
        XCTAssertEqual(byId[ids[2]]?.runAt, Date(timeIntervalSince1970: TimeInterval(1_600_000_000_123) / 1000))
        XCTAssertEqual(byId[ids[0]]?.maxAttempts, 5)
        XCTAssertEqual(byId[ids[0]]?.leaseExpiresAt, Date(timeIntervalSince1970: TimeInterval(1_700_000_042_001) / 1000))
        XCTAssertEqual(byId[tracedId]?.traceContext?["traceparent"],
                       "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        XCTAssertNil(byId[ids[0]]?.traceContext)
        let acked = try await q.ackMany(jobs)
        XCTAssertEqual(acked, UInt64(ids.count))
    }

    func testEnqueueResultsComeBackInOrderWithWhatWasDeduplicated() async throws {
        let t = try testDb()
        let q = try t.db.queue("packed")
        let fresh = try await q.enqueueMany((0..<300).map { ["n": $0] })
        XCTAssertEqual(fresh.map(\.existing), Array(repeating: false, count: 300))
        XCTAssertEqual(fresh.map(\.id), Array(fresh[0].id..<fresh[0].id + 300))
        let dedupe = [try await q.enqueue(["n": 1], dedupeKey: "once"),
                      try await q.enqueue(["n": 2], dedupeKey: "once")]
        XCTAssertEqual(dedupe.map(\.existing), [false, true])
        XCTAssertEqual(dedupe.map(\.unique), [nil, "live"])
        XCTAssertEqual(dedupe[1].id, dedupe[0].id)
        // Inside a transaction, and on the app's own connection.
        let tx = try t.db.begin()
        let inTx = try q.enqueueMany(["a", "b"], tx: tx)
        try tx.commit()
        XCTAssertEqual(inTx.map(\.existing), [false, false])
        XCTAssertGreaterThan(inTx[0].id, dedupe[0].id)
        XCTAssertEqual(inTx[1].id, inTx[0].id + 1)
        let stats = try await q.stats()
        XCTAssertEqual(stats.ready, 303)
    }

    func testAnEmptyBatchEnqueuesNothing() async throws {
        let t = try testDb()
        let q = try t.db.queue("packed")
        let none: [[String: Int]] = []
        let done = try await q.enqueueMany(none)
        XCTAssertEqual(done.count, 0)
        let stats = try await q.stats()
        XCTAssertEqual(stats.ready, 0)
    }
}
