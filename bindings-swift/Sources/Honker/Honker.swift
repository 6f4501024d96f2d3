// Honker for Swift: durable job queues inside your app's own SQLite file.
// The job is written in the same transaction as the row that caused it (the
// transactional outbox), so both commit or neither does — and an outbox that
// survives the app being killed syncs later.
//
// This file holds the idioms (Encodable payloads, async/await, AsyncSequence,
// Date/TimeInterval); behaviour lives in the Rust core behind HonkerNative.
// Every `async` method runs its native call on a background thread, never on
// the caller's. Semantics are at-least-once: make handlers idempotent.

import Foundation
import HonkerNative

/// Every honker error, one case per stable code (`.LeaseLost(message:)` is
/// `LEASE_LOST`); `error.code` gives the code string.
public typealias HonkerError = HonkerNative.HonkerError
public typealias SqlValue = HonkerNative.SqlValue
public typealias QueueStats = HonkerNative.QueueStats
public typealias Enqueued = HonkerNative.Enqueued
public typealias MaintenanceReport = HonkerNative.MaintenanceReport
/// A clock that only moves when told to (tests): `Database(path:clock:)`.
public typealias ManualClock = HonkerNative.ManualClock

extension HonkerError {
    /// The stable code shared by every language and the SQL functions.
    public var code: String { errorCode(error: self) }

    /// SQLite's (extended) result code for an `SQLITE` error (`19`
    /// constraint, `2067` unique constraint, `10` I/O…), nil for the others.
    public var sqliteCode: Int32? {
        if case .Sqlite(_, let code) = self { return code }
        return nil
    }
}

// `description` (core's `CODE: message`) is generated; declaring the
// conformance makes `errorDescription`, and so `localizedDescription` and
// `print(error)`, use it instead of a dump of the enum.
extension HonkerError: CustomStringConvertible {}

// SQL parameters from Swift literals: `tx.execute(sql, [42, "paid", nil])`.
extension SqlValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral {
    public init(integerLiteral value: Int64) { self = .integer(value: value) }
    public init(floatLiteral value: Double) { self = .real(value: value) }
    public init(stringLiteral value: String) { self = .text(value: value) }
    public init(booleanLiteral value: Bool) { self = .integer(value: value ? 1 : 0) }
    public init(nilLiteral: ()) { self = .null }
}

/// Every stable error code.
public let honkerErrorCodes: [String] = errorCodes()

/// The library version.
public let honkerVersion: String = version()

// ----- helpers ---------------------------------------------------------------

/// Runs a blocking native call on a background thread and awaits it.
func offThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global(qos: .utility).async {
            continuation.resume(with: Result { try body() })
        }
    }
}

/// Runs a blocking *wait* (a claim, a read or a lock's acquire that sleeps
/// until a commit, `waitResult`, a runner's `next`) on a thread of its own,
/// never on the dispatch queues: a wait lasts as long as its timeout, and
/// each one held on a dispatch thread takes that thread from every other
/// task (Swift's tasks run on those queues on Linux) and from all of the
/// app's GCD work, which Apple platforms cap at 64 threads. With 600 idle
/// consumers on them, a claimed job's hand-off waited 120 s on Linux.
///
/// The threads are kept for the next wait (``WaitThreads``): a consumer
/// waiting a second at a time started a new OS thread every second (issue 53).
func waitOffThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        WaitThreads.shared.run { continuation.resume(with: Result { try body() }) }
    }
}

/// Threads for waits, each running one wait at a time and kept for the
/// next: a wait never queues behind another (a new thread starts when none
/// is idle, so there are as many as there are waits at once), and a thread
/// idle for 30 s ends, so an app that stops waiting keeps none.
final class WaitThreads: @unchecked Sendable {
    static let shared = WaitThreads()
    private let cond = NSCondition()
    private var pending: [@Sendable () -> Void] = []
    private var idle = 0
    /// How long an idle thread waits for another wait before it ends.
    static let keep: TimeInterval = 30

    func run(_ job: @escaping @Sendable () -> Void) {
        cond.lock()
        pending.append(job)
        let spawn = idle < pending.count
        if !spawn { cond.signal() }
        cond.unlock()
        if spawn {
            let thread = Thread { [self] in loop() }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    private func loop() {
        cond.lock()
        while true {
            while pending.isEmpty {
                idle += 1
                let woken = cond.wait(until: Date().addingTimeInterval(Self.keep))
                idle -= 1
                if !woken && pending.isEmpty {
                    cond.unlock()
                    return
                }
            }
            let job = pending.removeFirst()
            cond.unlock()
            job()
            cond.lock()
        }
    }
}

/// Runs a blocking `body` on a thread of its own, not the shared pool: for
/// a wait that lasts as long as work that the pool's threads must finish
/// (a held lock's watch lasts until its release, which runs on the pool).
func onThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// Runs a short native call that may write: right here on the caller's
/// thread when it can finish without waiting for any lock (an uncontended
/// write in WAL: tens of µs, where the two thread hops cost 40–55 µs), or,
/// where it would wait, on a background thread as `offThread` does — so the
/// caller's thread (the main actor's, in an app) never waits on a lock.
/// Where waiting is forbidden a call fails at once with `BUSY`, having
/// changed nothing (core's `without_waiting`), and is then run again off
/// the thread. Off under `durabilityFull`, where every commit waits for an
/// fsync.
func soon<T: Sendable>(_ inline: Bool, isolation: isolated (any Actor)? = #isolation,
                       _ body: @escaping @Sendable () throws -> T) async throws -> T {
    if inline {
        // No suspension point until the flag is restored: same thread.
        let previous = setWaitingForbidden(forbidden: true)
        do {
            let value = try body()
            _ = setWaitingForbidden(forbidden: previous)
            return value
        } catch HonkerError.Busy {
            _ = setWaitingForbidden(forbidden: previous)
        } catch {
            _ = setWaitingForbidden(forbidden: previous)
            throw error
        }
    }
    return try await offThread(body)
}

/// Seconds as the core's milliseconds: a finite, non-negative number, or
/// `INVALID_ARGUMENT` naming the parameter — never a trap (infinity, NaN, a
/// value past UInt64) and never a silent clamp (a negative delay), as on
/// every other surface.
func millis(_ name: String, _ seconds: TimeInterval) throws -> UInt64 {
    let ms = (seconds * 1000).rounded()
    guard ms.isFinite, ms >= 0, ms < 18_446_744_073_709_551_616.0 else {
        throw HonkerError.InvalidArgument(
            message: "\(name) must be a finite, non-negative number of seconds, got \(seconds)")
    }
    return UInt64(ms)
}

func millis(_ name: String, _ seconds: TimeInterval?) throws -> UInt64? {
    try seconds.map { try millis(name, $0) }
}

/// A Date as ms since the epoch, or `INVALID_ARGUMENT`.
func epochMillis(_ name: String, _ date: Date) throws -> Int64 {
    let ms = (date.timeIntervalSince1970 * 1000).rounded()
    guard ms.isFinite, ms > -9.2e18, ms < 9.2e18 else {
        throw HonkerError.InvalidArgument(message: "\(name) is out of range: \(date)")
    }
    return Int64(ms)
}

/// A stored trace context (the JSON object of the W3C headers) as a
/// dictionary: `traceparent`, and `tracestate` when there is one.
func traceCarrier(_ json: String) -> [String: String]? {
    guard let data = json.data(using: .utf8),
          let object = try? JSONSerialization.jsonObject(with: data) as? [String: String]
    else { return nil }
    return object
}

func date(_ ms: Int64) -> Date {
    Date(timeIntervalSince1970: TimeInterval(ms) / 1000)
}

/// A payload as core takes it: `Data` as bytes, anything else as JSON text
/// (PayloadEncoder.swift: JSONEncoder's output with sorted keys).
func encode<P: Encodable>(_ payload: P) throws -> Payload {
    if P.self == Data.self {
        return .bytes(data: payload as! Data)
    }
    var text: [UInt8] = []
    text.reserveCapacity(128)
    try encodeJSON(payload, into: &text)
    return .json(text: String(decoding: text, as: UTF8.self))
}

/// `payload` as JSON text appended to `out` (a batch's payloads go into one
/// buffer: Packed.swift).
func encodeJSON<P: Encodable>(_ payload: P, into out: inout [UInt8]) throws {
    do {
        try PayloadJSON.encode(payload, into: &out)
    } catch let e as EncodingError {
        // A value JSON cannot carry (an infinite or NaN Double): the same
        // coded error as every other surface, not Foundation's own.
        throw HonkerError.InvalidArgument(message: "payload is not JSON-encodable: \(e)")
    }
}

func decode<T: Decodable>(_ payload: Payload, as type: T.Type) throws -> T {
    switch payload {
    case .json(let text):
        return try JSONDecoder().decode(T.self, from: Data(text.utf8))
    case .bytes(let data):
        if let d = data as? T { return d }
        return try JSONDecoder().decode(T.self, from: data)
    }
}

// ----- database ----------------------------------------------------------------

/// An open honker file. Thread-safe; share it.
public final class Database: @unchecked Sendable {
    public let native: HonkerNative.Database
    /// Whether short writes may run on the caller's thread (`soon`).
    let inline: Bool

    /// Opens (creating if needed) the file at `path`: WAL mode, honker's
    /// tables migrated, your own tables left alone. An option left `nil`
    /// takes core's default, the same on every surface: `durabilityFull`
    /// fsyncs every commit (default: survives a crash of the app, not of the
    /// OS), `busyTimeout` 10 s, `readers` 4, `maxPayloadBytes` 1 MiB.
    public init(path: String, durabilityFull: Bool? = nil, busyTimeout: TimeInterval? = nil,
                readers: UInt32? = nil, maxPayloadBytes: UInt64? = nil,
                clock: ManualClock? = nil) throws {
        let options = OpenOptions(durability: durabilityFull.map { $0 ? "full" : "normal" },
                                  busyTimeoutMs: try millis("busyTimeout", busyTimeout),
                                  readers: readers, maxPayloadBytes: maxPayloadBytes)
        inline = durabilityFull != true
        if let clock {
            native = try HonkerNative.Database.openWithClock(path: path, options: options, clock: clock)
        } else {
            native = try HonkerNative.Database.open(path: path, options: options)
        }
    }

    public var path: String { native.path() }

    // <generated by scripts/facts.py: verbs-Database>
    /// Pauses every queue, as `Queue.pause` does one, until `resume_all` (a queue's own
    /// pause is apart: resuming all leaves it paused).
    ///
    /// `note`: Shown with the pause (`honker status`): why, who, until when (up to 512
    /// bytes).
    public func pauseAll(note: String? = nil,
        isolation: isolated (any Actor)? = #isolation) async throws {
        let native = self.native
        try await soon(inline) { try native.pauseAll(options: PauseArgs(note: note)) }
    }

    /// A handle on the queue `name` (making it writes nothing; it reads the queue's
    /// settings). Each option not given here comes from the queue's settings in the file
    /// (`Queue.configure`, by any process or language), else its default. Options given
    /// here are this handle's only.
    ///
    /// `lease`: The lease a claim gives (60 s by default).
    ///
    /// `maxAttempts`: Attempts before a job is dead-lettered (1 to 1,000; 3 by default).
    ///
    /// `backoffBase`: The first retry's delay (1 s by default), doubled at each attempt.
    ///
    /// `backoffMax`: The largest retry delay (1 h by default).
    ///
    /// `backoffJitter`: The randomised fraction of a retry's delay, 0 to 1 (0.5 by
    /// default).
    public func queue(_ name: String, lease: TimeInterval? = nil, maxAttempts: UInt32? = nil, backoffBase: TimeInterval? = nil, backoffMax: TimeInterval? = nil, backoffJitter: Double? = nil) throws -> Queue {
        Queue(inline: inline, try native.queue(name: name, options: QueueArgs(lease: lease, maxAttempts: maxAttempts, backoffBase: backoffBase, backoffMax: backoffMax, backoffJitter: backoffJitter)))
    }
    // </generated: verbs-Database>

    /// Runs `body` in a write transaction: commits when it returns, rolls
    /// back when it throws. Pass `tx:` to honker calls inside it so they
    /// commit with your own `tx.execute(...)` writes.
    @discardableResult
    public func transaction<T>(_ body: (Transaction) throws -> T) throws -> T {
        let tx = Transaction(try native.begin())
        do {
            let value = try body(tx)
            try tx.native.commit()
            return value
        } catch {
            try? tx.native.rollback()
            throw error
        }
    }

    /// `transaction` for async code: waits for the writer (another
    /// transaction of this process, another process's lock) and runs `body`
    /// on a background thread, never on the caller's (the main actor stays
    /// responsive). `body` itself is synchronous: a transaction holds the
    /// file's one writer, so nothing in it should wait on anything else.
    @discardableResult
    public func transaction<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        try await offThread { try self.transaction(body) }
    }

    /// Registers honker's SQL functions (`honker_enqueue`, `honker_ack`, …;
    /// docs/sql.md) on a connection to this file that your app already
    /// holds, so that its own transactions can call them: with GRDB,
    /// `try db.registerFunctions(on: grdbDb.sqliteConnection!)` inside
    /// `dbPool.write { }` (or in `Configuration.prepareDatabase`, once per
    /// connection). They stay registered until that connection closes.
    /// honker runs on the system SQLite, the library GRDB and Core Data use,
    /// so this is the same library's handle; iOS cannot load extensions,
    /// and this is the route instead. A handle to another file throws
    /// `.InvalidArgument`. A commit on that connection wakes this process's
    /// consumers through the file watcher.
    public func registerFunctions(on connection: OpaquePointer) throws {
        try native.registerFunctions(handle: UInt64(UInt(bitPattern: connection)))
    }

    /// Starts a transaction that you finish yourself with `commit()` or
    /// `rollback()`, for work that cannot sit in one closure. Prefer
    /// `transaction { }`: a forgotten commit keeps the writer held.
    public func begin() throws -> Transaction {
        Transaction(try native.begin())
    }

    /// Runs one statement of your own in its own transaction.
    @discardableResult
    public func execute(_ sql: String, _ params: [SqlValue] = []) throws -> UInt64 {
        try native.execute(sql: sql, params: params)
    }

    /// A read-only query: its rows, by column name and position.
    public func query(_ sql: String, _ params: [SqlValue] = []) throws -> [Row] {
        Row.all(try native.query(sql: sql, params: params))
    }

    /// Every queue's metrics (see `Queue.metrics()`), by name.
    public func metrics() async throws -> [QueueMetrics] {
        let native = self.native
        return try QueueMetrics.decode(list: try await offThread { try native.metricsJson() })
    }

    /// Every queue's metrics in Prometheus's text format, for an app's own
    /// `/metrics` route (`honker metrics DB` prints the same).
    public func metricsText() async throws -> String {
        let native = self.native
        return try await offThread { try native.metricsText() }
    }

    /// Lifts the pause of all queues (`pauseAll`), not a queue's own;
    /// whether there was one.
    @discardableResult
    public func resumeAll(isolation: isolated (any Actor)? = #isolation) async throws -> Bool {
        let native = self.native
        return try await soon(inline) { try native.resumeAll() }
    }

    /// Prunes finished jobs and results past retention; what it removed, by
    /// kind.
    public func maintain() async throws -> MaintenanceReport {
        let native = self.native
        return try await offThread { try native.maintain() }
    }

    public func close() throws {
        try native.close()
    }
}

/// One row of a query. Columns keep their order and their names, repeated
/// ones included (`SELECT *` over a join has two `id`s): `row[0]` by
/// position, `row["id"]` for the first column of that name, and
/// `row.values(named: "id")` for all of them.
public struct Row: Equatable, Hashable, Sendable, CustomStringConvertible {
    public let columns: [String]
    public let values: [SqlValue]

    public init(columns: [String], values: [SqlValue]) {
        self.columns = columns
        self.values = values
    }

    /// The value at `index`, counted from 0 (`index` must be below
    /// `values.count`, as for an array).
    public subscript(index: Int) -> SqlValue {
        values[index]
    }

    /// The value of the first column named `name`, or nil if none is.
    public subscript(name: String) -> SqlValue? {
        columns.firstIndex(of: name).map { values[$0] }
    }

    /// The values of every column named `name`, in column order.
    public func values(named name: String) -> [SqlValue] {
        zip(columns, values).filter { $0.0 == name }.map(\.1)
    }

    public var description: String {
        "Row(" + zip(columns, values).map { "\($0): \($1)" }.joined(separator: ", ") + ")"
    }

    static func all(_ rows: Rows) -> [Row] {
        rows.rows.map { Row(columns: rows.columns, values: $0) }
    }
}

/// An open write transaction (see `Database.transaction`).
public final class Transaction: @unchecked Sendable {
    public let native: HonkerNative.Transaction

    init(_ native: HonkerNative.Transaction) {
        self.native = native
    }

    @discardableResult
    public func execute(_ sql: String, _ params: [SqlValue] = []) throws -> UInt64 {
        try native.execute(sql: sql, params: params)
    }

    /// Sees the transaction's own uncommitted writes.
    public func query(_ sql: String, _ params: [SqlValue] = []) throws -> [Row] {
        Row.all(try native.query(sql: sql, params: params))
    }

    public func commit() throws {
        try native.commit()
    }

    /// Rolls back; a no-op on a finished transaction.
    public func rollback() throws {
        try native.rollback()
    }
}

// ----- queues and jobs ---------------------------------------------------------

/// A job in any state (`Queue.job(_:)`, `deadLetters`).
public struct JobRecord: Sendable {
    // <generated by scripts/facts.py: record-JobInfo>
    /// The job's id.
    public let id: Int64
    /// Its queue.
    public let queue: String
    /// Its logical state (a scheduled job that is due reports `ready`).
    public let state: String
    let payload: Payload
    /// Its priority (higher first).
    public let priority: Int32
    /// When it is (or was) due.
    public let runAt: Date
    /// Claims so far.
    public let attempts: UInt32
    /// Attempts allowed.
    public let maxAttempts: UInt32
    /// Its dedupe key, if any.
    public let dedupeKey: String?
    /// Its concurrency key, if any (what `max_running_per_key` counts).
    public let concurrencyKey: String?
    /// When it expires unless started, if it can.
    public let expiresAt: Date?
    /// When it was enqueued.
    public let createdAt: Date
    /// The worker holding (or that last held) it.
    public let workerId: String?
    /// The last error, or the cancel reason.
    public let lastError: String?
    /// When the current lease lapses (running jobs only).
    public let leaseExpiresAt: Date?
    /// When it finished (finished jobs only).
    public let finishedAt: Date?
    /// The producer's W3C trace context (`traceparent`, `tracestate`), if it had one.
    public let traceContext: [String: String]?

    init(_ i: HonkerNative.JobInfo) {
        id = i.id
        queue = i.queue
        state = i.state
        payload = i.payload
        priority = i.priority
        runAt = date(i.runAtMs)
        attempts = i.attempts
        maxAttempts = i.maxAttempts
        dedupeKey = i.dedupeKey
        concurrencyKey = i.concurrencyKey
        expiresAt = i.expiresAtMs.map(date)
        createdAt = date(i.createdAtMs)
        workerId = i.workerId
        lastError = i.lastError
        leaseExpiresAt = i.leaseExpiresAtMs.map(date)
        finishedAt = i.finishedAtMs.map(date)
        traceContext = i.traceContext.flatMap(traceCarrier)
    }
    // </generated: record-JobInfo>

    public func payload<T: Decodable>(as type: T.Type) throws -> T {
        try decode(payload, as: type)
    }
}

/// A handle on one queue. Thread-safe.
public final class Queue: @unchecked Sendable {
    public let native: HonkerNative.Queue
    /// See `soon`.
    let inline: Bool

    init(inline: Bool, _ native: HonkerNative.Queue) {
        self.inline = inline
        self.native = native
    }

    public var name: String { native.name() }

    // <generated by scripts/facts.py: verbs-Queue>
    /// Adds a job (its payload JSON, or bytes). With `tx`, the job commits or rolls back
    /// with your transaction (the outbox).
    ///
    /// `delay`: Run no earlier than this long from now (not with `runAt`).
    ///
    /// `runAt`: Run no earlier than this time (a past time means now; not with `delay`).
    ///
    /// `priority`: Higher runs first among due jobs (any 32-bit integer).
    ///
    /// `maxAttempts`: Attempts before the job is dead-lettered (1 to 1,000); the queue's by
    /// default.
    ///
    /// `dedupeKey`: While a live (ready, scheduled or running) job of this queue holds this
    /// key, enqueue returns that job (`existing`) instead of adding one (up to 512 bytes).
    ///
    /// `dedupeByPayload`: The dedupe key is (also) the payload's digest, of its JSON value
    /// (keys in any order): the same payload is one job.
    ///
    /// `unique`: How the dedupe key holds: "live" (while its job is live: the default),
    /// "period" (also for `uniqueFor` after it completed), "throttle" (also for `uniqueFor`
    /// after this enqueue), "debounce" (a later enqueue replaces the pending job's payload,
    /// run time and priority).
    ///
    /// `uniqueFor`: The period of `unique` "period" or "throttle" (1 ms to 366 days).
    ///
    /// `expires`: A job not started this long after enqueue expires instead of running.
    ///
    /// `concurrencyKey`: The key the queue's `max_running_per_key` counts: at most that
    /// many jobs of one key run at once, in every process (up to 512 bytes).
    @discardableResult
    public func enqueue<P: Encodable>(_ payload: P, delay: TimeInterval? = nil, runAt: Date? = nil, priority: Int32 = 0, maxAttempts: UInt32? = nil, dedupeKey: String? = nil, dedupeByPayload: Bool = false, unique: String? = nil, uniqueFor: TimeInterval? = nil, expires: TimeInterval? = nil, concurrencyKey: String? = nil,
        tx: Transaction? = nil) throws -> Enqueued {
        try enqueueEncoded(try Packed.payloads([payload]), EnqueueArgs(delay: delay, runAt: runAt?.timeIntervalSince1970, priority: priority, maxAttempts: maxAttempts, dedupeKey: dedupeKey, dedupeByPayload: dedupeByPayload, unique: unique, uniqueFor: uniqueFor, expires: expires, concurrencyKey: concurrencyKey), tx: tx)
    }

    /// `enqueue` for async code: off the caller's thread where it would wait.
    @discardableResult
    public func enqueue<P: Encodable & Sendable>(_ payload: P, delay: TimeInterval? = nil, runAt: Date? = nil, priority: Int32 = 0, maxAttempts: UInt32? = nil, dedupeKey: String? = nil, dedupeByPayload: Bool = false, unique: String? = nil, uniqueFor: TimeInterval? = nil, expires: TimeInterval? = nil, concurrencyKey: String? = nil,
        isolation: isolated (any Actor)? = #isolation) async throws -> Enqueued {
        try await enqueueEncoded(try Packed.payloads([payload]), EnqueueArgs(delay: delay, runAt: runAt?.timeIntervalSince1970, priority: priority, maxAttempts: maxAttempts, dedupeKey: dedupeKey, dedupeByPayload: dedupeByPayload, unique: unique, uniqueFor: uniqueFor, expires: expires, concurrencyKey: concurrencyKey))
    }

    /// `enqueue` on a connection to this file that your app opened itself
    /// (GRDB's `db.sqliteConnection`), inside whatever transaction it has open
    /// there: it commits or rolls back with your rows, in GRDB's own
    /// `write { db in … }`; in autocommit mode it is its own transaction. The
    /// connection must be open, on this file, and not used by another thread
    /// during the call (inside GRDB's `write` closure it is yours).
    @discardableResult
    public func enqueue<P: Encodable>(_ payload: P, on connection: OpaquePointer, delay: TimeInterval? = nil, runAt: Date? = nil, priority: Int32 = 0, maxAttempts: UInt32? = nil, dedupeKey: String? = nil, dedupeByPayload: Bool = false, unique: String? = nil, uniqueFor: TimeInterval? = nil, expires: TimeInterval? = nil, concurrencyKey: String? = nil) throws -> Enqueued {
        try enqueueEncoded(try Packed.payloads([payload]), EnqueueArgs(delay: delay, runAt: runAt?.timeIntervalSince1970, priority: priority, maxAttempts: maxAttempts, dedupeKey: dedupeKey, dedupeByPayload: dedupeByPayload, unique: unique, uniqueFor: uniqueFor, expires: expires, concurrencyKey: concurrencyKey), on: connection)
    }

    /// Adds one job per payload, all in one transaction (up to 10,000), each with the
    /// options.
    ///
    /// `delay`: Run no earlier than this long from now (not with `runAt`).
    ///
    /// `runAt`: Run no earlier than this time (a past time means now; not with `delay`).
    ///
    /// `priority`: Higher runs first among due jobs (any 32-bit integer).
    ///
    /// `maxAttempts`: Attempts before the job is dead-lettered (1 to 1,000); the queue's by
    /// default.
    ///
    /// `dedupeKey`: While a live (ready, scheduled or running) job of this queue holds this
    /// key, enqueue returns that job (`existing`) instead of adding one (up to 512 bytes).
    ///
    /// `dedupeByPayload`: The dedupe key is (also) the payload's digest, of its JSON value
    /// (keys in any order): the same payload is one job.
    ///
    /// `unique`: How the dedupe key holds: "live" (while its job is live: the default),
    /// "period" (also for `uniqueFor` after it completed), "throttle" (also for `uniqueFor`
    /// after this enqueue), "debounce" (a later enqueue replaces the pending job's payload,
    /// run time and priority).
    ///
    /// `uniqueFor`: The period of `unique` "period" or "throttle" (1 ms to 366 days).
    ///
    /// `expires`: A job not started this long after enqueue expires instead of running.
    ///
    /// `concurrencyKey`: The key the queue's `max_running_per_key` counts: at most that
    /// many jobs of one key run at once, in every process (up to 512 bytes).
    @discardableResult
    public func enqueueMany<P: Encodable>(_ payloads: [P], delay: TimeInterval? = nil, runAt: Date? = nil, priority: Int32 = 0, maxAttempts: UInt32? = nil, dedupeKey: String? = nil, dedupeByPayload: Bool = false, unique: String? = nil, uniqueFor: TimeInterval? = nil, expires: TimeInterval? = nil, concurrencyKey: String? = nil,
        tx: Transaction? = nil) throws -> [Enqueued] {
        try enqueueManyEncoded(try Packed.payloads(payloads), EnqueueArgs(delay: delay, runAt: runAt?.timeIntervalSince1970, priority: priority, maxAttempts: maxAttempts, dedupeKey: dedupeKey, dedupeByPayload: dedupeByPayload, unique: unique, uniqueFor: uniqueFor, expires: expires, concurrencyKey: concurrencyKey), tx: tx)
    }

    /// `enqueueMany` for async code: off the caller's thread where it would wait.
    @discardableResult
    public func enqueueMany<P: Encodable & Sendable>(_ payloads: [P], delay: TimeInterval? = nil, runAt: Date? = nil, priority: Int32 = 0, maxAttempts: UInt32? = nil, dedupeKey: String? = nil, dedupeByPayload: Bool = false, unique: String? = nil, uniqueFor: TimeInterval? = nil, expires: TimeInterval? = nil, concurrencyKey: String? = nil,
        isolation: isolated (any Actor)? = #isolation) async throws -> [Enqueued] {
        try await enqueueManyEncoded(try Packed.payloads(payloads), EnqueueArgs(delay: delay, runAt: runAt?.timeIntervalSince1970, priority: priority, maxAttempts: maxAttempts, dedupeKey: dedupeKey, dedupeByPayload: dedupeByPayload, unique: unique, uniqueFor: uniqueFor, expires: expires, concurrencyKey: concurrencyKey))
    }

    /// Stores the queue's settings in the file, for every process and language: handles
    /// made afterwards (`db.queue(name)`, a worker's) use them where they were not given
    /// options of their own. What is not named here stays as stored. Set them once, where
    /// the queue is defined (a lease given only to one process's handle is not seen by a
    /// worker elsewhere, which would claim with the default).
    ///
    /// `lease`: The lease a claim gives (60 s by default).
    ///
    /// `maxAttempts`: Attempts before a job is dead-lettered (1 to 1,000; 3 by default).
    ///
    /// `backoffBase`: The first retry's delay (1 s by default), doubled at each attempt.
    ///
    /// `backoffMax`: The largest retry delay (1 h by default).
    ///
    /// `backoffJitter`: The randomised fraction of a retry's delay, 0 to 1 (0.5 by
    /// default).
    public func configure(lease: TimeInterval? = nil, maxAttempts: UInt32? = nil, backoffBase: TimeInterval? = nil, backoffMax: TimeInterval? = nil, backoffJitter: Double? = nil,
        isolation: isolated (any Actor)? = #isolation) async throws {
        let native = self.native
        try await soon(inline) { try native.configure(options: QueueArgs(lease: lease, maxAttempts: maxAttempts, backoffBase: backoffBase, backoffMax: backoffMax, backoffJitter: backoffJitter)) }
    }

    /// Pauses the queue for every process and language until `resume`: no claim returns its
    /// jobs (waiting claims and workers keep waiting), running jobs finish, enqueues and
    /// the scheduler go on. Stored in the file, so it survives restarts.
    ///
    /// `note`: Shown with the pause (`honker status`): why, who, until when (up to 512
    /// bytes).
    public func pause(note: String? = nil,
        isolation: isolated (any Actor)? = #isolation) async throws {
        let native = self.native
        try await soon(inline) { try native.pause(options: PauseArgs(note: note)) }
    }

    /// Caps how many of the queue's jobs run at once, for every process and language; a cap
    /// not given is lifted. Each claim counts the jobs holding an unexpired lease in its
    /// own transaction. A holder whose lease lapsed may still be running: its slot is free
    /// once the lease ends (so is a killed holder's).
    ///
    /// `maxRunning`: At most this many of the queue's jobs run at once (1 to 1,000,000).
    ///
    /// `maxRunningPerKey`: At most this many jobs of one `concurrency_key` run at once (1
    /// to 1,000,000).
    public func limitConcurrency(maxRunning: UInt32? = nil, maxRunningPerKey: UInt32? = nil,
        isolation: isolated (any Actor)? = #isolation) async throws {
        let native = self.native
        try await soon(inline) { try native.limitConcurrency(options: ConcurrencyArgs(maxRunning: maxRunning, maxRunningPerKey: maxRunningPerKey)) }
    }

    /// Sets how the queue shares its claims among its concurrency keys, for every process
    /// and language; an option not given is its default (priority order, no limit per key).
    /// Round-robin order takes each key with ready jobs once per turn, so one key's flood
    /// does not hold up another's few; a claim steps over a key at its rate limit.
    ///
    /// `order`: "priority" (priority, then age: the default) or "round_robin" (priority,
    /// then each key in turn, then age; jobs without a key go first).
    ///
    /// `keyLimit`: At most this many jobs of one key start per `keyPer` (1 to 10⁹).
    ///
    /// `keyPer`: The period of `keyLimit` (1 ms to 366 days).
    ///
    /// `keyBurst`: Jobs of one key that may start at once after it idled (1 by default).
    public func setFairness(order: String? = nil, keyLimit: UInt32? = nil, keyPer: TimeInterval? = nil, keyBurst: UInt32? = nil,
        isolation: isolated (any Actor)? = #isolation) async throws {
        let native = self.native
        try await soon(inline) { try native.setFairness(options: FairnessArgs(order: order, keyLimit: keyLimit, keyPer: keyPer, keyBurst: keyBurst)) }
    }
    // </generated: verbs-Queue>

    // One payload packed is a batch of one: the same native call.
    func enqueueEncoded(_ packed: [UInt8], _ options: EnqueueArgs, tx: Transaction?) throws -> Enqueued {
        try enqueueManyEncoded(packed, options, tx: tx)[0]
    }

    func enqueueEncoded(_ packed: [UInt8], _ options: EnqueueArgs,
                        isolation: isolated (any Actor)? = #isolation) async throws -> Enqueued {
        try await enqueueManyEncoded(packed, options)[0]
    }

    func enqueueEncoded(_ packed: [UInt8], _ options: EnqueueArgs, on connection: OpaquePointer) throws -> Enqueued {
        try Packed.enqueued(Packed.withAddress(packed) {
            try native.enqueueOn(handle: UInt64(UInt(bitPattern: connection)),
                                 payloadsAddress: $0, payloadsLen: $1, options: options)
        })[0]
    }

    func enqueueManyEncoded(_ packed: [UInt8], _ options: EnqueueArgs, tx: Transaction?) throws -> [Enqueued] {
        try Packed.enqueued(Packed.withAddress(packed) {
            try native.enqueue(payloadsAddress: $0, payloadsLen: $1, options: options, tx: tx?.native)
        })
    }

    func enqueueManyEncoded(_ packed: [UInt8], _ options: EnqueueArgs,
                            isolation: isolated (any Actor)? = #isolation) async throws -> [Enqueued] {
        let native = self.native
        return try Packed.enqueued(await soon(inline) {
            try Packed.withAddress(packed) {
                try native.enqueue(payloadsAddress: $0, payloadsLen: $1, options: options, tx: nil)
            }
        })
    }

    /// One job whose payload is JSON text as it is, with options as core
    /// takes them: for tests-interop's driver, which replays steps that
    /// other languages wrote (`@_spi(Interop) import Honker`).
    @_spi(Interop)
    public func enqueue(jsonText: String, options: EnqueueArgs, tx: HonkerNative.Transaction?) throws -> Enqueued {
        try Packed.enqueued(Packed.withAddress(Packed.jsonTexts([jsonText])) {
            try native.enqueue(payloadsAddress: $0, payloadsLen: $1, options: options, tx: tx)
        })[0]
    }

    /// Leases up to `n` due jobs to `workerId`, waiting up to `wait` for work.
    /// Cancelling the task ends the wait at once (`CancellationError`),
    /// claiming nothing.
    public func claimBatch(workerId: String, n: UInt32 = 1, lease: TimeInterval? = nil,
                           wait: TimeInterval = 0, isolation: isolated (any Actor)? = #isolation) async throws -> [Job] {
        let native = self.native
        let leaseMs = try millis("lease", lease) ?? native.leaseMs()
        let waitMs = try millis("wait", wait)
        try Task.checkCancellation()
        let packed: Data
        if waitMs == 0 {
            packed = try await soon(inline) {
                try native.claim(workerId: workerId, n: n, leaseMs: leaseMs, waitMs: 0, tx: nil)
            }
        } else {
            // A claim that waits for work by design: off the thread, and
            // ended at once by the task's cancellation (what it claimed as
            // it was cancelled goes back).
            let cancel = CancelToken(queue: native)
            packed = try await withTaskCancellationHandler {
                try await waitOffThread {
                    try native.claimCancellable(workerId: workerId, n: n, leaseMs: leaseMs,
                                                waitMs: waitMs, cancel: cancel)
                }
            } onCancel: {
                cancel.cancel()
            }
        }
        let jobs = try Packed.claimed(packed)
        if Task.isCancelled {
            for j in jobs { _ = try? native.release(id: j.id, token: j.token, tx: nil) }
            throw CancellationError()
        }
        return jobs.map { Job(queue: self, workerId: workerId, claimed: $0, leaseMs: leaseMs) }
    }

    /// `claimBatch` inside your transaction (no waiting).
    public func claimBatch(workerId: String, n: UInt32 = 1, lease: TimeInterval? = nil,
                           tx: Transaction) throws -> [Job] {
        let leaseMs = try millis("lease", lease) ?? native.leaseMs()
        return try Packed.claimed(native.claim(workerId: workerId, n: n, leaseMs: leaseMs, waitMs: 0, tx: tx.native))
            .map { Job(queue: self, workerId: workerId, claimed: $0, leaseMs: leaseMs) }
    }

    /// `for try await job in queue.claim(workerId: "mailer-1")`: an endless
    /// stream of jobs that waits (off the caller's thread) until work arrives
    /// from any process, and ends when its task is cancelled.
    public func claim(workerId: String, batch: UInt32 = Defaults.claimBatch, lease: TimeInterval? = nil,
                      wait: TimeInterval = Defaults.pollWait) -> ClaimSequence {
        ClaimSequence(queue: self, workerId: workerId, batch: batch, lease: lease, wait: wait)
    }

    /// The running job that `(id, token)` leases, rebuilt: for a process
    /// handed a lease by another (a webhook that completes the job later, a
    /// worker in another language). `.LeaseLost` if the job is not running
    /// (or finished), `.NotFound` if it never existed, as a method with the
    /// lease would say; a method on it throws `.LeaseLost` if another claim
    /// holds it now. `keepAlive` renews it for the queue's lease.
    public func job(id: Int64, token: String) async throws -> Job {
        let native = self.native
        let r = try await offThread { try native.job(id: id, token: token) }
        return Job(queue: self, workerId: r.workerId, claimed: r.job, leaseMs: native.leaseMs())
    }

    /// Acks several jobs in one transaction; returns how many were still held.
    @discardableResult
    public func ackMany(_ jobs: [Job], isolation: isolated (any Actor)? = #isolation) async throws -> UInt64 {
        let native = self.native
        let leases = jobs.map { LeaseRecord(id: $0.id, token: $0.token) }
        return try await soon(inline) { try native.ackMany(leases: leases, tx: nil) }
    }

    /// Cancels a live job; false if it had already finished.
    @discardableResult
    public func cancel(_ id: Int64, reason: String? = nil, isolation: isolated (any Actor)? = #isolation) async throws -> Bool {
        let native = self.native
        return try await soon(inline) { try native.cancel(id: id, reason: reason, tx: nil) }
    }

    public func job(_ id: Int64) async throws -> JobRecord {
        let native = self.native
        return JobRecord(try await offThread { try native.getJob(id: id) })
    }

    /// The result saved by `job.ack(result:)`, or nil.
    public func result<T: Decodable>(_ id: Int64, as type: T.Type) async throws -> T? {
        let native = self.native
        guard let p = try await offThread({ try native.getResult(id: id) }) else { return nil }
        return try decode(p, as: type)
    }

    /// Waits (off the caller's thread) up to `timeout` for the job's result.
    /// Cancelling the task ends the wait at once (`CancellationError`).
    public func waitResult<T: Decodable>(_ id: Int64, as type: T.Type, timeout: TimeInterval) async throws -> T? {
        let native = self.native
        let timeoutMs = try millis("timeout", timeout)
        let cancel = CancelToken(queue: native)
        let payload: Payload?
        do {
            payload = try await withTaskCancellationHandler {
                try await waitOffThread { try native.waitResultCancellable(id: id, timeoutMs: timeoutMs, cancel: cancel) }
            } onCancel: {
                cancel.cancel()
            }
        } catch HonkerError.Timeout where Task.isCancelled {
            throw CancellationError()
        }
        guard let p = payload else { return nil }
        return try decode(p, as: type)
    }

    public func stats(isolation: isolated (any Actor)? = #isolation) async throws -> QueueStats {
        let native = self.native
        return try await soon(inline) { try native.stats() }
    }

    /// The queue's stored settings (ms), each nil when not set.
    public func settings() async throws -> QueueOptions {
        let native = self.native
        return try await offThread { try native.settings() }
    }

    /// Forgets the queue's stored settings (the defaults apply again).
    public func clearSettings(isolation: isolated (any Actor)? = #isolation) async throws {
        let native = self.native
        try await soon(inline) { try native.clearSettings() }
    }

    /// Lifts the queue's own pause (`pause`); whether it had one. Waiting
    /// claims in every process wake on its commit. While all queues are
    /// paused (`Database.pauseAll`) it stays paused by that.
    @discardableResult
    public func resume(isolation: isolated (any Actor)? = #isolation) async throws -> Bool {
        let native = self.native
        return try await soon(inline) { try native.resume() }
    }

    /// The queue's counters (enqueued, claimed, acked, retried, reclaimed,
    /// dead, expired, cancelled), claim latency histogram and jobs by state:
    /// counted in the file by every process, so the whole file's (ADR 27).
    public func metrics() async throws -> QueueMetrics {
        let native = self.native
        let json = try await offThread { try native.metricsJson() }
        return try QueueMetrics.decode(list: "[\(json)]")[0]
    }

    /// Limits how many of this queue's jobs start, for every worker of every
    /// process together (`limit` per `per` seconds, `burst` at once),
    /// enforced inside each claim's transaction: a claim takes what the
    /// limit allows, the rest keep waiting with their attempts untouched.
    /// `nil` lifts it.
    public func setRateLimit(_ limit: RateLimit?) async throws {
        let native = self.native
        let record = try limit.map {
            RateLimitRecord(limit: $0.limit, perMs: try millis("per", $0.per), burst: $0.burst)
        }
        try await offThread { try native.setRateLimit(limit: record) }
    }

    /// The queue's rate limit, if it has one (set by any process).
    public func rateLimit() async throws -> RateLimit? {
        let native = self.native
        return try await offThread { try native.rateLimit() }.map {
            RateLimit(limit: $0.limit, per: TimeInterval($0.perMs) / 1000, burst: $0.burst)
        }
    }

    /// Dead letters with ids above `afterId`, oldest first (paged).
    public func deadLetters(afterId: Int64 = 0, limit: UInt32 = Defaults.pageLimit) async throws -> [JobRecord] {
        let native = self.native
        return try await offThread { try native.deadLetters(afterId: afterId, limit: limit) }.map(JobRecord.init)
    }

    @discardableResult
    public func requeueDead(_ id: Int64, isolation: isolated (any Actor)? = #isolation) async throws -> Bool {
        let native = self.native
        return try await soon(inline) { try native.requeueDead(id: id) }
    }

    @discardableResult
    public func requeueAllDead() async throws -> UInt64 {
        let native = self.native
        return try await offThread { try native.requeueAllDead() }
    }

    @discardableResult
    public func purgeDead(olderThan: TimeInterval? = nil) async throws -> UInt64 {
        let native = self.native
        let olderThanMs = try millis("olderThan", olderThan)
        return try await offThread { try native.purgeDead(olderThanMs: olderThanMs) }
    }
}

/// A claimed job, leased to this worker until `leaseExpiresAt`. A lost lease
/// makes every method throw `.LeaseLost` and change nothing.
public final class Job: @unchecked Sendable {
    public let id: Int64
    public let attempts: UInt32
    public let maxAttempts: UInt32
    public let priority: Int32
    public let workerId: String
    public let token: String
    public let runAt: Date
    public let createdAt: Date
    /// The producer's W3C trace context (`traceparent`, `tracestate`), if it
    /// had one (Python and Node capture it from OpenTelemetry): continue the
    /// trace from it with your tracing library.
    public let traceContext: [String: String]?
    public let queue: Queue
    let rawPayload: Payload
    let leaseMs: UInt64
    private let lock = NSLock()
    private var expiresMs: Int64
    private var settledByHandler = false

    /// Whether a verb that finishes the job (ack, retry, fail, release,
    /// snooze) succeeded: a `Worker` then only frees the handler's slot.
    var settled: Bool {
        lock.lock()
        defer { lock.unlock() }
        return settledByHandler
    }

    private func settle<T>(_ value: T) -> T {
        lock.lock()
        settledByHandler = true
        lock.unlock()
        return value
    }

    init(queue: Queue, workerId: String, claimed c: ClaimedJob, leaseMs: UInt64) {
        self.queue = queue
        self.workerId = workerId
        self.leaseMs = leaseMs
        id = c.id
        attempts = c.attempts
        maxAttempts = c.maxAttempts
        priority = c.priority
        token = c.token
        runAt = date(c.runAtMs)
        createdAt = date(c.createdAtMs)
        traceContext = c.traceContext.flatMap(traceCarrier)
        rawPayload = c.payload
        expiresMs = c.leaseExpiresAtMs
    }

    /// While `keepAlive` runs: core's renewal, whose renewals move the expiry.
    private var renewal: HonkerNative.KeepAlive?

    /// When the lease lapses unless extended.
    public var leaseExpiresAt: Date {
        lock.lock()
        defer { lock.unlock() }
        if let renewed = renewal?.leaseExpiresAtMs(), renewed > expiresMs { expiresMs = renewed }
        return date(expiresMs)
    }

    private func extended(to until: Int64) {
        lock.lock()
        defer { lock.unlock() }
        expiresMs = until
    }

    private func renewing(_ r: HonkerNative.KeepAlive?) {
        lock.lock()
        defer { lock.unlock() }
        if let renewed = renewal?.leaseExpiresAtMs(), renewed > expiresMs { expiresMs = renewed }
        renewal = r
    }

    /// The payload decoded as `T` (`Data` for byte payloads).
    public func payload<T: Decodable>(as type: T.Type) throws -> T {
        try decode(rawPayload, as: type)
    }

    /// Completes the job, saving `result` if given.
    public func ack<R: Encodable>(result: R, isolation: isolated (any Actor)? = #isolation) async throws {
        let (native, id, token) = (queue.native, id, token)
        let payload = try encode(result)
        try await soon(queue.inline) { try native.ack(id: id, token: token, result: payload, tx: nil) }
        settle(())
    }

    public func ack(isolation: isolated (any Actor)? = #isolation) async throws {
        let (native, id, token) = (queue.native, id, token)
        try await soon(queue.inline) { try native.ack(id: id, token: token, result: nil, tx: nil) }
        settle(())
    }

    /// Completes the job inside your transaction, with your writes.
    public func ack(tx: Transaction) throws {
        try queue.native.ack(id: id, token: token, result: nil, tx: tx.native)
        settle(())
    }

    /// Another attempt after `delay` (default: the job's backoff); dead when
    /// its attempts are used up. Returns the new state.
    @discardableResult
    public func retry(delay: TimeInterval? = nil, error: String? = nil, isolation: isolated (any Actor)? = #isolation) async throws -> String {
        let (native, id, token) = (queue.native, id, token)
        let delayMs = try millis("delay", delay)
        return settle(try await soon(queue.inline) {
            try native.retry(id: id, token: token, delayMs: delayMs, error: error, tx: nil)
        })
    }

    /// Dead-letters the job now.
    public func fail(_ error: String, isolation: isolated (any Actor)? = #isolation) async throws {
        let (native, id, token) = (queue.native, id, token)
        try await soon(queue.inline) { try native.fail(id: id, token: token, error: error, tx: nil) }
        settle(())
    }

    /// Gives the job back now, without using up an attempt.
    public func release(isolation: isolated (any Actor)? = #isolation) async throws {
        let (native, id, token) = (queue.native, id, token)
        try await soon(queue.inline) { try native.release(id: id, token: token, tx: nil) }
        settle(())
    }

    /// Gives the job back to run after `delay`, without using up an attempt.
    @discardableResult
    public func snooze(_ delay: TimeInterval, isolation: isolated (any Actor)? = #isolation) async throws -> String {
        let (native, id, token) = (queue.native, id, token)
        let delayMs = try millis("delay", delay)
        return settle(try await soon(queue.inline) { try native.snooze(id: id, token: token, delayMs: delayMs, tx: nil) })
    }

    /// Extends the lease by `extend` (default: the claim's lease) from now.
    @discardableResult
    public func heartbeat(extend: TimeInterval? = nil, isolation: isolated (any Actor)? = #isolation) async throws -> Date {
        let (native, id, token) = (queue.native, id, token)
        let ms = try millis("extend", extend) ?? leaseMs
        let until = try await soon(queue.inline) { try native.heartbeat(id: id, token: token, extendMs: ms) }
        extended(to: until)
        return date(until)
    }

    /// Runs `body` while renewing the lease every `every` (default: a third
    /// of the lease), so long work keeps its job. The renewal is core's
    /// (`KeepAlive`, one meaning on every surface): a transient failure
    /// (`BUSY`) is tried again; a lost lease (reclaimed after a lapse,
    /// cancelled) stops it, and then, once `body` returns, this throws
    /// `.LeaseLost`: the work's outcome can no longer be recorded, and the
    /// job runs again elsewhere (at-least-once). An error from `body` is
    /// thrown as it is.
    ///
    /// `body` runs in the caller's isolation (the main actor's, from SwiftUI
    /// code), so it may touch the caller's state.
    public func keepAlive<T>(every: TimeInterval? = nil, isolation: isolated (any Actor)? = #isolation,
                             _ body: () async throws -> sending T) async throws -> sending T {
        let everyMs = try millis("every", every)
        let native = queue.native
        let renewal = try native.keepAlive(id: id, token: token, leaseMs: leaseMs, everyMs: everyMs)
        renewing(renewal)
        let value: T
        do {
            value = try await body()
        } catch {
            _ = try? await offThread { renewal.stop() }
            renewing(nil)
            throw error
        }
        let lost = try await offThread { renewal.stop() }
        renewing(nil)
        if lost {
            throw HonkerError.LeaseLost(
                message: "job \(id)'s lease was lost while keepAlive ran; its outcome cannot be recorded")
        }
        return value
    }
}

/// Closes its claimer when the iterator goes away (a `break` out of `for try
/// await`): the buffered jobs go back then and there, not when the last
/// reference to the claimer (a background thread's, a moment later) is gone.
final class ClaimerHandle: @unchecked Sendable {
    let claimer: Claimer
    init(_ claimer: Claimer) { self.claimer = claimer }
    deinit { _ = claimer.close() }
}

/// See `Queue.claim(workerId:)`.
public struct ClaimSequence: AsyncSequence, Sendable {
    public typealias Element = Job
    let queue: Queue
    let workerId: String
    let batch: UInt32
    let lease: TimeInterval?
    let wait: TimeInterval

    public func makeAsyncIterator() -> Iterator {
        Iterator(sequence: self)
    }

    /// Backed by core's claimer: jobs claimed but not handed out are
    /// released when the task is cancelled and when the iterator goes away
    /// (a `break` out of `for try await`), not left to their lease.
    public struct Iterator: AsyncIteratorProtocol {
        let sequence: ClaimSequence
        var handle: ClaimerHandle?
        var reading: Reading<Job>?

        public mutating func next() async throws -> Job? {
            if reading == nil {
                let s = sequence
                let leaseMs = try millis("lease", s.lease) ?? s.queue.native.leaseMs()
                let waitMs = try millis("wait", s.wait)
                let claimer = try s.queue.native.claimer(workerId: s.workerId, batch: s.batch, leaseMs: leaseMs)
                handle = ClaimerHandle(claimer)
                reading = Reading(CancelToken(queue: s.queue.native), closed: { claimer.isClosed() }) {
                    try claimer.nextCancellable(waitMs: waitMs, cancel: $0)
                        .map { Job(queue: s.queue, workerId: s.workerId, claimed: $0, leaseMs: leaseMs) }
                }
            }
            let job = try await reading?.next()
            if job == nil, Task.isCancelled {
                _ = handle?.claimer.close()  // what it holds goes back now
            }
            return job
        }
    }
}
