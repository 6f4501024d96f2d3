// AsyncSequence claims: `for try await` receives work from another thread
// and ends on task cancellation, losing no job. Mirrors test_async.py.
import Foundation
import Honker
import XCTest

final class AsyncTests: XCTestCase {
    func testForTryAwaitReceivesWorkAndEndsOnCancellation() async throws {
        let path = tempPath()
        let db = try Database(path: path)
        let emails = try db.queue("emails")
        let worker = Task { () -> [String] in
            var sent: [String] = []
            for try await job in emails.claim(workerId: "mailer-1", wait: 0.2) {
                sent.append(try job.payload(as: Email.self).to)
                try await job.ack()
            }
            return sent
        }
        try await Task.sleep(nanoseconds: 100_000_000) // the claim is waiting
        try await emails.enqueue(Email(to: "alice@example.com", template: "order-confirmed"))
        while try await emails.stats().ready + emails.stats().running > 0 {
            try await Task.sleep(nanoseconds: 5_000_000)
        }
        worker.cancel()
        let sent = try await worker.value
        XCTAssertEqual(sent, ["alice@example.com"])
    }

    func testCancellingAWaitingClaimLosesNoJob() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q")
        let waiter = Task { () -> Int in
            var n = 0
            for try await _ in q.claim(workerId: "w", wait: 1) { n += 1 }
            return n
        }
        try await Task.sleep(nanoseconds: 100_000_000)
        waiter.cancel()
        // The cancelled claim's thread still waits: this job wakes it, and the
        // job it claims for nobody must come back at once.
        let e = try await q.enqueue("x")
        let handed = try await waiter.value
        XCTAssertEqual(handed, 0)
        var job: Job?
        let deadline = Date().addingTimeInterval(5)
        while job == nil {
            job = try await q.claimBatch(workerId: "w2").first
            if job == nil {
                XCTAssertLessThan(Date(), deadline, "the cancelled claim kept the job")
                try await Task.sleep(nanoseconds: 10_000_000)
            }
        }
        XCTAssertEqual(job?.id, e.id)
        XCTAssertEqual(job?.attempts, 1)
    }

    func testBreakingOutOfTheLoopReleasesTheBufferedJobs() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q")
        for i in 0..<3 { try await q.enqueue("job \(i)") }
        for try await job in q.claim(workerId: "w", batch: 3, wait: 0.1) {
            try await job.ack()
            break
        }
        // The two claimed with it and never handed out are back at once, not
        // at lease lapse.
        let stats = try await q.stats()
        XCTAssertEqual(stats.ready, 2)
        XCTAssertEqual(stats.running, 0)
    }

    func testAsyncCallsDoNotBlockTheCallersThread() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q")
        // A claim that waits 0.5 s runs off this task's thread: a concurrent
        // task keeps making progress meanwhile.
        async let waited: [Job] = q.claimBatch(workerId: "w", wait: 0.5)
        var ticks = 0
        let start = Date()
        while Date().timeIntervalSince(start) < 0.3 {
            try await Task.sleep(nanoseconds: 5_000_000)
            ticks += 1
        }
        let jobs = try await waited
        XCTAssertTrue(jobs.isEmpty)
        XCTAssertGreaterThan(ticks, 20)
    }

    /// 600 idle consumers, each waiting 30 s: more waits than the dispatch
    /// queues have threads. Each waits on a thread of its own, so a job
    /// still reaches one of them, and plain tasks still run, at once. On the
    /// dispatch queues the claimed job's hand-off waited 120 s.
    func testSixHundredIdleConsumersLeaveTheDispatchQueuesFree() async throws {
        let db = try Database(path: tempPath())
        let q = try db.queue("q")
        let (got, sink) = AsyncStream<Int64>.makeStream()
        var consumers: [Task<Void, Error>] = []
        for i in 0..<600 {
            consumers.append(Task {
                for try await job in q.claim(workerId: "w\(i)", wait: 30) {
                    try await job.ack()
                    sink.yield(job.id)
                }
            })
        }
        try await Task.sleep(nanoseconds: 1_000_000_000) // every claim waits
        var arrived = got.makeAsyncIterator()
        for _ in 0..<3 {
            let started = Date()
            let ran = await Task.detached { Date() }.value
            XCTAssertLessThan(ran.timeIntervalSince(started), 10, "a plain task waited for a thread")
            let e = try await q.enqueue("x")
            let id = await arrived.next()
            XCTAssertEqual(id, e.id)
            XCTAssertLessThan(Date().timeIntervalSince(started), 10, "the job waited for a thread")
        }
        for c in consumers { c.cancel() }
        for c in consumers { _ = try? await c.value }
    }
}
