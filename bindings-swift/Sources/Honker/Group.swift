// Consumer groups for Swift: competing members on a stream, each event
// handled by one of them under a lease and a token (ack, retry, fail,
// release, heartbeat); events of one key in offset order and one at a time;
// dead letters after `maxDeliveries`. At-least-once: an event whose lease
// lapses runs again on another member; ack with `tx:` inside the
// transaction that records its effect to make a local effect exactly-once.

import Foundation
import HonkerNative

public typealias GroupMember = HonkerNative.GroupMember

/// An event delivered to a member of a group, leased until
/// `leaseExpiresAt`. Its outcomes present the lease token: once the lease is
/// lost (lapsed and reclaimed, or the event finished) they throw
/// `.LeaseLost` and change nothing.
public struct GroupEvent: Sendable {
    /// Its offset in the stream.
    public let offset: Int64
    /// Its key: events of one key are handed out in order, one at a time.
    public let key: String?
    /// When it was published.
    public let createdAt: Date
    /// How many times it has been delivered, this one included.
    public let deliveries: UInt32
    /// The lease token every outcome presents.
    public let token: String
    /// When the lease lapses unless extended.
    public let leaseExpiresAt: Date
    let payload: Payload

    init(_ e: HonkerNative.GroupEvent) {
        offset = e.offset
        key = e.key
        createdAt = date(e.createdAtMs)
        deliveries = e.deliveries
        token = e.token
        leaseExpiresAt = date(e.leaseExpiresAtMs)
        payload = e.payload
    }

    /// The payload decoded (`Data` for bytes).
    public func payload<T: Decodable>(as type: T.Type) throws -> T {
        try decode(payload, as: type)
    }
}

/// An event in a group's dead letters.
public struct GroupDeadLetter: Sendable {
    public let offset: Int64
    public let key: String?
    public let createdAt: Date
    /// How many times it was delivered.
    public let deliveries: UInt32
    public let lastError: String?
    public let diedAt: Date
    let payload: Payload

    init(_ d: HonkerNative.GroupDeadLetter) {
        offset = d.offset
        key = d.key
        createdAt = date(d.createdAtMs)
        deliveries = d.deliveries
        lastError = d.lastError
        diedAt = date(d.diedAtMs)
        payload = d.payload
    }

    public func payload<T: Decodable>(as type: T.Type) throws -> T {
        try decode(payload, as: type)
    }
}

/// A group's options, kept in the file (every process sees them).
public struct GroupOptions: Sendable, Equatable {
    /// Deliveries before an event goes to the dead letters (1 to 1,000).
    public var maxDeliveries: UInt32
    /// The lease a claim takes when it names none (1 ms to 24 h).
    public var lease: TimeInterval
    /// A member idle this long and holding nothing is removed by
    /// maintenance (1 s to 365 days).
    public var memberIdle: TimeInterval

    /// The defaults: 5 deliveries, a 60 s lease, 24 h idle.
    public init(maxDeliveries: UInt32 = 5, lease: TimeInterval = 60, memberIdle: TimeInterval = 86_400) {
        self.maxDeliveries = maxDeliveries
        self.lease = lease
        self.memberIdle = memberIdle
    }
}

/// What `Group.info()` (and each of `StreamStatus.groups`) reports.
public struct GroupStatus: Sendable {
    public let group: String
    /// The next offset the group takes in.
    public let nextOffset: Int64
    /// Events published and not finished by the group.
    public let lag: Int64
    /// Events taken in and not finished (waiting, ready or delivered).
    public let pending: Int64
    /// Of those, delivered now.
    public let delivered: Int64
    public let dead: Int64
    /// Age of the oldest pending event, if any.
    public let oldestPendingAge: TimeInterval?
    public let members: [GroupMember]
    public let options: GroupOptions

    init(_ i: GroupInfoRecord) {
        group = i.group
        nextOffset = i.nextOffset
        lag = i.lag
        pending = i.pending
        delivered = i.delivered
        dead = i.dead
        oldestPendingAge = i.oldestPendingAgeMs.map { TimeInterval($0) / 1000 }
        members = i.members
        options = GroupOptions(maxDeliveries: i.maxDeliveries, lease: TimeInterval(i.leaseMs) / 1000,
                               memberIdle: TimeInterval(i.memberIdleMs) / 1000)
    }
}

extension Stream {
    /// A handle on the consumer group `name` (creating it writes nothing;
    /// `create` makes the group).
    public func group(_ name: String) throws -> Group {
        Group(stream: self, try native.group(name: name))
    }
}

/// A handle on one consumer group. Thread-safe.
public final class Group: @unchecked Sendable {
    public let native: HonkerNative.Group
    let db: Database
    /// The stream it reads.
    public let stream: Stream
    // The tokens of events finished through this handle while a Worker
    // runs the group: a handler that acked its event itself settles it.
    private let lock = NSLock()
    private var tracking = false
    private var settled: Set<String> = []

    init(stream: Stream, _ native: HonkerNative.Group) {
        self.db = stream.db
        self.stream = stream
        self.native = native
    }

    public var name: String { native.name() }

    func tracksSettled() {
        lock.lock()
        tracking = true
        lock.unlock()
    }

    private func noteSettled(_ token: String) {
        lock.lock()
        if tracking { settled.insert(token) }
        lock.unlock()
    }

    /// Whether the event with `token` was finished through this handle (and
    /// forgets it).
    func takeSettled(_ token: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return settled.remove(token) != nil
    }

    /// Creates the group at `start`; returns its next offset. Idempotent: an
    /// existing group keeps its place and takes `options`.
    @discardableResult
    public func create(start: StreamStart = .beginning, options: GroupOptions = GroupOptions()) async throws -> Int64 {
        let position = try startPosition(start)
        let leaseMs: UInt64 = try millis("lease", options.lease)
        let idleMs: UInt64 = try millis("memberIdle", options.memberIdle)
        let record = GroupOptionsRecord(maxDeliveries: options.maxDeliveries, leaseMs: leaseMs, memberIdleMs: idleMs)
        let native = self.native
        return try await offThread { try native.create(start: position, options: record) }
    }

    /// Deletes the group with its pending events, dead letters and members.
    @discardableResult
    public func delete() async throws -> Bool {
        let native = self.native
        return try await offThread { try native.delete() }
    }

    /// Up to `n` events for `member`, leased for `lease` (the group's when
    /// nil), waiting up to `wait` for something claimable; and how many
    /// events the stream's age limit removed before the group handled them.
    public func claim(member: String, n: UInt32 = 1, lease: TimeInterval? = nil,
                      wait: TimeInterval = 0) async throws -> (events: [GroupEvent], missed: UInt64) {
        let (leaseMs, waitMs) = (try millis("lease", lease), try millis("wait", wait))
        let native = self.native
        let c = try await offThread { try native.claim(member: member, n: n, leaseMs: leaseMs, waitMs: waitMs) }
        return (c.events.map(GroupEvent.init), c.missed)
    }

    /// The group is done with `event`; the next event of its key gets its
    /// turn. With `tx`, the ack commits or rolls back with your transaction.
    public func ack(_ event: GroupEvent, tx: Transaction? = nil) throws {
        try native.ack(offset: event.offset, token: event.token, tx: tx?.native)
        noteSettled(event.token)
    }

    /// `ack` for async code, off the caller's thread.
    public func ack(_ event: GroupEvent, isolation: isolated (any Actor)? = #isolation) async throws {
        let (native, offset, token) = (self.native, event.offset, event.token)
        try await offThread { try native.ack(offset: offset, token: token, tx: nil) }
        noteSettled(token)
    }

    /// A failed delivery: claimable again after `delay` (at once when nil),
    /// recording `error`. Returns true when the event died.
    @discardableResult
    public func retry(_ event: GroupEvent, delay: TimeInterval? = nil, error: String? = nil) async throws -> Bool {
        let (native, offset, token) = (self.native, event.offset, event.token)
        let delayMs = try millis("delay", delay)
        let died = try await offThread { try native.retry(offset: offset, token: token, delayMs: delayMs, error: error) }
        noteSettled(token)
        return died
    }

    /// Sends `event` to the dead letters now, with `error`.
    public func fail(_ event: GroupEvent, error: String) async throws {
        let (native, offset, token) = (self.native, event.offset, event.token)
        try await offThread { try native.fail(offset: offset, token: token, error: error) }
        noteSettled(token)
    }

    /// Gives `event` back, claimable at once, its delivery not counted.
    public func release(_ event: GroupEvent) async throws {
        let (native, offset, token) = (self.native, event.offset, event.token)
        try await offThread { try native.release(offset: offset, token: token) }
        noteSettled(token)
    }

    /// Extends the lease to now + `extend` (the group's lease when nil);
    /// returns its new end.
    @discardableResult
    public func heartbeat(_ event: GroupEvent, extend: TimeInterval? = nil) async throws -> Date {
        let (native, offset, token) = (self.native, event.offset, event.token)
        let extendMs = try millis("extend", extend)
        return date(try await offThread { try native.heartbeat(offset: offset, token: token, extendMs: extendMs) })
    }

    /// Removes `member`; one holding events throws `.InvalidArgument` unless
    /// `force`, and then its events are claimable at once. Returns how many
    /// it held.
    @discardableResult
    public func removeMember(_ member: String, force: Bool = false) async throws -> Int64 {
        let native = self.native
        return try await offThread { try native.removeMember(member: member, force: force) }
    }

    /// Up to `limit` dead letters with offsets above `after`.
    public func dead(after: Int64 = 0, limit: UInt32 = 100) async throws -> [GroupDeadLetter] {
        let native = self.native
        return try await offThread { try native.dead(after: after, limit: limit) }.map(GroupDeadLetter.init)
    }

    /// Makes the dead letter at `offset` claimable again (`.NotFound` if it
    /// is not one).
    public func redrive(_ offset: Int64) async throws {
        let native = self.native
        try await offThread { try native.redrive(offset: offset) }
    }

    /// Re-drives every dead letter; returns how many.
    @discardableResult
    public func redriveAll() async throws -> UInt64 {
        let native = self.native
        return try await offThread { try native.redriveAll() }
    }

    public func info() async throws -> GroupStatus {
        let native = self.native
        return GroupStatus(try await offThread { try native.info() })
    }

    /// `for try await event in group.consume(member: "m1")`: this member's
    /// events (see `GroupConsumer`), claimed `batch` at once.
    public func consume(member: String, batch: UInt32 = 10, lease: TimeInterval? = nil,
                        wait: TimeInterval = 1) throws -> GroupConsumer {
        let waitMs = try positiveMillis(wait)
        let c = try native.consume(member: member, batch: batch, leaseMs: try millis("lease", lease))
        return GroupConsumer(group: self, c, waitMs: waitMs)
    }
}

/// A member's events, one at a time, waiting (off the caller's thread) until
/// something is claimable. Finish each one through the group (`ack`,
/// `retry`, `fail`, `release`); one left alone comes back after its lease.
/// Cancelling the iterating Task ends the iteration at once and loses
/// nothing; `close()` releases the events claimed and not handed out. Behind
/// the stream's age limit the iteration throws `.Trimmed(message:missed:)`
/// once; iterate again to go on.
public final class GroupConsumer: AsyncSequence, @unchecked Sendable {
    public typealias Element = GroupEvent
    public let native: HonkerNative.GroupConsumer
    public let group: Group
    let waitMs: UInt64

    init(group: Group, _ native: HonkerNative.GroupConsumer, waitMs: UInt64) {
        self.group = group
        self.native = native
        self.waitMs = waitMs
    }

    public var member: String { native.member() }
    public var isClosed: Bool { native.isClosed() }

    /// Stops and releases the events claimed and not handed out; returns how
    /// many.
    @discardableResult
    public func close() async -> UInt64 {
        let native = self.native
        return (try? await offThread { native.close() }) ?? 0
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(consumer: self)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let consumer: GroupConsumer

        public mutating func next() async throws -> GroupEvent? {
            let (native, waitMs) = (consumer.native, consumer.waitMs)
            return try await cancellableNext(consumer.group.db, closed: { native.isClosed() }) {
                try native.nextCancellable(waitMs: waitMs, cancel: $0)
            }.map(GroupEvent.init)
        }
    }
}
