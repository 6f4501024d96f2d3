// Queue metrics from Swift (ADR 27): what this binding does is counted in
// the file (written before this process reads them); the Prometheus text is
// there. Mirrors
// bindings-python/tests/test_metrics.py.
import Foundation
import Honker
import XCTest

final class MetricsTests: XCTestCase {
    func testCountsAreTheFilesAndExact() async throws {
        let t = try testDb()
        let q = try t.db.queue("emails")
        try await q.enqueue(["to": "a"])
        try await q.enqueue(["to": "b"])
        try t.clock.advance(ms: 200)
        let jobs = try await q.claimBatch(workerId: "w", n: 2)
        try await jobs[0].ack()
        try await jobs[1].fail("550")
        let m = try await q.metrics()
        XCTAssertEqual([m.enqueued, m.claimed, m.acked, m.dead, m.retried], [2, 2, 1, 1, 0])
        XCTAssertEqual([m.ready, m.deadLetters], [0, 1])
        XCTAssertEqual(m.claimLatency.count, 2)
        XCTAssertEqual(m.claimLatency.sum, 0.4, accuracy: 1e-9)
        XCTAssertNil(m.claimLatency.buckets.last?.le)
        XCTAssertEqual(m.claimLatency.buckets.last?.count, 2)
        XCTAssertEqual(m.claimLatency.buckets.first { $0.le == 0.25 }?.count, 2)
        let all = try await t.db.metrics()
        XCTAssertEqual(all, [m])
        let text = try await t.db.metricsText()
        XCTAssertTrue(text.contains("honker_jobs_total{queue=\"emails\",event=\"acked\"} 1\n"))
    }
}
