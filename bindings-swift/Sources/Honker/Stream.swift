// Streams and pub/sub for Swift: `db.stream("orders")` publishes events in
// your transaction and reads them as independent consumers, each from its
// own committed place; `db.notify` / `db.listen` deliver after commit to
// every listener. Waits run off the caller's thread and end at once when
// the iterating Task is cancelled; nothing handed out is lost by that.

import Foundation
import HonkerNative

public typealias ConsumerInfo = HonkerNative.ConsumerInfo

/// One event of a stream.
public struct StreamEvent: Sendable {
    /// Its offset: dense and gap-free from 1 within its stream.
    public let offset: Int64
    /// The label it was published with, if any.
    public let key: String?
    /// When it was published.
    public let createdAt: Date
    let payload: Payload

    init(_ e: HonkerNative.StreamEvent) {
        offset = e.offset
        key = e.key
        createdAt = date(e.createdAtMs)
        payload = e.payload
    }

    /// The payload decoded (`Data` for bytes).
    public func payload<T: Decodable>(as type: T.Type) throws -> T {
        try decode(payload, as: type)
    }
}

/// One notification, as a listener receives it. (Not `Notification`:
/// Foundation has one.)
public struct ChannelMessage: Sendable {
    /// Global, increasing in commit order, never reused.
    public let id: Int64
    /// Its number within its channel, dense from 1.
    public let seq: Int64
    /// When it was sent.
    public let createdAt: Date
    let payload: Payload

    init(_ n: HonkerNative.Notification) {
        id = n.id
        seq = n.seq
        createdAt = date(n.createdAtMs)
        payload = n.payload
    }

    public func payload<T: Decodable>(as type: T.Type) throws -> T {
        try decode(payload, as: type)
    }
}

/// Length, first/last offsets, every consumer's place and lag, every group's.
public struct StreamStatus: Sendable {
    public let length: Int64
    public let firstOffset: Int64?
    public let lastOffset: Int64
    public let consumers: [ConsumerInfo]
    /// Every consumer group's place, lag and pending events.
    public let groups: [GroupStatus]
}

/// A stream's retention: `maxAge` (nil: no age limit; default 7 days),
/// `maxCount` (never removing what a consumer has not passed), `trimPassed`
/// (also remove what every consumer has passed).
public struct StreamRetention: Sendable, Equatable {
    public var maxAge: TimeInterval?
    public var maxCount: UInt64?
    public var trimPassed: Bool

    public init(maxAge: TimeInterval?, maxCount: UInt64? = nil, trimPassed: Bool = false) {
        self.maxAge = maxAge
        self.maxCount = maxCount
        self.trimPassed = trimPassed
    }
}

/// Where a consumer with no committed offset starts.
public enum StreamStart: Sendable {
    case beginning
    case latest
    case offset(Int64)
    case time(Date)
}

func startPosition(_ start: StreamStart) throws -> StartPosition {
    switch start {
    case .beginning: return .beginning
    case .latest: return .latest
    case .offset(let n): return .offset(offset: n)
    case .time(let t): return .time(ms: try epochMillis("start", t))
    }
}

extension Database {
    /// A handle on the stream `name` (creating it writes nothing).
    public func stream(_ name: String) throws -> Stream {
        Stream(db: self, try native.stream(name: name))
    }

    /// Sends a notification on `channel` to every listener of any process;
    /// with `tx`, only if your transaction commits. Returns its id.
    @discardableResult
    public func notify<P: Encodable>(_ channel: String, _ payload: P, tx: Transaction? = nil) throws -> Int64 {
        try native.notify(channel: channel, payload: try encode(payload), tx: tx?.native)
    }

    /// `notify` for async code: off the caller's thread where it would wait.
    @discardableResult
    public func notify<P: Encodable & Sendable>(_ channel: String, _ payload: P,
                                                isolation: isolated (any Actor)? = #isolation) async throws -> Int64 {
        let (native, encoded) = (self.native, try encode(payload))
        return try await soon(inline) { try native.notify(channel: channel, payload: encoded, tx: nil) }
    }

    /// `for try await message in db.listen("orders")`: every notification on
    /// `channel` committed after this call, in commit order, each once, from
    /// any process. Behind the channel's window the iteration throws
    /// `.Trimmed(message:missed:)` once; iterate again to go on. Ends when
    /// the Task is cancelled or `close()` is called. `wait` bounds each
    /// sleep between checks.
    public func listen(_ channel: String, wait: TimeInterval = 1) throws -> Listener {
        let waitMs = try positiveMillis(wait)
        return Listener(db: self, try native.listen(channel: channel), waitMs: waitMs)
    }

    /// The channel's window (defaults: 1 hour, 100,000).
    public func channelRetention(_ channel: String) async throws -> (maxAge: TimeInterval, maxCount: UInt64) {
        let native = self.native
        let r = try await offThread { try native.channelRetention(channel: channel, set: nil) }
        return (TimeInterval(r.maxAgeMs) / 1000, r.maxCount)
    }

    /// Sets the channel's window for every process; maintenance trims past it.
    public func setChannelRetention(_ channel: String, maxAge: TimeInterval, maxCount: UInt64) async throws {
        let set = ChannelRetentionRecord(maxAgeMs: try millis("maxAge", maxAge), maxCount: maxCount)
        let native = self.native
        _ = try await offThread { try native.channelRetention(channel: channel, set: set) }
    }
}

func positiveMillis(_ wait: TimeInterval) throws -> UInt64 {
    let ms = try millis("wait", wait)
    guard ms > 0 else {
        throw HonkerError.InvalidArgument(message: "wait must be positive, got \(wait)")
    }
    return ms
}

/// The next item of a subscription or listener: each wait runs off the
/// caller's thread and ends at once when the Task is cancelled (nil). An
/// item taken as the Task was cancelled is still returned: dropping it would
/// count it as processed.
func cancellableNext<T: Sendable>(_ db: Database, closed: @escaping @Sendable () -> Bool,
                                  _ next: @escaping @Sendable (CancelToken) throws -> T?) async throws -> T? {
    let cancel = CancelToken.forDatabase(db: db.native)
    while true {
        if Task.isCancelled || closed() { return nil }
        let item = try await withTaskCancellationHandler {
            try await offThread { try next(cancel) }
        } onCancel: {
            cancel.cancel()
        }
        if let item { return item }
    }
}

/// A handle on one stream. Thread-safe.
public final class Stream: @unchecked Sendable {
    public let native: HonkerNative.Stream
    let db: Database

    init(db: Database, _ native: HonkerNative.Stream) {
        self.db = db
        self.native = native
    }

    public var name: String { native.name() }

    /// Appends an event (`Data` as bytes, anything else as JSON); returns
    /// its offset. With `tx` it exists only if your transaction commits.
    /// `idempotencyKey`: a retried publish (within 24 h) returns the first
    /// offset and appends nothing.
    @discardableResult
    public func publish<P: Encodable>(_ payload: P, key: String? = nil, idempotencyKey: String? = nil,
                                      tx: Transaction? = nil) throws -> Int64 {
        try native.publish(payload: try encode(payload), key: key, idempotencyKey: idempotencyKey, tx: tx?.native)
    }

    /// `publish` for async code: off the caller's thread where it would wait.
    @discardableResult
    public func publish<P: Encodable & Sendable>(_ payload: P, key: String? = nil, idempotencyKey: String? = nil,
                                                 isolation: isolated (any Actor)? = #isolation) async throws -> Int64 {
        let (native, encoded) = (self.native, try encode(payload))
        return try await soon(db.inline) {
            try native.publish(payload: encoded, key: key, idempotencyKey: idempotencyKey, tx: nil)
        }
    }

    /// Appends events in one transaction (up to 10,000); returns their offsets.
    @discardableResult
    public func publishMany<P: Encodable>(_ payloads: [P], key: String? = nil,
                                          tx: Transaction? = nil) throws -> [Int64] {
        try native.publishMany(payloads: try payloads.map(encode), key: key, tx: tx?.native)
    }

    @discardableResult
    public func publishMany<P: Encodable & Sendable>(_ payloads: [P], key: String? = nil,
                                                     isolation: isolated (any Actor)? = #isolation) async throws -> [Int64] {
        let (native, encoded) = (self.native, try payloads.map(encode))
        return try await offThread { try native.publishMany(payloads: encoded, key: key, tx: nil) }
    }

    /// Up to `limit` events with offsets above `after` (paging).
    public func read(after: Int64 = 0, limit: UInt32 = 100) async throws -> [StreamEvent] {
        let native = self.native
        return try await offThread { try native.read(after: after, limit: limit) }.map(StreamEvent.init)
    }

    /// Commits `nextOffset` (the next event to read) for `consumer`; it
    /// never moves back. Returns the consumer's next offset.
    @discardableResult
    public func commit(consumer: String, nextOffset: Int64, tx: Transaction? = nil) throws -> Int64 {
        try native.commit(consumer: consumer, nextOffset: nextOffset, tx: tx?.native)
    }

    /// Moves `consumer` to `nextOffset`, back or forward.
    public func seek(consumer: String, to nextOffset: Int64) async throws {
        let native = self.native
        try await offThread { try native.seek(consumer: consumer, nextOffset: nextOffset) }
    }

    /// The consumer's next offset, or nil if it has none.
    public func position(consumer: String) async throws -> Int64? {
        let native = self.native
        return try await offThread { try native.position(consumer: consumer) }
    }

    public func info() async throws -> StreamStatus {
        let native = self.native
        let i = try await offThread { try native.info() }
        return StreamStatus(length: i.length, firstOffset: i.firstOffset, lastOffset: i.lastOffset,
                            consumers: i.consumers, groups: i.groups.map(GroupStatus.init))
    }

    public func retention() async throws -> StreamRetention {
        let native = self.native
        let r = try await offThread { try native.retention() }
        return StreamRetention(maxAge: r.maxAgeMs.map { TimeInterval($0) / 1000 }, maxCount: r.maxCount,
                               trimPassed: r.trimPassed)
    }

    /// Sets the stream's retention for every process; maintenance applies it.
    public func setRetention(_ retention: StreamRetention) async throws {
        let record = StreamRetentionRecord(maxAgeMs: try millis("maxAge", retention.maxAge),
                                           maxCount: retention.maxCount, trimPassed: retention.trimPassed)
        let native = self.native
        try await offThread { try native.setRetention(retention: record) }
    }

    /// Applies the retention now; returns how many events went.
    @discardableResult
    public func trim() async throws -> UInt64 {
        let native = self.native
        return try await offThread { try native.trim() }
    }

    /// An independent consumer (see `Subscription`): from its committed
    /// offset, or `start` if it has none (stored at once). `autoCommit`
    /// commits every `commitEvery` events or `commitInterval` and on
    /// `close()` (at-least-once); without it, commit with
    /// `Subscription.commit` (`tx:` for exactly-once local effects).
    public func subscribe(consumer: String, start: StreamStart = .beginning, batch: UInt32 = 100,
                          autoCommit: Bool = true, commitEvery: UInt32 = 1000,
                          commitInterval: TimeInterval = 1, wait: TimeInterval = 1) async throws -> Subscription {
        let position = try startPosition(start)
        let auto = autoCommit
            ? AutoCommitOptions(every: commitEvery, intervalMs: try millis("commitInterval", commitInterval))
            : nil
        let waitMs = try positiveMillis(wait)
        let native = self.native
        let sub = try await offThread {
            try native.subscribe(consumer: consumer, start: position, batch: batch, autoCommit: auto)
        }
        return Subscription(db: db, sub, waitMs: waitMs)
    }
}

/// `for try await event in subscription`: each event once, in offset order,
/// from the consumer's committed place, waiting (off the caller's thread)
/// until any process publishes. An event counts as processed when the next
/// one is asked for. Cancelling the iterating Task ends the iteration at
/// once and loses nothing (the subscription stays open: iterate again, or
/// `close()`). A consumer behind retention: the iteration throws
/// `.Trimmed(message:missed:)` once; iterate again to go on.
public final class Subscription: AsyncSequence, @unchecked Sendable {
    public typealias Element = StreamEvent
    public let native: HonkerNative.Subscription
    let db: Database
    let waitMs: UInt64

    init(db: Database, _ native: HonkerNative.Subscription, waitMs: UInt64) {
        self.db = db
        self.native = native
        self.waitMs = waitMs
    }

    public var consumer: String { native.consumer() }
    public var isClosed: Bool { native.isClosed() }

    /// Commits the place after `event`: it and everything before it are
    /// processed. With `tx`, the offset commits or rolls back with your
    /// transaction.
    public func commit(_ event: StreamEvent, tx: Transaction? = nil) throws {
        try native.commit(offset: event.offset, tx: tx?.native)
    }

    /// `commit` for async code, off the caller's thread.
    public func commit(_ event: StreamEvent, isolation: isolated (any Actor)? = #isolation) async throws {
        let (native, offset) = (self.native, event.offset)
        try await offThread { try native.commit(offset: offset, tx: nil) }
    }

    /// Stops: with auto-commit, commits the place after the last event
    /// passed, and wakes a waiting iteration.
    public func close() async throws {
        let native = self.native
        try await offThread { try native.close() }
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(sub: self)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let sub: Subscription

        public mutating func next() async throws -> StreamEvent? {
            let (native, waitMs) = (sub.native, sub.waitMs)
            return try await cancellableNext(sub.db, closed: { native.isClosed() }) {
                try native.nextCancellable(waitMs: waitMs, cancel: $0)
            }.map(StreamEvent.init)
        }
    }
}

/// See `Database.listen`.
public final class Listener: AsyncSequence, @unchecked Sendable {
    public typealias Element = ChannelMessage
    public let native: HonkerNative.Listener
    let db: Database
    let waitMs: UInt64

    init(db: Database, _ native: HonkerNative.Listener, waitMs: UInt64) {
        self.db = db
        self.native = native
        self.waitMs = waitMs
    }

    public var channel: String { native.channel() }
    public var isClosed: Bool { native.isClosed() }

    /// Stops listening and wakes a waiting iteration.
    public func close() {
        native.close()
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(listener: self)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let listener: Listener

        public mutating func next() async throws -> ChannelMessage? {
            let (native, waitMs) = (listener.native, listener.waitMs)
            return try await cancellableNext(listener.db, closed: { native.isClosed() }) {
                try native.nextCancellable(waitMs: waitMs, cancel: $0)
            }.map(ChannelMessage.init)
        }
    }
}
