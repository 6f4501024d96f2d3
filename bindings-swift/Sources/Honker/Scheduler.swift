// The scheduler: cron and `@every` schedules that put jobs on queues, each
// evaluated in its own IANA time zone, each boundary fired exactly once
// however many processes (or tasks) run the scheduler. Every call runs off
// the caller's thread; `run()` ends when its task is cancelled.
import Foundation
import HonkerNative

/// What boundaries missed while no scheduler ran do (an app suspended, a
/// process down).
public enum CatchUp: String, Sendable {
    /// Late boundaries are counted as missed; none fires.
    case skip
    /// The latest boundary within the window fires once (the default).
    case latest
    /// Every boundary within the window fires, oldest first, up to `catchUpMax`.
    case all
}

/// What a fire does while the schedule's last job is still live.
public enum Overlap: String, Sendable {
    /// Every fire puts a job on the queue (the default).
    case allow
    /// The fire is skipped (counted in `overlapSkipped`).
    case skip
    /// One fire waits until the last job is done; more meanwhile are skipped.
    case bufferOne = "buffer_one"
}

/// Which days a cron with both day fields restricted means.
public enum DayRule: String, Sendable {
    /// Vixie cron's: either field matches (the default).
    case or
    /// Honker's: both must match.
    case and
}

/// A schedule's definition: `schedule` is a cron expression (5 fields, or 6
/// with seconds first; names, `@daily`…, `L`, `W`, `#`) or `"@every 90s"`.
/// Options left nil take the defaults: `timeZone` "UTC", `dayRule` `.or`,
/// `priority` 0, the queue's `maxAttempts`, no `expires`, `catchUp`
/// `.latest` within a day (`catchUpWindow`, seconds), `catchUpMax` 100,
/// `overlap` `.allow`, no `jitter`, no `startAt`/`endAt`.
public struct Schedule: Sendable {
    public var name: String
    public var schedule: String
    public var queue: String
    var payload: Payload?
    public var timeZone: String?
    public var dayRule: DayRule?
    public var priority: Int32?
    public var maxAttempts: UInt32?
    public var expires: TimeInterval?
    public var catchUp: CatchUp?
    public var catchUpWindow: TimeInterval?
    public var catchUpMax: UInt32?
    public var overlap: Overlap?
    public var jitter: TimeInterval?
    public var startAt: Date?
    public var endAt: Date?

    /// A schedule whose jobs carry JSON `null`.
    public init(_ name: String, schedule: String, queue: String, timeZone: String? = nil,
                dayRule: DayRule? = nil, priority: Int32? = nil, maxAttempts: UInt32? = nil,
                expires: TimeInterval? = nil, catchUp: CatchUp? = nil, catchUpWindow: TimeInterval? = nil,
                catchUpMax: UInt32? = nil, overlap: Overlap? = nil, jitter: TimeInterval? = nil,
                startAt: Date? = nil, endAt: Date? = nil) {
        self.name = name
        self.schedule = schedule
        self.queue = queue
        self.timeZone = timeZone
        self.dayRule = dayRule
        self.priority = priority
        self.maxAttempts = maxAttempts
        self.expires = expires
        self.catchUp = catchUp
        self.catchUpWindow = catchUpWindow
        self.catchUpMax = catchUpMax
        self.overlap = overlap
        self.jitter = jitter
        self.startAt = startAt
        self.endAt = endAt
    }

    /// A schedule whose jobs carry `payload` (`Data` as bytes, anything else as JSON).
    public init<P: Encodable>(_ name: String, schedule: String, queue: String, payload: P,
                              timeZone: String? = nil, dayRule: DayRule? = nil, priority: Int32? = nil,
                              maxAttempts: UInt32? = nil, expires: TimeInterval? = nil,
                              catchUp: CatchUp? = nil, catchUpWindow: TimeInterval? = nil,
                              catchUpMax: UInt32? = nil, overlap: Overlap? = nil,
                              jitter: TimeInterval? = nil, startAt: Date? = nil, endAt: Date? = nil) throws {
        self.init(name, schedule: schedule, queue: queue, timeZone: timeZone, dayRule: dayRule,
                  priority: priority, maxAttempts: maxAttempts, expires: expires, catchUp: catchUp,
                  catchUpWindow: catchUpWindow, catchUpMax: catchUpMax, overlap: overlap, jitter: jitter,
                  startAt: startAt, endAt: endAt)
        self.payload = try encode(payload)
    }

    func native() throws -> ScheduleDef {
        ScheduleDef(
            name: name, spec: schedule, queue: queue, payload: payload, timeZone: timeZone,
            dayRule: dayRule?.rawValue, priority: priority, maxAttempts: maxAttempts,
            expiresMs: try millis("expires", expires), catchUp: catchUp?.rawValue,
            catchUpWindowMs: try millis("catchUpWindow", catchUpWindow), catchUpMax: catchUpMax,
            overlap: overlap?.rawValue, jitterMs: try millis("jitter", jitter),
            startAtMs: try startAt.map { try epochMillis("startAt", $0) },
            endAtMs: try endAt.map { try epochMillis("endAt", $0) })
    }
}

/// A schedule as stored in the file, with its state.
public struct ScheduleInfo: Sendable, Equatable {
    // <generated by scripts/facts.py: record-ScheduleInfo>
    /// Its unique name.
    public let name: String
    /// The queue its jobs go on.
    public let queue: String
    /// Its rule: a cron expression, a macro, or `@every <duration>`.
    public let spec: String
    /// The IANA time zone its cron is evaluated in.
    public let timeZone: String
    /// `or` (Vixie's day-of-month OR day-of-week) or `and` (Honker's).
    public let dayRule: String
    let payload: Payload
    /// The fired jobs' priority.
    public let priority: Int32
    /// The fired jobs' attempts (none: the queue's).
    public let maxAttempts: UInt32?
    /// A fired job not started this long after its fire time expires.
    public let expires: TimeInterval?
    /// `skip`, `latest` or `all`: what boundaries missed while no scheduler ran do.
    public let catchUp: String
    /// Boundaries older than this are never fired, only counted as missed.
    public let catchUpWindow: TimeInterval
    /// At most this many fires in one catch-up under `all`.
    public let catchUpMax: UInt32
    /// `allow`, `skip` or `buffer_one`: what a fire does while the last job is live.
    public let overlap: String
    /// Each job runs up to this much after its boundary (stable per boundary).
    public let jitter: TimeInterval
    /// No boundary before this fires.
    public let startAt: Date?
    /// No boundary after this fires.
    public let endAt: Date?
    /// Whether it is paused.
    public let paused: Bool
    /// The note given when it was paused.
    public let note: String?
    /// The next boundary due (none once it has ended).
    public let nextFireAt: Date?
    /// The last boundary fired.
    public let lastFireAt: Date?
    /// The job of the last fire.
    public let lastJobId: Int64?
    /// A boundary held back by `buffer_one` until the last job is done.
    public let bufferedAt: Date?
    /// Boundaries fired.
    public let fires: UInt64
    /// Boundaries missed (older than the window, or dropped by the catch-up policy).
    public let missed: UInt64
    /// Boundaries skipped by the overlap policy.
    public let overlapSkipped: UInt64

    init(_ i: HonkerNative.ScheduleInfo) {
        name = i.name
        queue = i.queue
        spec = i.spec
        timeZone = i.timeZone
        dayRule = i.dayRule
        payload = i.payload
        priority = i.priority
        maxAttempts = i.maxAttempts
        expires = i.expiresMs.map { TimeInterval($0) / 1000 }
        catchUp = i.catchUp
        catchUpWindow = TimeInterval(i.catchUpWindowMs) / 1000
        catchUpMax = i.catchUpMax
        overlap = i.overlap
        jitter = TimeInterval(i.jitterMs) / 1000
        startAt = i.startAtMs.map(date)
        endAt = i.endAtMs.map(date)
        paused = i.paused
        note = i.note
        nextFireAt = i.nextFireAtMs.map(date)
        lastFireAt = i.lastFireAtMs.map(date)
        lastJobId = i.lastJobId
        bufferedAt = i.bufferedAtMs.map(date)
        fires = i.fires
        missed = i.missed
        overlapSkipped = i.overlapSkipped
    }
    // </generated: record-ScheduleInfo>

    public func payload<T: Decodable>(as type: T.Type) throws -> T {
        try decode(payload, as: type)
    }
}

/// One fire: a schedule's boundary and the job it put on the queue.
public struct Fire: Sendable, Equatable {
    // <generated by scripts/facts.py: record-Fire>
    /// The schedule's name.
    public let schedule: String
    /// The queue.
    public let queue: String
    /// The boundary: the job's scheduled time (before jitter).
    public let fireAt: Date
    /// The job, if one was put on the queue.
    public let jobId: Int64?

    init(_ i: HonkerNative.Fire) {
        schedule = i.schedule
        queue = i.queue
        fireAt = date(i.fireAtMs)
        jobId = i.jobId
    }
    // </generated: record-Fire>
}

/// What `Scheduler.sync` did, by schedule name.
public struct SyncReport: Sendable, Equatable {
    public let added: [String]
    public let changed: [String]
    public let removed: [String]
}

extension Database {
    /// The schedules of this file.
    public func scheduler() -> Scheduler {
        Scheduler(native.scheduler())
    }
}

/// The schedules of one file: rows of it, each evaluated in its own IANA
/// time zone (never the device's), each boundary fired once. DST follows
/// Vixie cron: a fixed-time schedule whose wall time is skipped fires right
/// after the jump, and once in a repeated hour. Thread-safe.
public final class Scheduler: @unchecked Sendable {
    public let native: HonkerNative.Scheduler

    init(_ native: HonkerNative.Scheduler) {
        self.native = native
    }

    /// Registers `schedule` (an upsert: the same definition again changes
    /// nothing and keeps its next fire); whether anything changed.
    @discardableResult
    public func add(_ schedule: Schedule) async throws -> Bool {
        let (native, def) = (self.native, try schedule.native())
        return try await offThread { try native.add(def: def) }
    }

    /// Makes the file hold exactly these schedules, in one transaction.
    @discardableResult
    public func sync(_ schedules: [Schedule]) async throws -> SyncReport {
        let (native, defs) = (self.native, try schedules.map { try $0.native() })
        let r = try await offThread { try native.sync(defs: defs) }
        return SyncReport(added: r.added, changed: r.changed, removed: r.removed)
    }

    /// Removes `name` and its fire records (its jobs stay); whether there was one.
    @discardableResult
    public func remove(_ name: String) async throws -> Bool {
        let native = self.native
        return try await offThread { try native.remove(name: name) }
    }

    /// Pauses `name` (its boundaries are neither fired nor missed until it resumes).
    public func pause(_ name: String, note: String? = nil) async throws {
        let native = self.native
        try await offThread { try native.pause(name: name, note: note) }
    }

    /// Resumes `name` from its first boundary after now.
    public func resume(_ name: String) async throws {
        let native = self.native
        try await offThread { try native.resume(name: name) }
    }

    /// Fires `name` now, whatever its rule says: the job's id.
    @discardableResult
    public func triggerNow(_ name: String) async throws -> Int64 {
        let native = self.native
        return try await offThread { try native.triggerNow(name: name) }
    }

    /// One schedule with its state, or nil.
    public func get(_ name: String) async throws -> ScheduleInfo? {
        let native = self.native
        return try await offThread { try native.get(name: name) }.map(ScheduleInfo.init)
    }

    /// Every schedule with its state, by name.
    public func list() async throws -> [ScheduleInfo] {
        let native = self.native
        return try await offThread { try native.list() }.map(ScheduleInfo.init)
    }

    /// The next `count` boundaries of `name`.
    public func nextFires(_ name: String, count: UInt32 = 5) async throws -> [Date] {
        let native = self.native
        return try await offThread { try native.nextFires(name: name, n: count) }.map(date)
    }

    /// Fires what is due now (writes nothing when nothing is due).
    @discardableResult
    public func tick() async throws -> [Fire] {
        let native = self.native
        return try await offThread { try native.tick() }.map(Fire.init)
    }

    /// Fires schedules as they come due, sleeping until the next boundary
    /// or a change, until the task is cancelled (then it throws
    /// `CancellationError`). Safe in every process and task: each boundary
    /// fires once.
    public func run() async throws {
        let runner = native.runner()
        try await withTaskCancellationHandler {
            while !Task.isCancelled && !runner.isClosed() {
                _ = try await waitOffThread { try runner.next(waitMs: 3_600_000) }
            }
        } onCancel: {
            runner.close()
        }
        runner.close()
        try Task.checkCancellation()
    }
}
