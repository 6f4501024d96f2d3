// W3C trace context from Swift (ADR 28): Swift captures none (it has no
// ambient context honker could read), but a job or event another surface
// traced (here the SQL functions, as Python and Node write them) carries its
// producer's headers to Swift's claim, lookup, read and group delivery.
// Mirrors bindings-python/tests/test_trace_context.py.
import Foundation
import Honker
import XCTest

final class TraceContextTests: XCTestCase {
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    func testAJobAndAnEventCarryTheProducersHeaders() async throws {
        let t = try testDb()
        let options = "{\"traceparent\": \"\(parent)\", \"tracestate\": \"congo=t61rcWkgMzE\"}"
        let tx = try t.db.begin()
        _ = try tx.query("SELECT honker_queue_enqueue('mail', '{\"n\":1}', ?)", [.text(value: options)])
        _ = try tx.query("SELECT honker_stream_append('orders', '{\"n\":1}', ?)", [.text(value: options)])
        try tx.commit()
        let q = try t.db.queue("mail")
        try await q.enqueue(["n": 2])
        let want = ["traceparent": parent, "tracestate": "congo=t61rcWkgMzE"]
        let jobs = try await q.claimBatch(workerId: "w", n: 2)
        XCTAssertEqual(jobs.map(\.traceContext), [want, nil])
        let record = try await q.job(jobs[0].id)
        XCTAssertEqual(record.traceContext, want)
        let s = try t.db.stream("orders")
        let events = try await s.read(after: 0, limit: 10)
        XCTAssertEqual(events.map(\.traceContext), [want])
        let g = try s.group("billing")
        _ = try await g.create()
        let delivered = try await g.claim(member: "m", n: 1)
        XCTAssertEqual(delivered.events.map(\.traceContext), [want])
    }
}
