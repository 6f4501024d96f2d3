// The Swift surface of tests-interop: one JSON step per line on stdin, one
// JSON answer per line on stdout ({"ok": ...}, {"error": CODE, ...} or
// {"unsupported": op}). The step vocabulary is in tests-interop/README.md;
// every driver implements it. It runs inside the Debian 13 chroot.

import Foundation
@_spi(Interop) import Honker
import HonkerNative

struct Unsupported: Error {}

@MainActor
final class Driver {
    var db: Honker.Database?
    var tx: Honker.Transaction?
    var listeners: [String: HonkerNative.Listener] = [:]

    func queue(_ s: [String: Any]) throws -> Honker.Queue {
        try db!.queue(s["queue"] as! String,
                      backoffBase: (s["backoff_base_ms"] as? NSNumber).map { $0.doubleValue / 1000 },
                      backoffJitter: (s["backoff_jitter"] as? NSNumber)?.doubleValue)
    }

    func txFor(_ s: [String: Any]) -> HonkerNative.Transaction? {
        (s["in_tx"] as? Bool) == true ? tx?.native : nil
    }

    /// The driver's open transaction when the step runs in it.
    func heldTx(_ s: [String: Any]) -> Honker.Transaction? {
        (s["in_tx"] as? Bool) == true ? tx : nil
    }

    func params(_ s: [String: Any]) -> [SqlValue] {
        ((s["params"] as? [Any]) ?? []).map { v in
            switch v {
            case let n as NSNumber:
                let d = n.doubleValue
                return d == d.rounded() && abs(d) < 9e15 ? .integer(value: Int64(d)) : .real(value: d)
            case let t as String: return .text(value: t)
            default: return .null
            }
        }
    }

    func json(_ p: Payload) -> Any {
        switch p {
        case .json(let text):
            return (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) ?? NSNull()
        case .bytes(let data):
            return data.base64EncodedString()
        }
    }

    func payloadOf(_ s: [String: Any]) throws -> Payload {
        .json(text: String(decoding: try JSONSerialization.data(withJSONObject: s["payload"]!,
                                                                options: [.fragmentsAllowed]), as: UTF8.self))
    }

    /// A publish's options (core's names: tests-interop/ops.json) as the
    /// native record; the one place a new option is named by hand.
    func publishArgs(_ o: [String: Any]) -> PublishArgs {
        PublishArgs(key: o["key"] as? String, idempotencyKey: o["idempotency_key"] as? String,
                    priority: (o["priority"] as? NSNumber)?.int32Value)
    }

    /// Streams and channels through the native objects (one wait of
    /// `wait_ms` per item, off the main actor).
    func events(_ op: String, _ s: [String: Any]) async throws -> Any {
        let native = db!.native
        let waitMs = (s["wait_ms"] as? NSNumber)?.uint64Value ?? 1000
        let n = (s["n"] as? NSNumber)?.intValue ?? 1
        switch op {
        case "publish":
            return try native.stream(name: s["stream"] as! String).publish(
                payload: try payloadOf(s), options: publishArgs(s["options"] as? [String: Any] ?? [:]),
                tx: txFor(s))
        case "consume":
            let (stream, consumer) = (try native.stream(name: s["stream"] as! String), s["consumer"] as! String)
            let sub = try await Task.detached {
                try stream.subscribe(consumer: consumer, start: .beginning, batch: 100, autoCommit: nil)
            }.value
            var got: [[String: Any]] = []
            while got.count < n {
                guard let e = try await Task.detached(operation: { try sub.next(waitMs: waitMs) }).value else { break }
                got.append(["offset": e.offset, "payload": json(e.payload)])
            }
            if let last = got.last?["offset"] as? Int64 { try sub.commit(offset: last, tx: nil) }
            try sub.close()
            return got
        case "stream_read":
            return try native.stream(name: s["stream"] as! String).read(after: 0, limit: 100).map {
                ["offset": $0.offset, "key": $0.key as Any? ?? NSNull(), "priority": $0.priority] as [String: Any]
            }
        case "stream_info":
            let i = try native.stream(name: s["stream"] as! String).info()
            var lag: [String: Any] = [:]
            for c in i.consumers { lag[c.consumer] = c.lag }
            return ["length": i.length, "last_offset": i.lastOffset, "lag": lag]
        case "notify":
            return try native.notify(channel: s["channel"] as! String, payload: try payloadOf(s), tx: txFor(s))
        case "listen":
            listeners[s["channel"] as! String] = try native.listen(channel: s["channel"] as! String)
            return NSNull()
        default:  // heard
            guard let l = listeners[s["channel"] as! String] else {
                throw HonkerError.InvalidArgument(message: "listen first")
            }
            var heard: [Any] = []
            while heard.count < n {
                guard let m = try await Task.detached(operation: { try l.next(waitMs: waitMs) }).value else { break }
                heard.append(json(m.payload))
            }
            return heard
        }
    }

    /// Consumer groups through the native objects; outcomes by `(offset,
    /// token)`, as another surface hands a lease over.
    func group(_ op: String, _ s: [String: Any]) async throws -> Any {
        let g = try db!.native.stream(name: s["stream"] as! String).group(name: s["group"] as! String)
        let offset = (s["offset"] as? NSNumber)?.int64Value ?? 0
        let token = s["token"] as? String ?? ""
        switch op {
        case "group_create":
            let options = GroupArgs(maxDeliveries: (s["max_deliveries"] as? NSNumber)?.uint32Value,
                                    lease: (s["lease_ms"] as? NSNumber).map { $0.doubleValue / 1000 }, memberIdle: nil)
            return try g.create(start: .beginning, options: options)
        case "group_claim":
            let (member, n) = (s["member"] as! String, (s["n"] as? NSNumber)?.uint32Value ?? 1)
            let (leaseMs, waitMs) = ((s["lease_ms"] as? NSNumber)?.uint64Value, (s["wait_ms"] as? NSNumber)?.uint64Value ?? 0)
            let c = try await Task.detached { try g.claim(member: member, n: n, leaseMs: leaseMs, waitMs: waitMs, cancel: nil) }.value
            return c.events.map { e -> [String: Any] in
                ["offset": e.offset, "key": e.key.map { $0 as Any } ?? NSNull(), "deliveries": e.deliveries,
                 "token": e.token, "payload": json(e.payload)]
            }
        case "group_ack":
            try g.ack(offset: offset, token: token, tx: txFor(s))
            return NSNull()
        case "group_retry":
            return try g.retry(offset: offset, token: token, delayMs: nil, error: s["error"] as? String)
        case "group_fail":
            try g.fail(offset: offset, token: token, error: s["error"] as! String)
            return NSNull()
        case "group_release":
            try g.release(offset: offset, token: token)
            return NSNull()
        case "group_heartbeat":
            _ = try g.heartbeat(offset: offset, token: token, extendMs: nil)
            return NSNull()
        case "group_remove_member":
            return try g.removeMember(member: s["member"] as! String, force: (s["force"] as? Bool) ?? false)
        default:  // group_info
            let i = try g.info()
            var members: [String: Any] = [:]
            for m in i.members { members[m.member] = m.holds }
            return ["next_offset": i.nextOffset, "lag": i.lag, "pending": i.pending, "delivered": i.delivered,
                    "dead": i.dead, "members": members]
        }
    }

    /// Locks and rate limits through the idiomatic layer.
    func locks(_ op: String, _ s: [String: Any]) async throws -> Any {
        let name = s["name"] as! String
        let token = (s["token"] as? NSNumber)?.int64Value ?? 0
        switch op {
        case "lock_acquire":
            let lock = try db!.lock(name)
            let ttl = ((s["ttl_ms"] as? NSNumber)?.doubleValue ?? 0) / 1000
            let wait = ((s["wait_ms"] as? NSNumber)?.doubleValue ?? 0) / 1000
            let owner = s["owner"] as! String
            let g = wait > 0 ? try await lock.acquire(owner: owner, ttl: ttl, wait: wait)
                : try lock.tryAcquire(owner: owner, ttl: ttl, tx: heldTx(s))
            return g.map { ["token": $0.token] as Any } ?? NSNull()
        case "lock_renew":
            _ = try await db!.lock(name).renew(token: token, ttl: ((s["ttl_ms"] as? NSNumber)?.doubleValue ?? 0) / 1000)
            return NSNull()
        case "lock_release":
            return try await db!.lock(name).release(token: token)
        case "lock_fence":
            guard let tx else { throw HonkerError.InvalidArgument(message: "lock_fence needs begin") }
            try db!.lock(name).fence(tx, token: token)
            return NSNull()
        case "lock_info":
            let i = try await db!.lock(name).info()
            return i.map { ["owner": $0.owner, "token": $0.token] as Any } ?? NSNull()
        case "rate_limit_set":
            _ = try await db!.rateLimiter(name, limit: (s["limit"] as! NSNumber).int64Value,
                                          per: (s["per_ms"] as! NSNumber).doubleValue / 1000,
                                          burst: (s["burst"] as? NSNumber)?.int64Value ?? 1,
                                          update: (s["update"] as? Bool) ?? true)
            return NSNull()
        case "rate_limit_params":
            let p: RateLimit
            do {
                p = try await db!.rateLimiter(name).params()
            } catch HonkerError.NotFound {
                return NSNull()
            }
            return ["limit": p.limit, "per_ms": Int64((p.per * 1000).rounded()), "burst": p.burst]
        default:  // rate_limit_try
            let rl = try await db!.rateLimiter(name)
            let d = try rl.tryAcquire(key: s["key"] as? String ?? "", cost: (s["cost"] as? NSNumber)?.int64Value ?? 1,
                                      tx: heldTx(s))
            return ["allowed": d.allowed, "remaining": d.remaining, "retry_after_ms": Int64((d.retryAfter * 1000).rounded())]
        }
    }

    /// The scheduler: registration through the native record (the payload
    /// arrives as JSON), the rest through the idiomatic layer; `schedule_run`
    /// drives core's runner one `next` at a time so that it stops as soon as
    /// the schedule has fired enough.
    func schedules(_ op: String, _ s: [String: Any]) async throws -> Any {
        let name = s["name"] as! String
        let sched = db!.scheduler()
        switch op {
        case "schedule_add":
            let text = String(decoding: try JSONSerialization.data(withJSONObject: s["payload"] ?? NSNull(),
                                                                   options: [.fragmentsAllowed]), as: UTF8.self)
            let def = ScheduleDef(
                name: name, spec: s["schedule"] as! String, queue: s["queue"] as! String,
                payload: .json(text: text), timeZone: s["time_zone"] as? String, dayRule: nil, priority: nil,
                maxAttempts: nil, expiresMs: nil, catchUp: nil, catchUpWindowMs: nil, catchUpMax: nil,
                overlap: nil, jitterMs: nil, startAtMs: nil, endAtMs: nil)
            return try sched.native.add(def: def)
        case "schedule_info":
            guard let i = try await sched.get(name) else { return NSNull() }
            return ["time_zone": i.timeZone, "day_rule": i.dayRule, "fires": i.fires, "missed": i.missed]
        default:  // schedule_run
            let runner = sched.native.runner()
            defer { runner.close() }
            let want = (s["fires"] as! NSNumber).uint64Value
            let deadline = Date().addingTimeInterval(((s["wait_ms"] as? NSNumber)?.doubleValue ?? 0) / 1000)
            while true {
                let fires = try await sched.get(name)?.fires ?? 0
                if fires >= want || Date() > deadline { return ["fires": fires, "reached": fires >= want] }
                _ = try runner.next(waitMs: 500)
            }
        }
    }

    func run(_ s: [String: Any]) async throws -> Any {
        let op = s["op"] as! String
        switch op {
        case "pid":
            return Int(ProcessInfo.processInfo.processIdentifier)
        case "work":
            return try await work(s)
        case "open":
            tx = nil
            db = try Honker.Database(path: s["path"] as! String)
            return NSNull()
        case "close":
            tx = nil
            try db?.close()
            db = nil
            return NSNull()
        case "begin":
            tx = try db!.begin()
            return NSNull()
        case "commit":
            try tx?.native.commit()
            tx = nil
            return NSNull()
        case "rollback":
            try tx?.native.rollback()
            tx = nil
            return NSNull()
        case "exec":
            let sql = s["sql"] as! String
            if let tx {
                return try tx.native.query(sql: sql, params: params(s)).rows.map { $0.map(describe) }
            }
            try db!.execute(sql, params(s))
            return NSNull()
        case "publish", "consume", "stream_info", "stream_read", "notify", "listen", "heard":
            return try await events(op, s)
        case "group_create", "group_claim", "group_ack", "group_retry", "group_fail", "group_release",
             "group_heartbeat", "group_remove_member", "group_info":
            return try await group(op, s)
        case "lock_acquire", "lock_release", "lock_renew", "lock_fence", "lock_info", "rate_limit_set",
             "rate_limit_params", "rate_limit_try":
            return try await locks(op, s)
        case "schedule_add", "schedule_info", "schedule_run":
            return try await schedules(op, s)
        case "pause" where (s["all"] as? Bool) == true:
            try await db!.pauseAll(note: s["note"] as? String)
            return NSNull()
        case "resume" where (s["all"] as? Bool) == true:
            return try await db!.resumeAll()
        default:
            break
        }
        let q = try queue(s)
        let n = q.native
        let id = (s["id"] as? NSNumber)?.int64Value ?? 0
        let token = s["token"] as? String ?? ""
        switch op {
        case "enqueue":
            let text = String(decoding: try JSONSerialization.data(withJSONObject: s["payload"]!, options: [.fragmentsAllowed]), as: UTF8.self)
            let options = EnqueueArgs(
                delay: (s["delay_ms"] as? NSNumber).map { $0.doubleValue / 1000 }, runAt: nil,
                priority: Int32((s["priority"] as? NSNumber)?.intValue ?? 0),
                maxAttempts: (s["max_attempts"] as? NSNumber)?.uint32Value,
                dedupeKey: s["dedupe_key"] as? String,
                dedupeByPayload: s["dedupe_by_payload"] as? Bool,
                unique: s["unique"] as? String,
                uniqueFor: (s["unique_for_ms"] as? NSNumber).map { $0.doubleValue / 1000 },
                expires: nil,
                concurrencyKey: s["concurrency_key"] as? String)
            let e = try q.enqueue(jsonText: text, options: options, tx: txFor(s))
            return ["id": e.id, "existing": e.existing, "unique": e.unique.map { $0 as Any } ?? NSNull()]
        case "claim":
            let count = (s["n"] as? NSNumber)?.int64Value ?? 1
            if count < 0 || count > Int64(UInt32.max) {
                throw HonkerError.InvalidArgument(message: "batch size out of range: \(count)")
            }
            let jobs = try await q.claimBatch(
                workerId: s["worker"] as! String, n: UInt32(count),
                lease: (s["lease_ms"] as? NSNumber).map { $0.doubleValue / 1000 },
                wait: ((s["wait_ms"] as? NSNumber)?.doubleValue ?? 0) / 1000)
            return jobs.map { j -> [String: Any] in
                ["id": j.id, "token": j.token, "attempts": j.attempts,
                 "payload": (try? j.payload(as: AnyJSON.self).value) ?? NSNull()]
            }
        // A lease another surface handed over, rebuilt with public API.
        case "ack":
            let job = try await q.job(id: id, token: token)
            if let result = s["result"] {
                // The result as JSON text, through the native call (the
                // public `ack(result:)` takes an Encodable value).
                let text = String(decoding: try JSONSerialization.data(withJSONObject: result, options: [.fragmentsAllowed]),
                                  as: UTF8.self)
                try n.ack(id: id, token: token, result: .json(text: text), tx: (s["in_tx"] as? Bool) == true ? tx?.native : nil)
            } else if (s["in_tx"] as? Bool) == true, let held = tx {
                try job.ack(tx: held)
            } else {
                try await job.ack()
            }
            return NSNull()
        case "retry":
            return try await q.job(id: id, token: token).retry(
                delay: (s["delay_ms"] as? NSNumber).map { $0.doubleValue / 1000 }, error: s["error"] as? String)
        case "fail":
            try await q.job(id: id, token: token).fail(s["error"] as! String)
            return NSNull()
        case "release":
            try await q.job(id: id, token: token).release()
            return NSNull()
        case "heartbeat":
            let until = try await q.job(id: id, token: token).heartbeat(
                extend: (s["extend_ms"] as? NSNumber).map { $0.doubleValue / 1000 })
            return Int64((until.timeIntervalSince1970 * 1000).rounded())
        case "requeue_dead":
            return try await q.requeueDead(id)
        case "requeue_all_dead":
            return try await q.requeueAllDead()
        case "purge_dead":
            return try await q.purgeDead()
        case "get_result":
            return try n.getResult(id: id).map(json) ?? NSNull()
        case "cancel":
            return try await q.cancel(id, reason: s["reason"] as? String)
        case "get_job":
            let j = try n.getJob(id: id)
            return ["state": j.state, "attempts": j.attempts, "last_error": j.lastError.map { $0 as Any } ?? NSNull(),
                    "run_at_ms": j.runAtMs, "now_ms": Int64(Date().timeIntervalSince1970 * 1000)]
        case "configure":
            try await q.configure(lease: (s["lease_ms"] as? NSNumber).map { $0.doubleValue / 1000 },
                                  maxAttempts: (s["max_attempts"] as? NSNumber)?.uint32Value,
                                  backoffBase: (s["backoff_base_ms"] as? NSNumber).map { $0.doubleValue / 1000 },
                                  backoffJitter: (s["backoff_jitter"] as? NSNumber)?.doubleValue)
            return NSNull()
        case "pause":
            try await q.pause(note: s["note"] as? String)
            return NSNull()
        case "resume":
            return try await q.resume()
        case "limit_concurrency":
            try await q.limitConcurrency(maxRunning: (s["max_running"] as? NSNumber)?.uint32Value,
                                         maxRunningPerKey: (s["max_running_per_key"] as? NSNumber)?.uint32Value)
            return NSNull()
        case "set_fairness":
            try await q.setFairness(order: s["order"] as? String,
                                    keyLimit: (s["key_limit"] as? NSNumber)?.uint32Value,
                                    keyPer: (s["key_per_ms"] as? NSNumber).map { $0.doubleValue / 1000 },
                                    keyBurst: (s["key_burst"] as? NSNumber)?.uint32Value)
            return NSNull()
        case "stats":
            let st = try await q.stats()
            return ["ready": st.ready, "scheduled": st.scheduled, "running": st.running, "dead": st.dead,
                    "paused": st.paused]
        default:
            throw Unsupported()
        }
    }
}

extension Driver {
    /// Runs honker's Worker on the queue until nothing is left to run: each
    /// handler sleeps, then records a row (in its own transaction, so that a
    /// job run twice leaves two rows), and the worker acks.
    func work(_ s: [String: Any]) async throws -> Any {
        let db = self.db!
        let name = s["queue"] as! String
        let table = s["table"] as! String
        let workerId = s["worker"] as! String
        let sleepNs = UInt64((s["sleep_ms"] as! NSNumber).int64Value) * 1_000_000
        let longNs = (s["long_ms"] as? NSNumber).map { UInt64($0.int64Value) * 1_000_000 }
        let grace = ((s["grace_ms"] as? NSNumber)?.doubleValue ?? 30_000) / 1000
        let worker = try Worker(db, workerId: workerId, concurrency: (s["concurrency"] as! NSNumber).uint32Value,
                                grace: grace)
        let done = Counter()
        let leaseLost = Counter()
        worker.on(.leaseLost) { _ in leaseLost.add() }
        let started = s["started"] as? String
        let aborted = s["aborted"] as? String
        try worker.handle(name, lease: (s["lease_ms"] as! NSNumber).doubleValue / 1000) { (job: Job) in
            if let started {
                // The harness waits for this row, not for a claim: a job
                // claimed and not yet handed to a handler is only released.
                try await db.transaction { tx in
                    try tx.execute("INSERT INTO \(started) (job_id, attempts) VALUES (?, ?)",
                                   [.integer(value: job.id), .integer(value: Int64(job.attempts))])
                }
            }
            let i = (try? job.payload(as: [String: Int].self))?["i"]
            do {
                try await Task.sleep(nanoseconds: i == 0 ? longNs ?? sleepNs : sleepNs)
            } catch {
                // Told to stop (its job cancelled elsewhere, a timeout, a shutdown).
                if let aborted {
                    _ = try db.execute("INSERT INTO \(aborted) (job_id, attempts) VALUES (?, ?)",
                                       [.integer(value: job.id), .integer(value: Int64(job.attempts))])
                }
                throw error
            }
            try await db.transaction { tx in
                try tx.execute("INSERT INTO \(table) (job_id, attempts, worker) VALUES (?, ?, ?)",
                               [.integer(value: job.id), .integer(value: Int64(job.attempts)), .text(value: workerId)])
            }
            done.add()
        }
        let q = try db.queue(name)
        let until = (s["until"] as? NSNumber)?.intValue
        let skipsTable = s["skips"] as? String
        let watch = Task {
            var skips: UInt64? = nil
            while !worker.isStopping {
                if let skipsTable {
                    // The looks that found the queue's work held by a pause,
                    // as the worker reports them, where the harness reads them.
                    let n = worker.paused[name] ?? 0
                    if n != skips {
                        skips = n
                        _ = try db.execute("INSERT OR REPLACE INTO \(skipsTable) (worker, n) VALUES (?, ?)",
                                           [.text(value: workerId), .integer(value: Int64(n))])
                    }
                }
                if let until {
                    let count = try db.query("SELECT count(*) FROM \(table)")
                    if case .integer(let c)? = count.first?[0], c >= until { worker.stop() }
                    try await Task.sleep(nanoseconds: 10_000_000)
                    continue
                }
                let st = try await q.stats()
                if st.ready + st.scheduled + st.running == 0 { worker.stop() }
                try await Task.sleep(nanoseconds: 100_000_000)
            }
        }
        try await worker.run(signals: (s["signals"] as? Bool) == true)
        watch.cancel()
        return ["done": done.value, "lease_lost": leaseLost.value]
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add() { lock.lock(); n += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return n }
}

func describe(_ v: SqlValue) -> Any {
    switch v {
    case .null: return NSNull()
    case .integer(let i): return i
    case .real(let d): return d
    case .text(let t): return t
    case .blob(let b): return b.base64EncodedString()
    }
}

/// Any JSON value, decoded (payloads are whatever another surface enqueued).
struct AnyJSON: Decodable {
    let value: Any
    init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { value = NSNull() }
        else if let b = try? c.decode(Bool.self) { value = b }
        else if let i = try? c.decode(Int64.self) { value = i }
        else if let d = try? c.decode(Double.self) { value = d }
        else if let s = try? c.decode(String.self) { value = s }
        else if let a = try? c.decode([AnyJSON].self) { value = a.map(\.value) }
        else { value = try c.decode([String: AnyJSON].self).mapValues(\.value) }
    }
}

@main
struct Main {
    static func main() async {
        let d = Driver()
        while let line = readLine() {
            let step = try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            var reply: [String: Any]
            do {
                reply = ["ok": try await d.run(step)]
            } catch let e as HonkerError {
                reply = ["error": e.code, "message": "\(e)"]
            } catch is Unsupported {
                reply = ["unsupported": step["op"] as! String]
            } catch {
                reply = ["error": "INTERNAL", "message": "\(error)"]
            }
            let data = try! JSONSerialization.data(withJSONObject: reply, options: [.fragmentsAllowed])
            // One unbuffered write per answer (print's stdout is buffered).
            FileHandle.standardOutput.write(data + Data("\n".utf8))
        }
    }
}
