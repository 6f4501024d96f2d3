// The worker runtime (core's `runtime::Worker`): registered `async throws`
// handlers, concurrency limits, lease renewal, timeouts and a graceful
// shutdown. Core claims, renews, times out and records outcomes; this file
// only runs handlers, each in its own Task, and cancels a Task when core
// gives up on its job (timeout, lost lease, shutdown). At-least-once: a
// handler may run again after a crash or a lapsed lease.

import Foundation
import HonkerNative

/// Thrown by a handler: a failure no retry can fix (an invalid address).
/// The job goes to the dead letters now, with `reason`.
public struct Permanent: Error, CustomStringConvertible, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Thrown by a handler: retry after `delay` (default: the queue's backoff),
/// recording `message`; dead once the attempts are spent.
public struct Retry: Error, CustomStringConvertible, Sendable {
    public let message: String
    public let delay: TimeInterval?
    public init(_ message: String = "Retry", delay: TimeInterval? = nil) {
        self.message = message
        self.delay = delay
    }
    public var description: String { message }
}

/// Thrown by a handler: not now; run again after `delay`, no attempt spent.
public struct Snooze: Error, Sendable {
    public let delay: TimeInterval
    public init(_ delay: TimeInterval) { self.delay = delay }
}

/// What a `Worker` reports to its hooks (`Worker.on`).
public struct WorkerEvent: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case start, success, retry, dead, snoozed, released, settled, error
        case timedOut = "timed_out"
        case leaseLost = "lease_lost"
    }

    public let kind: Kind
    /// The job's queue (nil for an `.error` that stopped the worker).
    public let queue: String?
    public let jobId: Int64?
    public let attempts: UInt32?
    /// How long the handler ran (finished kinds only).
    public let duration: TimeInterval?
    /// The recorded error (`.retry`, `.dead`), or what failed (`.error`).
    public let error: String?
    /// The job's new state after `.retry` and `.snoozed`.
    public let state: String?
    /// For a consumer group's event: the group (`queue` is then its stream,
    /// `jobId` the event's offset, `attempts` its deliveries).
    public var group: String? = nil
}

/// The documented envelope of a queue that carries several task types:
/// `{"task": name, "args": ...}`.
public struct TaskEnvelope<Args: Encodable>: Encodable {
    public let task: String
    public let args: Args
    public init(task: String, args: Args) {
        self.task = task
        self.args = args
    }
}

extension TaskEnvelope: Sendable where Args: Sendable {}

private struct EnvelopeArgs<T: Decodable>: Decodable { let args: T }

extension Job {
    /// The arguments of a task envelope (`{"task": ..., "args": ...}`).
    public func args<T: Decodable>(as type: T.Type) throws -> T {
        try payload(as: EnvelopeArgs<T>.self).args
    }
}

/// A handler's body, as the run loop calls it: the result to store, if any.
typealias Handler = @Sendable (Job) async throws -> Payload?

/// Runs handlers for queues' jobs:
///
///     let worker = try Worker(db, concurrency: 8)
///     try worker.handle("emails", timeout: 30) { job in
///         try await send(try job.payload(as: Email.self))
///     }
///     try await worker.run(signals: true)   // or cancel its Task
///
/// A handler that returns acks its job (with the returned value stored as
/// the job's result); one that throws `Permanent` dead-letters it, `Snooze`
/// snoozes it, `Retry` or any other error retries it with the queue's
/// backoff. A handler past its `timeout`, or whose lease was lost, has its
/// Task cancelled and its job retried by core; its late outcome is
/// discarded. Cancelling the Task that runs `run()` begins a graceful
/// shutdown: no claim from then on, running handlers get `grace` to finish,
/// then what still runs is released (no attempt spent) and cancelled.
public final class Worker: @unchecked Sendable {
    public let native: HonkerNative.Worker
    public let workerId: String
    /// How long a shutdown gives running handlers before releasing their jobs.
    public let grace: TimeInterval
    let db: Database
    private let lock = NSLock()
    private var queues: [String: Registration] = [:]
    private var hooks: [WorkerEvent.Kind: [@Sendable (WorkerEvent) -> Void]] = [:]
    private var hurried = false

    final class Registration {
        let queue: Queue?
        let leaseMs: UInt64
        var handler: Handler?
        var tasks: [String: Handler] = [:]
        /// A consumer group's registration, and its handler.
        let group: Group?
        var groupHandler: (@Sendable (GroupEvent) async throws -> Void)?

        init(queue: Queue?, leaseMs: UInt64, group: Group? = nil) {
            self.queue = queue
            self.leaseMs = leaseMs
            self.group = group
        }
    }

    /// A registration's key: a queue's name, or a group's stream and name.
    static func key(_ name: String, group: String?) -> String {
        group.map { "g:\(name)\u{0}\($0)" } ?? "q:\(name)"
    }

    /// A worker on `db` running at most `concurrency` handlers at once over
    /// all its queues. `workerId` (default: host name and process id) is
    /// what its claims record. While it runs it also runs the file's
    /// scheduler (`runScheduler`): each boundary fires once, whichever
    /// process fires it.
    public init(_ db: Database, workerId: String? = nil, concurrency: UInt32 = Defaults.workerConcurrency,
                grace: TimeInterval = Defaults.workerGrace, runScheduler: Bool = true) throws {
        let id = workerId ?? "\(ProcessInfo.processInfo.hostName)-\(ProcessInfo.processInfo.processIdentifier)"
        _ = try millis("grace", grace)
        native = try HonkerNative.Worker(db: db.native, workerId: id, concurrency: concurrency, runScheduler: runScheduler)
        self.workerId = id
        self.grace = grace
        self.db = db
    }

    /// The queues with handlers.
    public var queueNames: [String] {
        lock.lock()
        defer { lock.unlock() }
        return queues.values.compactMap { $0.queue?.name }.sorted()
    }

    /// The consumer groups with handlers, as (stream, group).
    public var groupNames: [(stream: String, group: String)] {
        lock.lock()
        defer { lock.unlock() }
        return queues.values.compactMap { r in r.group.map { (stream: $0.stream.name, group: $0.name) } }
            .sorted { ($0.stream, $0.group) < ($1.stream, $1.group) }
    }

    /// Whether a shutdown began.
    public var isStopping: Bool { native.isStopping() }

    /// Handlers running now (or claimed and about to run).
    public var running: UInt32 { native.running() }

    /// The queues whose due jobs a pause held back at this worker's last
    /// look (`Queue.pause`, `Database.pauseAll`), each with how many looks
    /// (one per wake-up: a commit by any process) found that; a queue leaves
    /// it once a look finds it running again or with nothing due.
    public var paused: [String: UInt64] { native.paused() }

    /// Runs `handler` for `queue`'s jobs and stores what it returns as the
    /// job's result. With `task`, the queue carries the envelope
    /// `{"task": name, "args": ...}` (`TaskEnvelope`) and this handler takes
    /// the jobs whose task is `name` (`job.args(as:)`); a job whose task has
    /// no handler goes to the dead letters with `no handler for task <name>`.
    /// `concurrency` (within the worker's), `timeout` and `lease` are the
    /// queue's.
    public func handle<R: Encodable>(_ queue: String, task: String? = nil, concurrency: UInt32? = nil,
                                     timeout: TimeInterval? = nil, lease: TimeInterval? = nil,
                                     _ handler: @escaping @Sendable (Job) async throws -> R) throws {
        try register(queue, task: task, concurrency: concurrency, timeout: timeout, lease: lease) { job in
            let value = try await handler(job)
            do {
                return try encode(value)
            } catch {
                throw UnstorableResult(detail: "\(type(of: error)): \(error)")
            }
        }
    }

    /// `handle` for a handler that returns nothing: its job is acked
    /// without a result.
    public func handle(_ queue: String, task: String? = nil, concurrency: UInt32? = nil,
                       timeout: TimeInterval? = nil, lease: TimeInterval? = nil,
                       _ handler: @escaping @Sendable (Job) async throws -> Void) throws {
        try register(queue, task: task, concurrency: concurrency, timeout: timeout, lease: lease) { job in
            try await handler(job)
            return nil
        }
    }

    private func register(_ name: String, task: String?, concurrency: UInt32?, timeout: TimeInterval?,
                          lease: TimeInterval?, _ handler: @escaping Handler) throws {
        if let task, task.isEmpty {
            throw HonkerError.InvalidArgument(message: "a task name must be a non-empty string")
        }
        let (timeoutMs, leaseMs) = (try millis("timeout", timeout), try millis("lease", lease))
        lock.lock()
        defer { lock.unlock() }
        let key = Worker.key(name, group: nil)
        let q = try queues[key]?.queue ?? db.queue(name)
        // Core's rules: one handler per task of the envelope or one for
        // every job, the queue's options named once, none once the run
        // started.
        try native.register(queue: q.native, task: task, concurrency: concurrency, timeoutMs: timeoutMs,
                            leaseMs: leaseMs)
        let reg = queues[key] ?? Registration(queue: q, leaseMs: leaseMs ?? q.native.leaseMs())
        queues[key] = reg
        if let task { reg.tasks[task] = handler } else { reg.handler = handler }
    }

    /// Runs `handler` for a consumer group's events, as its member named by
    /// the worker id (the group must exist). Returning acks the event;
    /// `Retry` and other errors retry it (dead after the group's
    /// `maxDeliveries`); `Permanent` dead-letters it; `Snooze` retries it
    /// after the delay (a group has no snooze that spends no delivery). A
    /// handler that finishes the event itself (`group.ack(event, tx:)` in
    /// its own transaction) settles it. `concurrency`, `timeout` and `lease`
    /// are the group's registration's.
    public func handle(_ group: Group, concurrency: UInt32? = nil, timeout: TimeInterval? = nil,
                       lease: TimeInterval? = nil,
                       _ handler: @escaping @Sendable (GroupEvent) async throws -> Void) throws {
        let (timeoutMs, leaseMs) = (try millis("timeout", timeout), try millis("lease", lease))
        let key = Worker.key(group.stream.name, group: group.name)
        lock.lock()
        defer { lock.unlock() }
        // Core's rules (one handler per group, none once the run started);
        // it checks the options and that the group exists.
        try native.registerGroup(group: group.native, concurrency: concurrency, timeoutMs: timeoutMs,
                                 leaseMs: leaseMs)
        let reg = Registration(queue: nil, leaseMs: leaseMs ?? 0, group: group)
        reg.groupHandler = handler
        queues[key] = reg
    }

    /// Calls `hook` for each event of `kind`. Hooks run on the worker's
    /// threads: keep them short. With no `.error` hook, errors are printed
    /// to stderr.
    public func on(_ kind: WorkerEvent.Kind, _ hook: @escaping @Sendable (WorkerEvent) -> Void) {
        lock.lock()
        hooks[kind, default: []].append(hook)
        lock.unlock()
    }

    /// Begins a graceful shutdown (what cancelling `run`'s Task, or SIGTERM
    /// with `signals`, does): no claim from now on. No I/O.
    public func stop() {
        native.stop()
    }

    /// Ends a shutdown's grace period now (a second SIGTERM or SIGINT):
    /// what still runs is released and cancelled, and `run` returns without
    /// waiting for those handlers. No I/O.
    public func endGrace() {
        lock.lock()
        hurried = true
        lock.unlock()
        native.endGrace()
    }

    /// Runs until `stop()`, its Task is cancelled, or (with `signals`)
    /// SIGTERM or SIGINT; then drains: running handlers get `grace` to
    /// finish, what still runs is released (no attempt spent) and its Task
    /// cancelled, and `run` returns once those handlers return too (their
    /// outcomes are discarded) — at once after `endGrace()` or a second
    /// signal. Throws only when the worker cannot run (no handler, already
    /// run); a claim that fails stops it and is reported as an `.error`
    /// event. A Worker runs once.
    public func run(signals: Bool = false) async throws {
        try start()
        let native = self.native
        let graceMs = try millis("grace", grace)
        let running = RunningHandlers()
        // Core's policy: the first signal stops, a second ends the grace.
        let relayed = try signals ? SignalRelay.shared.add { [weak self] in
            guard let self, self.native.signalled() else { return }
            self.lock.lock()
            self.hurried = true
            self.lock.unlock()
        } : nil
        // Core tells which running handlers it gave up on (timed out, lease
        // lost, released by a shutdown) when it does: their Tasks are
        // cancelled then.
        let watcher = Task.detached {
            while true {
                // Read before the cancellation is looked at: the defer below
                // cancels, then wakes, so a wake after this read is not missed.
                let seen = native.cancelledGeneration()
                if Task.isCancelled { return }
                guard let gone = try? await waitOffThread({ try native.waitCancelled(seen: seen, waitMs: 60_000) })
                else { return }
                for c in gone { running.cancel(c.key) }
            }
        }
        defer {
            watcher.cancel()
            native.wakeCancelled()
            if let relayed { SignalRelay.shared.remove(relayed) }
        }
        await withTaskCancellationHandler {
            while !native.isStopping() {
                do {
                    if let t = try await waitOffThread({ try native.next(waitMs: 60_000) }) {
                        dispatch(t, running)
                    }
                } catch {
                    emitError(error, queue: nil, jobId: nil)
                    native.stop()
                }
            }
            _ = try? await offThread { native.shutdown() }
            _ = try? await offThread { try native.drain(graceMs: graceMs) }
            // What still runs was released: its Task is cancelled, and
            // awaited unless the grace was ended.
            running.cancelAll()
            while !isHurried {
                if (try? await offThread({ running.wait(0.05) })) ?? true { break }
            }
        } onCancel: {
            native.stop()
        }
    }

    private func start() throws {
        try native.start() // a Worker runs once, with a handler
    }

    private var isHurried: Bool {
        lock.lock()
        defer { lock.unlock() }
        return hurried
    }

    private func dispatch(_ t: WorkerTask, _ running: RunningHandlers) {
        lock.lock()
        let reg = queues[Worker.key(t.queue, group: t.group)]!
        lock.unlock()
        if let group = reg.group, let handler = reg.groupHandler, let e = t.event {
            dispatch(t, GroupEvent(e), group, handler, running)
            return
        }
        let job = Job(queue: reg.queue!, workerId: workerId, claimed: t.job!, leaseMs: reg.leaseMs)
        let handler = self.handler(reg, t)
        emit(.start, job: job, queue: t.queue)
        running.start(t.key) {
            let outcome: (String, Payload?, UInt64?, String?)
            do {
                outcome = ("ack", try await handler(job), nil, nil)
            } catch {
                outcome = Worker.outcome(of: error)
            }
            await self.finish(t, job, outcome)
        }
    }

    private func dispatch(_ t: WorkerTask, _ event: GroupEvent, _ group: Group,
                          _ handler: @escaping @Sendable (GroupEvent) async throws -> Void,
                          _ running: RunningHandlers) {
        group.track(event.token)
        emit(.start, id: event.offset, attempts: event.deliveries, queue: t.queue, group: group.name)
        running.start(t.key) {
            let outcome: (String, Payload?, UInt64?, String?)
            do {
                try await handler(event)
                outcome = ("ack", nil, nil, nil)
            } catch {
                outcome = Worker.outcome(of: error)
            }
            let settled = group.takeSettled(event.token)
            await self.finish(t, settled: settled, id: event.offset, attempts: event.deliveries,
                              group: group.name, outcome)
        }
    }

    /// Core routed it: the queue's handler, its envelope's task's, or none.
    private func handler(_ reg: Registration, _ t: WorkerTask) -> Handler {
        if let reason = t.refused { return { _ in throw Permanent(reason) } }
        if let task = t.task, let h = reg.tasks[task] { return h }
        return reg.handler!
    }

    /// A handler's result that could not be encoded: core retries the job
    /// and records why.
    struct UnstorableResult: Error {
        let detail: String
    }

    /// A handler's error as an outcome: (kind, result, delay ms, error).
    static func outcome(of error: Error) -> (String, Payload?, UInt64?, String?) {
        switch error {
        case let u as UnstorableResult:
            return ("unstorable", nil, nil, u.detail)
        case let p as Permanent:
            return ("permanent", nil, nil, p.reason)
        case let s as Snooze:
            do {
                let ms: UInt64 = try millis("snooze delay", s.delay)
                return ("snooze", nil, ms, nil)
            } catch {
                return ("retry", nil, nil, "Snooze with an invalid delay: \(s.delay)")
            }
        case let r as Retry:
            do {
                let ms: UInt64? = try millis("retry delay", r.delay)
                return ("retry", nil, ms, r.message)
            } catch {
                return ("retry", nil, nil, "Retry with an invalid delay: \(String(describing: r.delay))")
            }
        default:
            return ("retry", nil, nil, "\(type(of: error)): \(error)")
        }
    }

    private func finish(_ t: WorkerTask, _ job: Job, _ outcome: (String, Payload?, UInt64?, String?)) async {
        await finish(t, settled: job.settled, id: job.id, attempts: job.attempts, group: nil, outcome)
    }

    private func finish(_ t: WorkerTask, settled: Bool, id: Int64, attempts: UInt32, group: String?,
                        _ outcome: (String, Payload?, UInt64?, String?)) async {
        // A handler that finished its job itself (acked it in its own
        // transaction): only the slot is freed.
        let kind = settled ? "settled" : outcome.0
        let native = self.native
        do {
            let r = try await offThread {
                try native.complete(key: t.key, outcome: kind, result: outcome.1,
                                    delayMs: outcome.2, error: outcome.3)
            }
            emit(WorkerEvent.Kind(rawValue: r.event) ?? .error, id: id, attempts: attempts, queue: r.queue,
                 group: group, duration: r.ranMs / 1000, error: r.error, state: r.state)
        } catch {
            // The database failed: the slot is free, and the job's lease
            // lapses, so it runs again (at-least-once).
            emitError(error, queue: t.queue, jobId: id)
        }
    }

    private func listeners(_ kind: WorkerEvent.Kind) -> [@Sendable (WorkerEvent) -> Void] {
        lock.lock()
        defer { lock.unlock() }
        return hooks[kind] ?? []
    }

    private func emit(_ kind: WorkerEvent.Kind, job: Job, queue: String) {
        emit(kind, id: job.id, attempts: job.attempts, queue: queue, group: nil)
    }

    private func emit(_ kind: WorkerEvent.Kind, id: Int64, attempts: UInt32, queue: String, group: String?,
                      duration: TimeInterval? = nil, error: String? = nil, state: String? = nil) {
        let hooks = listeners(kind)
        if hooks.isEmpty { return }
        let event = WorkerEvent(kind: kind, queue: queue, jobId: id, attempts: attempts,
                                duration: duration, error: error, state: state, group: group)
        for hook in hooks { hook(event) }
    }

    private func emitError(_ error: Error, queue: String?, jobId: Int64?) {
        let hooks = listeners(.error)
        if hooks.isEmpty {
            let what = jobId.map { "job \($0) on \(queue ?? "?"): recording its outcome failed" }
                ?? "the worker stopped: its claim failed"
            FileHandle.standardError.write(Data("honker: \(what): \(error)\n".utf8))
            return
        }
        let event = WorkerEvent(kind: .error, queue: queue, jobId: jobId, attempts: nil,
                                duration: nil, error: "\(error)", state: nil)
        for hook in hooks { hook(event) }
    }
}

/// The handlers running now, each in its own Task (not a child of `run`'s,
/// so that cancelling `run` drains them instead of cancelling them).
final class RunningHandlers: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [UInt64: Task<Void, Never>] = [:]
    private let group = DispatchGroup()

    func start(_ key: UInt64, _ body: @escaping @Sendable () async -> Void) {
        group.enter()
        // Under the lock: the Task's own removal waits until it is entered.
        lock.lock()
        let task = Task {
            await body()
            self.finished(key)
        }
        entries[key] = task
        lock.unlock()
    }

    private func finished(_ key: UInt64) {
        lock.lock()
        entries[key] = nil
        lock.unlock()
        group.leave()
    }

    /// Cancels the handler of task `key`, if it still runs.
    func cancel(_ key: UInt64) {
        lock.lock()
        let task = entries[key]
        lock.unlock()
        task?.cancel()
    }

    func cancelAll() {
        lock.lock()
        let tasks = Array(entries.values)
        lock.unlock()
        for t in tasks { t.cancel() }
    }

    /// Blocks up to `seconds` for every handler to return; whether they did.
    func wait(_ seconds: TimeInterval) -> Bool {
        group.wait(timeout: .now() + seconds) == .success
    }
}

/// SIGTERM and SIGINT for the workers that run with `signals`. Native
/// code's handler writes each signal's number to a pipe (a self-pipe: all
/// a signal handler may safely do); a dispatch source on the other end
/// tells every such worker, once per signal. The process's own handlers
/// are back when the last one returns. (libdispatch's signal sources did
/// not do on Linux: registered asynchronously after the disposition is
/// set to SIG_IGN, they lost a signal sent in between, and a second
/// worker's source in one process never received its signal.)
final class SignalRelay: @unchecked Sendable {
    static let shared = SignalRelay()

    private let lock = NSLock()
    private var listeners: [UInt64: @Sendable () -> Void] = [:]
    private var nextId: UInt64 = 0
    private var fd: Int32 = -1
    private var source: DispatchSourceRead?

    /// Calls `listener` on each SIGTERM or SIGINT from now until `remove`.
    func add(_ listener: @escaping @Sendable () -> Void) throws -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        if listeners.isEmpty {
            // Under the lock, which the reader takes too: what the pipe
            // held before (discarded here) reaches no listener.
            fd = try signalRelayInstall()
            if source == nil {
                let s = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .global())
                s.setEventHandler { [unowned self] in self.relay() }
                s.resume()
                source = s
            }
        }
        nextId += 1
        listeners[nextId] = listener
        return nextId
    }

    func remove(_ id: UInt64) {
        lock.lock()
        defer { lock.unlock() }
        if listeners.removeValue(forKey: id) != nil, listeners.isEmpty {
            signalRelayUninstall()
        }
    }

    private func relay() {
        lock.lock()
        var buf = [UInt8](repeating: 0, count: 64)
        var signals = 0
        while true {
            let n = read(fd, &buf, buf.count)
            if n > 0 {
                signals += n
            } else if n < 0, errno == EINTR {
                continue
            } else {
                break
            }
        }
        let targets = Array(listeners.values)
        lock.unlock()
        for _ in 0..<signals {
            for listener in targets { listener() }
        }
    }
}
