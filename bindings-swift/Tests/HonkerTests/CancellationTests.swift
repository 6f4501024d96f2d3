// Cancelling a task ends honker's waits at once, also in the middle of a
// long wait, and a cancelled stream hands out nothing more and gives back
// what it holds. (The bound asserted is generous, far below the 15 s waits;
// the measured times are printed.)
import Foundation
import Honker
import XCTest

final class CancellationTests: XCTestCase {
    /// Cancels `task` after `after` seconds and returns how long it took to end.
    func timeToEnd<T: Sendable>(_ task: Task<T, Error>, after: UInt64 = 300_000_000) async throws -> (Result<T, Error>, TimeInterval) {
        try await Task.sleep(nanoseconds: after)
        let cancelled = Date()
        task.cancel()
        let result = await task.result
        return (result, Date().timeIntervalSince(cancelled))
    }

    func testACancelledStreamEndsInTheMiddleOfALongWait() async throws {
        let q = try Database(path: tempPath()).queue("q")
        let consumer = Task { () -> Int in
            var n = 0
            for try await _ in q.claim(workerId: "w", wait: 15) { n += 1 }
            return n
        }
        let (result, took) = try await timeToEnd(consumer)
        print("cancelled stream ended in \(Int(took * 1000)) ms")
        XCTAssertEqual(try result.get(), 0)
        XCTAssertLessThan(took, 2, "the 15 s wait ran on after cancellation")
    }

    func testACancelledClaimBatchEndsAtOnceAndTakesNothing() async throws {
        let q = try Database(path: tempPath()).queue("q")
        let claim = Task { try await q.claimBatch(workerId: "w", n: 4, wait: 15).count }
        let (result, took) = try await timeToEnd(claim)
        print("cancelled claimBatch ended in \(Int(took * 1000)) ms")
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertLessThan(took, 2)
        // Nothing was claimed for the cancelled task: a job is free at once.
        let e = try await q.enqueue("x")
        let jobs = try await q.claimBatch(workerId: "w2")
        XCTAssertEqual(jobs.map(\.id), [e.id])
    }

    /// Issue 53 §10: a group's waiting claim ran its whole wait (29.7 s of
    /// 30) after its task was cancelled.
    func testACancelledGroupClaimEndsAtOnceAndTakesNothing() async throws {
        let db = try Database(path: tempPath())
        let s = try db.stream("orders")
        let g = try s.group("billing")
        try await g.create()
        let claim = Task { try await g.claim(member: "a", n: 4, wait: 15).events.count }
        let (result, took) = try await timeToEnd(claim)
        print("cancelled group claim ended in \(Int(took * 1000)) ms")
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertLessThan(took, 2, "the 15 s wait ran on after cancellation")
        // Nothing is held for the cancelled task: a new event goes to b.
        try await s.publish("x")
        let got = try await g.claim(member: "b", n: 4)
        XCTAssertEqual(got.events.count, 1)
    }

    func testACancelledWaitResultEndsAtOnce() async throws {
        let q = try Database(path: tempPath()).queue("q")
        let e = try await q.enqueue("x")
        let wait = Task { try await q.waitResult(e.id, as: String.self, timeout: 15) }
        let (result, took) = try await timeToEnd(wait)
        print("cancelled waitResult ended in \(Int(took * 1000)) ms")
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertLessThan(took, 2)
    }

    func testACancelledBatchLoopHandsOutNothingMoreAndReleasesWhatItHolds() async throws {
        let q = try Database(path: tempPath()).queue("q")
        try await q.enqueueMany(["a", "b", "c", "d", "e"])
        let firstTaken = AsyncStream<Void>.makeStream()
        let loop = Task { () -> Int in
            var handed = 0
            for try await _ in q.claim(workerId: "w", batch: 5, wait: 15) {
                handed += 1
                firstTaken.continuation.yield()
                // Stays in the body until cancelled: the other 4 are buffered.
                while !Task.isCancelled { try? await Task.sleep(nanoseconds: 10_000_000) }
            }
            return handed
        }
        for await _ in firstTaken.stream { break }
        let (result, took) = try await timeToEnd(loop, after: 0)
        XCTAssertEqual(try result.get(), 1, "nothing handed out after cancellation")
        XCTAssertLessThan(took, 2)
        // The 4 it held are claimable by another worker at once.
        let rest = try await q.claimBatch(workerId: "w2", n: 10)
        XCTAssertEqual(rest.count, 4)
    }
}
