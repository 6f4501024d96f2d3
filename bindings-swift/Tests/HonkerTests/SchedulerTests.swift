// The scheduler through Swift: idempotent registration, fires that carry
// their boundary, the schedule's own zone across spring-forward, catch-up
// after downtime, sync/pause/resume/trigger/remove, typed errors that change
// nothing, and run() from several tasks on the real clock (each boundary
// once), ended by cancelling them. Mirrors bindings-python/tests/test_scheduler.py.
import Foundation
import Honker
import XCTest

/// 2027-01-04T00:00:00Z, a Monday.
private let t0: Int64 = 1_799_020_800_000
private let minute: Int64 = 60_000

private func at(_ t: TestDb, _ ms: Int64) throws {
    try t.clock.advance(ms: UInt64(ms - t.clock.nowMs()))
}

final class SchedulerTests: XCTestCase {
    func testAddIsIdempotentAndAFireCarriesItsBoundary() async throws {
        let t = try testDb()
        try at(t, t0 + 10_000)
        let s = t.db.scheduler()
        let def = try Schedule("report", schedule: "*/15 * * * *", queue: "reports",
                               payload: Email(to: "ops@example.com", template: "report"))
        let added = try await s.add(def)
        XCTAssertTrue(added)
        let again = try await s.add(def)
        XCTAssertFalse(again)
        let info = try await s.get("report")
        XCTAssertEqual(info?.nextFireAt, Date(timeIntervalSince1970: TimeInterval(t0 + 15 * minute) / 1000))
        XCTAssertEqual(info?.timeZone, "UTC")
        let none = try await s.tick()
        XCTAssertEqual(none, [])
        try at(t, t0 + 15 * minute + 20_000)
        let fires = try await s.tick()
        XCTAssertEqual(fires.count, 1)
        XCTAssertEqual(fires.first?.fireAt, Date(timeIntervalSince1970: TimeInterval(t0 + 15 * minute) / 1000))
        let jobs = try await t.db.queue("reports").claimBatch(workerId: "w")
        XCTAssertEqual(try jobs[0].payload(as: Email.self).template, "report")
        XCTAssertEqual(jobs[0].runAt, fires[0].fireAt)
        XCTAssertEqual(fires[0].jobId, jobs[0].id)
        let later = try await s.get("report")
        XCTAssertEqual(later?.fires, 1)
        XCTAssertEqual(try later?.payload(as: Email.self).to, "ops@example.com")
    }

    func testTheSchedulesZoneAcrossSpringForward() async throws {
        let t = try testDb()
        // New York, 2027-03-14: 02:00 EST jumps to 03:00 EDT (07:00Z).
        let start: Int64 = 1_805_000_400_000 - 1  // 2027-03-14T05:00:00Z, local midnight
        try at(t, start)
        let s = t.db.scheduler()
        try await s.add(Schedule("daily", schedule: "30 2 * * *", queue: "q", timeZone: "America/New_York"))
        try await s.add(Schedule("hourly", schedule: "0 * * * *", queue: "q", timeZone: "America/New_York"))
        var now = start
        while now + minute < start + 23 * 60 * minute {
            now += minute
            try at(t, now)
            _ = try await s.tick()
        }
        let daily = try await s.get("daily")
        let hourly = try await s.get("hourly")
        XCTAssertEqual(daily?.fires, 1)
        XCTAssertEqual(daily?.lastFireAt, Date(timeIntervalSince1970: 1_805_007_600))
        XCTAssertEqual(hourly?.fires, 23)
    }

    func testCatchUpAfterThreeDaysDown() async throws {
        let t = try testDb()
        try at(t, t0)
        let s = t.db.scheduler()
        try await s.sync([
            Schedule("skip", schedule: "*/15 * * * *", queue: "q", catchUp: .skip),
            Schedule("latest", schedule: "*/15 * * * *", queue: "q"),
            Schedule("all", schedule: "*/15 * * * *", queue: "q", catchUp: .all, catchUpWindow: 1800),
        ])
        try at(t, t0 + 3 * 1440 * minute + 7 * minute)
        let fires = try await s.tick()
        func by(_ n: String) -> [Date] { fires.filter { $0.schedule == n }.map(\.fireAt) }
        let last = Date(timeIntervalSince1970: TimeInterval(t0 + 3 * 1440 * minute) / 1000)
        XCTAssertEqual(by("skip"), [])
        XCTAssertEqual(by("latest"), [last])
        XCTAssertEqual(by("all"), [last.addingTimeInterval(-900), last])
        let missed = try await s.list().map { "\($0.name)=\($0.missed)" }
        XCTAssertEqual(missed, ["all=286", "latest=287", "skip=288"])
    }

    func testSyncPauseResumeTriggerRemove() async throws {
        let t = try testDb()
        try at(t, t0)
        let s = t.db.scheduler()
        try await s.add(Schedule("a", schedule: "@every 1m", queue: "q", overlap: .bufferOne))
        try await s.pause("a", note: "deploying")
        let paused = try await s.get("a")
        XCTAssertEqual(paused?.paused, true)
        XCTAssertEqual(paused?.note, "deploying")
        XCTAssertEqual(paused?.overlap, "buffer_one")
        try at(t, t0 + 60 * minute)
        let none = try await s.tick()
        XCTAssertEqual(none, [])
        try await s.resume("a")
        let resumed = try await s.get("a")
        XCTAssertEqual(resumed?.missed, 0)
        let id = try await s.triggerNow("a")
        XCTAssertGreaterThan(id, 0)
        let next = try await s.nextFires("a", count: 2)
        XCTAssertEqual(next.count, 2)
        let report = try await s.sync([Schedule("b", schedule: "0 9 * * MON", queue: "q", timeZone: "Europe/Berlin")])
        XCTAssertEqual(report.added, ["b"])
        XCTAssertEqual(report.changed, [])
        XCTAssertEqual(report.removed, ["a"])
        let removed = try await s.remove("b")
        XCTAssertTrue(removed)
        await assertThrows({ try await s.pause("x") }) { e in
            guard case HonkerError.NotFound = e else { return XCTFail("\(e)") }
        }
    }

    func testBadInputIsInvalidArgumentAndChangesNothing() async throws {
        let t = try testDb()
        try at(t, t0)
        let s = t.db.scheduler()
        try await s.add(Schedule("ok", schedule: "* * * * *", queue: "q"))
        let before = try await s.list()
        let bad: [(Schedule, String)] = [
            (Schedule("x", schedule: "61 * * * *", queue: "q"), "field 1 (minute)"),
            (Schedule("x", schedule: "@every 0s", queue: "q"), "@every"),
            (Schedule("x", schedule: "* * * * *", queue: "q", timeZone: "Mars/Olympus"), "unknown time zone"),
            (Schedule("x", schedule: "* * * * *", queue: "q", catchUpMax: 0), "catch_up_max"),
            (Schedule("x", schedule: "* * * * *", queue: "q", jitter: -1), "jitter"),
            (Schedule("x", schedule: "* * * * *", queue: "q", expires: .infinity), "expires"),
            (Schedule("", schedule: "* * * * *", queue: "q"), "name"),
        ]
        for (def, needle) in bad {
            await assertThrows({ try await s.add(def) }) { e in
                guard case HonkerError.InvalidArgument(let message) = e else { return XCTFail("\(e)") }
                XCTAssertTrue(message.contains(needle), "\(needle): \(message)")
            }
        }
        let after = try await s.list()
        XCTAssertEqual(after, before)
    }

    func testTasksRunningTheSchedulerFireEachBoundaryOnce() async throws {
        let db = try Database(path: tempPath())
        let s = db.scheduler()
        try await s.add(Schedule("beat", schedule: "@every 1s", queue: "beats"))
        let runners = (0..<3).map { _ in Task { try await db.scheduler().run() } }
        try await Task.sleep(nanoseconds: 3_500_000_000)
        let started = Date()
        for r in runners { r.cancel() }
        for r in runners {
            do {
                try await r.value
                XCTFail("run() ends with CancellationError")
            } catch is CancellationError {
            }
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        let rows = try db.query("SELECT run_at FROM _honker_jobs WHERE queue = 'beats' ORDER BY run_at")
        let runAts: [Int64] = rows.compactMap {
            if case .integer(let v) = $0[0] { return v }
            return nil
        }
        XCTAssertTrue((2...5).contains(runAts.count), "\(runAts)")
        XCTAssertEqual(Set(runAts).count, runAts.count, "no boundary twice")
        for (a, b) in zip(runAts, runAts.dropFirst()) { XCTAssertEqual(b - a, 1000) }
    }

    func testAWorkerRunsTheSchedulerByDefault() async throws {
        let db = try Database(path: tempPath())
        try await db.scheduler().add(Schedule("beat", schedule: "@every 1s", queue: "beats"))
        let seen = Seen()
        let quiet = try Worker(db, runScheduler: false)
        try quiet.handle("beats") { (job: Job) in seen.add(job.runAt) }
        let quietRun = Task { try await quiet.run() }
        try await Task.sleep(nanoseconds: 2_200_000_000)
        quietRun.cancel()
        _ = try? await quietRun.value
        XCTAssertEqual(seen.count, 0)
        let worker = try Worker(db)
        try worker.handle("beats") { (job: Job) in seen.add(job.runAt) }
        let run = Task { try await worker.run() }
        try await eventually(10, "two beats") { seen.count >= 2 }
        run.cancel()
        _ = try? await run.value
        for t in seen.all { XCTAssertEqual(Int64((t.timeIntervalSince1970 * 1000).rounded()) % 1000, 0) }
    }
}

/// Dates seen by handlers, from any thread.
private final class Seen: @unchecked Sendable {
    private let lock = NSLock()
    private var dates: [Date] = []
    func add(_ d: Date) { lock.lock(); dates.append(d); lock.unlock() }
    var count: Int { lock.lock(); defer { lock.unlock() }; return dates.count }
    var all: [Date] { lock.lock(); defer { lock.unlock() }; return dates }
}
