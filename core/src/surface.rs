//! The records that cross into every language, declared once.
//!
//! [`records!`](crate::records) is a table, not a type: each binding passes it
//! the name of its own `macro_rules!` emitter, which receives every record as
//!
//! ```text
//! #[doc = "..."]*  Name from $crate::CoreType {
//!     #[doc = "..."]*  field: [WireType] = core_field(.sub)*,
//!     ...
//! }
//! ```
//!
//! and writes its native struct with its own derives (napi object, UniFFI
//! record, PyO3 tuple), plus `From<CoreType>` through its own conversion
//! trait (a job state becomes its code, a payload the binding's payload
//! type, a `u64` count a JS number). `core/examples/facts.rs` expands the
//! same table into JSON, from which `scripts/facts.py` writes each
//! language's wrapper declarations (Python dataclasses, TypeScript
//! interfaces, Swift structs) and checks them in CI.
//!
//! Conventions the generators rely on, so keep them: a field named `*_at_ms`
//! is an instant (ms since the Unix epoch: a `datetime`/`Date` in the
//! wrappers); another `*_ms` is a duration in ms; `[Payload]` is the
//! binding's payload type; `state` is a [`JobState`](crate::JobState) code.
//! Docs are `#[doc = "..."]` literals: napi-derive renders `///` comments
//! that went through `macro_rules!` as raw-string tokens.
//!
//! Adding a field here changes every surface at once: the native structs
//! follow at compile time, the wrappers when `python3 scripts/facts.py`
//! rewrites them (`--check` fails CI until it has).

/// The table of records every surface exposes; see the module docs.
#[macro_export]
macro_rules! records {
    ($emit:ident) => {
        $emit! {
            #[doc = "What an enqueue returns: the job's id, and whether a live job already held the"]
            #[doc = "dedupe key (then `id` is that job's)."]
            Enqueued from $crate::Enqueued {
                #[doc = "The job's id."]
                id: [i64] = id,
                #[doc = "True when the dedupe key was held: nothing was added, `id` is the holder's."]
                existing: [bool] = existing,
                #[doc = "The mode that acted when nothing was added: \"live\", \"period\", \"throttle\" or"]
                #[doc = "\"debounce\" (the pending holder took this payload and run time)."]
                unique: [Option<String>] = unique,
            }

            #[doc = "A claimed job, leased to its worker until `lease_expires_at_ms`."]
            ClaimedJob from $crate::Job {
                #[doc = "Unique, never reused."]
                id: [i64] = id,
                #[doc = "What the producer enqueued."]
                payload: [Payload] = payload,
                #[doc = "Claims so far, including this one (1 on the first run)."]
                attempts: [u32] = attempts,
                #[doc = "Attempts allowed before the job is dead-lettered."]
                max_attempts: [u32] = max_attempts,
                #[doc = "The job's priority (higher first)."]
                priority: [i32] = priority,
                #[doc = "When the job became due."]
                run_at_ms: [i64] = run_at,
                #[doc = "When the job was enqueued."]
                created_at_ms: [i64] = created_at,
                #[doc = "When the lease lapses unless extended."]
                lease_expires_at_ms: [i64] = lease_expires_at,
                #[doc = "The lease token every verb on the job presents."]
                token: [String] = lease.token,
                #[doc = "The producer's W3C trace context (`traceparent`, `tracestate`), if it had one."]
                trace_context: [Option<String>] = trace_context,
            }

            #[doc = "A job in any state, as a lookup or the dead letters report it (no lease token)."]
            JobInfo from $crate::JobInfo {
                #[doc = "The job's id."]
                id: [i64] = id,
                #[doc = "Its queue."]
                queue: [String] = queue,
                #[doc = "Its logical state (a scheduled job that is due reports `ready`)."]
                state: [String] = state,
                #[doc = "Its payload."]
                payload: [Payload] = payload,
                #[doc = "Its priority (higher first)."]
                priority: [i32] = priority,
                #[doc = "When it is (or was) due."]
                run_at_ms: [i64] = run_at,
                #[doc = "Claims so far."]
                attempts: [u32] = attempts,
                #[doc = "Attempts allowed."]
                max_attempts: [u32] = max_attempts,
                #[doc = "Its dedupe key, if any."]
                dedupe_key: [Option<String>] = dedupe_key,
                #[doc = "Its concurrency key, if any (what `max_running_per_key` counts)."]
                concurrency_key: [Option<String>] = concurrency_key,
                #[doc = "When it expires unless started, if it can."]
                expires_at_ms: [Option<i64>] = expires_at,
                #[doc = "When it was enqueued."]
                created_at_ms: [i64] = created_at,
                #[doc = "The worker holding (or that last held) it."]
                worker_id: [Option<String>] = worker_id,
                #[doc = "The last error, or the cancel reason."]
                last_error: [Option<String>] = last_error,
                #[doc = "When the current lease lapses (running jobs only)."]
                lease_expires_at_ms: [Option<i64>] = lease_expires_at,
                #[doc = "When it finished (finished jobs only)."]
                finished_at_ms: [Option<i64>] = finished_at,
                #[doc = "The producer's W3C trace context (`traceparent`, `tracestate`), if it had one."]
                trace_context: [Option<String>] = trace_context,
            }

            #[doc = "Counts per state for one queue."]
            QueueStats from $crate::QueueStats {
                #[doc = "Due and waiting for a worker."]
                ready: [u64] = ready,
                #[doc = "Waiting for a future run time."]
                scheduled: [u64] = scheduled,
                #[doc = "Leased to a worker (including `lapsed`)."]
                running: [u64] = running,
                #[doc = "Running jobs whose lease has lapsed (the next claim reclaims them)."]
                lapsed: [u64] = lapsed,
                #[doc = "Dead letters."]
                dead: [u64] = dead,
                #[doc = "Cancelled jobs still retained."]
                cancelled: [u64] = cancelled,
                #[doc = "Expired jobs still retained."]
                expired: [u64] = expired,
                #[doc = "Completed jobs still retained (only with a completed retention)."]
                completed: [u64] = completed,
                #[doc = "How long the oldest due job has waited, if any is due."]
                oldest_ready_age_ms: [Option<i64>] = oldest_ready_age_ms,
                #[doc = "Paused (its own pause or all queues'): no claim returns its jobs."]
                paused: [bool] = paused,
                #[doc = "At most this many of its jobs run at once, if capped (`limit_concurrency`)."]
                max_running: [Option<u32>] = max_running,
                #[doc = "At most this many jobs of one concurrency key run at once, if capped."]
                max_running_per_key: [Option<u32>] = max_running_per_key,
                #[doc = "Its claims take its concurrency keys in turn (`set_fairness`)."]
                round_robin: [bool] = round_robin,
                #[doc = "At most this many jobs of one concurrency key start per `key_per_ms`, if limited."]
                key_limit: [Option<u32>] = key_limit,
                #[doc = "The period of `key_limit`."]
                key_per_ms: [Option<i64>] = key_per_ms,
            }

            #[doc = "One event of a stream."]
            StreamEvent from $crate::stream::Event {
                #[doc = "Its offset: dense and gap-free from 1 within its stream."]
                offset: [i64] = offset,
                #[doc = "The label it was published with, if any."]
                key: [Option<String>] = key,
                #[doc = "Its payload."]
                payload: [Payload] = payload,
                #[doc = "When it was published."]
                created_at_ms: [i64] = created_at,
                #[doc = "The producer's W3C trace context (`traceparent`, `tracestate`), if it had one."]
                trace_context: [Option<String>] = trace_context,
                #[doc = "The priority it was published with (0 unless given)."]
                priority: [i32] = priority,
            }

            #[doc = "A consumer's place in a stream."]
            ConsumerInfo from $crate::stream::ConsumerInfo {
                #[doc = "The consumer's name."]
                consumer: [String] = consumer,
                #[doc = "The next offset it reads."]
                next_offset: [i64] = next_offset,
                #[doc = "Events published that it has not passed yet."]
                lag: [i64] = lag,
            }

            #[doc = "One notification, as a listener receives it."]
            Notification from $crate::channel::Notification {
                #[doc = "Its id: global, increasing in commit order, never reused."]
                id: [i64] = id,
                #[doc = "Its number within its channel, dense from 1."]
                seq: [i64] = seq,
                #[doc = "Its payload."]
                payload: [Payload] = payload,
                #[doc = "When it was sent."]
                created_at_ms: [i64] = created_at,
            }

            #[doc = "An event delivered to a member of a consumer group, leased until"]
            #[doc = "`lease_expires_at_ms`."]
            GroupEvent from $crate::stream::group::GroupEvent {
                #[doc = "Its offset in the stream."]
                offset: [i64] = offset,
                #[doc = "Its key: events of one key are handed out in order, one at a time."]
                key: [Option<String>] = key,
                #[doc = "Its payload."]
                payload: [Payload] = payload,
                #[doc = "When it was published."]
                created_at_ms: [i64] = created_at,
                #[doc = "How many times it has been delivered, this one included."]
                deliveries: [u32] = deliveries,
                #[doc = "The lease token every outcome presents."]
                token: [String] = token,
                #[doc = "When the lease lapses unless extended."]
                lease_expires_at_ms: [i64] = lease_expires_at,
                #[doc = "The producer's W3C trace context (`traceparent`, `tracestate`), if it had one."]
                trace_context: [Option<String>] = trace_context,
                #[doc = "The priority it was published with (0 unless given)."]
                priority: [i32] = priority,
            }

            #[doc = "An event in a consumer group's dead letters."]
            GroupDeadLetter from $crate::stream::group::DeadEvent {
                #[doc = "Its offset in the stream."]
                offset: [i64] = offset,
                #[doc = "Its key, if any."]
                key: [Option<String>] = key,
                #[doc = "Its payload."]
                payload: [Payload] = payload,
                #[doc = "When it was published."]
                created_at_ms: [i64] = created_at,
                #[doc = "How many times it was delivered."]
                deliveries: [u32] = deliveries,
                #[doc = "Its last error."]
                last_error: [Option<String>] = last_error,
                #[doc = "When it died."]
                died_at_ms: [i64] = died_at,
            }

            #[doc = "A member of a consumer group."]
            GroupMember from $crate::stream::group::MemberInfo {
                #[doc = "Its name."]
                member: [String] = member,
                #[doc = "When it first claimed."]
                joined_at_ms: [i64] = joined_at,
                #[doc = "Its last claim or heartbeat."]
                seen_at_ms: [i64] = seen_at,
                #[doc = "How many events it holds now."]
                holds: [i64] = holds,
            }

            #[doc = "A lock granted: its fencing token and its expiry."]
            LockGrant from $crate::lock::LockGrant {
                #[doc = "The fencing token: greater than every earlier grant's, for any name."]
                token: [i64] = token,
                #[doc = "When the lock lapses unless renewed."]
                expires_at_ms: [i64] = expires_at,
            }

            #[doc = "A lock's holder."]
            LockInfo from $crate::lock::LockInfo {
                #[doc = "The lock's name."]
                name: [String] = name,
                #[doc = "Who holds it."]
                owner: [String] = owner,
                #[doc = "The holder's fencing token."]
                token: [i64] = token,
                #[doc = "When it was granted."]
                acquired_at_ms: [i64] = acquired_at,
                #[doc = "When it lapses unless renewed (in the past: lapsed, free to take)."]
                expires_at_ms: [i64] = expires_at,
            }

            #[doc = "A rate limiter's answer to a check."]
            RateDecision from $crate::rate::RateDecision {
                #[doc = "Whether the call is allowed (and its cost taken)."]
                allowed: [bool] = allowed,
                #[doc = "The limiter's limit (calls per period)."]
                limit: [i64] = limit,
                #[doc = "Calls of cost 1 the key would admit now, after this one."]
                remaining: [i64] = remaining,
                #[doc = "How long until this call would be allowed (0 when allowed)."]
                retry_after_ms: [i64] = retry_after,
                #[doc = "How long until the key is fully refilled."]
                reset_after_ms: [i64] = reset_after,
            }

            #[doc = "A schedule as stored in the file, with its state (what `list` and `get` return)."]
            ScheduleInfo from $crate::schedule::ScheduleInfo {
                #[doc = "Its unique name."]
                name: [String] = schedule.name,
                #[doc = "The queue its jobs go on."]
                queue: [String] = schedule.queue,
                #[doc = "Its rule: a cron expression, a macro, or `@every <duration>`."]
                spec: [String] = schedule.spec,
                #[doc = "The IANA time zone its cron is evaluated in."]
                time_zone: [String] = schedule.time_zone,
                #[doc = "`or` (Vixie's day-of-month OR day-of-week) or `and` (Honker's)."]
                day_rule: [String] = schedule.day_rule,
                #[doc = "Every fired job's payload."]
                payload: [Payload] = schedule.payload,
                #[doc = "The fired jobs' priority."]
                priority: [i32] = schedule.priority,
                #[doc = "The fired jobs' attempts (none: the queue's)."]
                max_attempts: [Option<u32>] = schedule.max_attempts,
                #[doc = "A fired job not started this long after its fire time expires."]
                expires_ms: [Option<i64>] = schedule.expires,
                #[doc = "`skip`, `latest` or `all`: what boundaries missed while no scheduler ran do."]
                catch_up: [String] = schedule.catch_up,
                #[doc = "Boundaries older than this are never fired, only counted as missed."]
                catch_up_window_ms: [i64] = schedule.catch_up_window,
                #[doc = "At most this many fires in one catch-up under `all`."]
                catch_up_max: [u32] = schedule.catch_up_max,
                #[doc = "`allow`, `skip` or `buffer_one`: what a fire does while the last job is live."]
                overlap: [String] = schedule.overlap,
                #[doc = "Each job runs up to this much after its boundary (stable per boundary)."]
                jitter_ms: [i64] = schedule.jitter,
                #[doc = "No boundary before this fires."]
                start_at_ms: [Option<i64>] = schedule.start_at,
                #[doc = "No boundary after this fires."]
                end_at_ms: [Option<i64>] = schedule.end_at,
                #[doc = "Whether it is paused."]
                paused: [bool] = paused,
                #[doc = "The note given when it was paused."]
                note: [Option<String>] = note,
                #[doc = "The next boundary due (none once it has ended)."]
                next_fire_at_ms: [Option<i64>] = next_fire_at,
                #[doc = "The last boundary fired."]
                last_fire_at_ms: [Option<i64>] = last_fire_at,
                #[doc = "The job of the last fire."]
                last_job_id: [Option<i64>] = last_job_id,
                #[doc = "A boundary held back by `buffer_one` until the last job is done."]
                buffered_at_ms: [Option<i64>] = buffered_at,
                #[doc = "Boundaries fired."]
                fires: [u64] = fires,
                #[doc = "Boundaries missed (older than the window, or dropped by the catch-up policy)."]
                missed: [u64] = missed,
                #[doc = "Boundaries skipped by the overlap policy."]
                overlap_skipped: [u64] = overlap_skipped,
            }

            #[doc = "One fire: a schedule's boundary and the job it put on the queue."]
            Fire from $crate::schedule::Fire {
                #[doc = "The schedule's name."]
                schedule: [String] = schedule,
                #[doc = "The queue."]
                queue: [String] = queue,
                #[doc = "The boundary: the job's scheduled time (before jitter)."]
                fire_at_ms: [i64] = fire_at,
                #[doc = "The job, if one was put on the queue."]
                job_id: [Option<i64>] = job_id,
            }

            #[doc = "What one maintenance pass removed, by kind of record."]
            MaintenanceReport from $crate::MaintenanceReport {
                #[doc = "Dead letters removed."]
                dead: [u64] = dead,
                #[doc = "Cancelled and expired records removed."]
                cancelled: [u64] = cancelled,
                #[doc = "Completed records removed."]
                completed: [u64] = completed,
                #[doc = "Results removed."]
                results: [u64] = results,
                #[doc = "Stream events removed by their streams' retention."]
                stream_events: [u64] = stream_events,
                #[doc = "Idempotency keys of publishes forgotten after their window."]
                publish_keys: [u64] = publish_keys,
                #[doc = "Notifications removed after their channels' window."]
                notifications: [u64] = notifications,
                #[doc = "Consumer group members removed after their group's idle time."]
                group_members: [u64] = group_members,
                #[doc = "Lock holders removed after their TTL lapsed."]
                locks: [u64] = locks,
                #[doc = "Rate limit keys removed once fully refilled (idle)."]
                rate_limit_keys: [u64] = rate_limit_keys,
                #[doc = "Queues' key rows (turns, rate limits per key) that carried nothing any more."]
                queue_keys: [u64] = queue_keys,
                #[doc = "Unique holds (`period`, `throttle`) removed once they held nothing."]
                unique_holds: [u64] = unique_holds,
                #[doc = "Schedule fire records removed once older than their catch-up window."]
                schedule_fires: [u64] = schedule_fires,
            }
        }
    };
}

/// The options of each verb that takes some, declared once: what a caller
/// may pass besides the verb's own arguments, as every surface takes them.
///
/// Each entry reads
///
/// ```text
/// #[doc = "..."]*  Noun.verb(args) -> [Wire] with Name into $crate::CoreOptions [flags] {
///     #[doc = "..."]*  field: [WireType] = core_field,
///     ...
/// }
/// ```
///
/// `Name` is the binding's input record (a napi object, a UniFFI record, a
/// Python tuple in declaration order); each field crosses as `Option` of
/// its wire type, and one given replaces the core options' default
/// (`Default::default()`) through `Into` (so `[String]` fills an
/// `Option<String>`). Flags: `tx` (the verb takes the caller's transaction),
/// `traced` (it carries the producer's trace context), `json` (its core
/// options are read from JSON by this entry, [`FromJsonOptions`]: one entry
/// per core options type). `args` are the
/// verb's positional arguments (`payload` is the binding's payload) and
/// `[Wire]` what it returns. A field without docs has those of the same field
/// in an earlier entry. An entry with no fields (`{}`) takes the options of
/// the earlier entry that names the same record (`enqueue_many` takes
/// `enqueue`'s `EnqueueArgs`): one record, not a twin.
/// `core/examples/facts.rs` prints the table, from which `scripts/facts.py`
/// writes each host's signatures, checks and declarations (Python's sync and
/// async twins, the JS checks and `.d.ts` interfaces, Swift's overloads); the
/// field names follow the records' conventions.
///
/// Adding an option is a field of the core options, a row here and the
/// core code that uses it: the native records follow at compile time, the
/// hosts when `python3 scripts/facts.py` rewrites them.
#[macro_export]
macro_rules! options {
    ($emit:ident) => {
        $emit! {
            #[doc = "Adds a job (its payload JSON, or bytes). With `tx`, the job commits or rolls back"]
            #[doc = "with your transaction (the outbox)."]
            Queue.enqueue(payload) -> [Enqueued] with EnqueueArgs into $crate::EnqueueOptions [tx traced on] {
                #[doc = "Run no earlier than this long from now (not with `run_at`)."]
                delay: [Duration] = delay,
                #[doc = "Run no earlier than this time (a past time means now; not with `delay`)."]
                run_at: [Instant] = run_at,
                #[doc = "Higher runs first among due jobs (any 32-bit integer)."]
                priority: [i32] = priority,
                #[doc = "Attempts before the job is dead-lettered (1 to 1,000); the queue's by default."]
                max_attempts: [Attempts] = max_attempts,
                #[doc = "While a live (ready, scheduled or running) job of this queue holds this key,"]
                #[doc = "enqueue returns that job (`existing`) instead of adding one (up to 512 bytes)."]
                dedupe_key: [String] = dedupe_key,
                #[doc = "The dedupe key is (also) the payload's digest, of its JSON value (keys in any"]
                #[doc = "order): the same payload is one job."]
                dedupe_by_payload: [bool] = dedupe_by_payload,
                #[doc = "How the dedupe key holds: \"live\" (while its job is live: the default),"]
                #[doc = "\"period\" (also for `unique_for` after it completed), \"throttle\" (also for"]
                #[doc = "`unique_for` after this enqueue), \"debounce\" (a later enqueue replaces the pending"]
                #[doc = "job's payload, run time and priority)."]
                unique: [String] = unique,
                #[doc = "The period of `unique` \"period\" or \"throttle\" (1 ms to 366 days)."]
                unique_for: [Duration] = unique_for,
                #[doc = "A job not started this long after enqueue expires instead of running."]
                expires: [Duration] = expires,
                #[doc = "The key the queue's `max_running_per_key` counts: at most that many jobs of one"]
                #[doc = "key run at once, in every process (up to 512 bytes)."]
                concurrency_key: [String] = concurrency_key,
            }

            #[doc = "Adds one job per payload, all in one transaction (up to 10,000), each with the"]
            #[doc = "options."]
            Queue.enqueue_many(payloads) -> [Vec<Enqueued>] with EnqueueArgs into $crate::EnqueueOptions [tx traced] {}

            #[doc = "Stores the queue's settings in the file, for every process and language: handles"]
            #[doc = "made afterwards (`db.queue(name)`, a worker's) use them where they were not given"]
            #[doc = "options of their own. What is not named here stays as stored. Set them once,"]
            #[doc = "where the queue is defined (a lease given only to one process's handle is not seen"]
            #[doc = "by a worker elsewhere, which would claim with the default)."]
            Queue.configure() -> [()] with QueueArgs into $crate::QueueSettings [write] {
                #[doc = "The lease a claim gives (60 s by default)."]
                lease: [Duration] = lease,
                #[doc = "Attempts before a job is dead-lettered (1 to 1,000; 3 by default)."]
                max_attempts: [Attempts] = max_attempts,
                #[doc = "The first retry's delay (1 s by default), doubled at each attempt."]
                backoff_base: [Duration] = backoff_base,
                #[doc = "The largest retry delay (1 h by default)."]
                backoff_max: [Duration] = backoff_max,
                #[doc = "The randomised fraction of a retry's delay, 0 to 1 (0.5 by default)."]
                backoff_jitter: [f64] = backoff_jitter,
            }

            #[doc = "Pauses the queue for every process and language until `resume`: no claim"]
            #[doc = "returns its jobs (waiting claims and workers keep waiting), running jobs finish,"]
            #[doc = "enqueues and the scheduler go on. Stored in the file, so it survives restarts."]
            Queue.pause() -> [()] with PauseArgs into $crate::PauseOptions [write] {
                #[doc = "Shown with the pause (`honker status`): why, who, until when (up to 512 bytes)."]
                note: [String] = note,
            }

            #[doc = "Pauses every queue, as `Queue.pause` does one, until `resume_all` (a queue's own"]
            #[doc = "pause is apart: resuming all leaves it paused)."]
            Database.pause_all() -> [()] with PauseArgs into $crate::PauseOptions [write] {}

            #[doc = "Caps how many of the queue's jobs run at once, for every process and language;"]
            #[doc = "a cap not given is lifted. Each claim counts the jobs holding an unexpired lease in"]
            #[doc = "its own transaction. A holder whose lease lapsed may still be running: its slot is"]
            #[doc = "free once the lease ends (so is a killed holder's)."]
            Queue.limit_concurrency() -> [()] with ConcurrencyArgs into $crate::Concurrency [write] {
                #[doc = "At most this many of the queue's jobs run at once (1 to 1,000,000)."]
                max_running: [u32] = max_running,
                #[doc = "At most this many jobs of one `concurrency_key` run at once (1 to 1,000,000)."]
                max_running_per_key: [u32] = max_running_per_key,
            }

            #[doc = "Sets how the queue shares its claims among its concurrency keys, for every process"]
            #[doc = "and language; an option not given is its default (priority order, no limit per"]
            #[doc = "key). Round-robin order takes each key with ready jobs once per turn, so one key's"]
            #[doc = "flood does not hold up another's few; a claim steps over a key at its rate limit."]
            Queue.set_fairness() -> [()] with FairnessArgs into $crate::Fairness [write] {
                #[doc = "\"priority\" (priority, then age: the default) or \"round_robin\" (priority, then"]
                #[doc = "each key in turn, then age; jobs without a key go first)."]
                order: [String] = order,
                #[doc = "At most this many jobs of one key start per `key_per` (1 to 10⁹)."]
                key_limit: [u32] = key_limit,
                #[doc = "The period of `key_limit` (1 ms to 366 days)."]
                key_per: [Duration] = key_per,
                #[doc = "Jobs of one key that may start at once after it idled (1 by default)."]
                key_burst: [u32] = key_burst,
            }

            #[doc = "A handle on the queue `name` (making it writes nothing; it reads the queue's"]
            #[doc = "settings). Each option not given here comes from the queue's settings in the file"]
            #[doc = "(`Queue.configure`, by any process or language), else its default. Options given"]
            #[doc = "here are this handle's only."]
            Database.queue(name) -> [Queue] with QueueArgs into $crate::QueueSettings [] {}

            #[doc = "Appends an event (JSON, or bytes); returns its offset, dense from 1 within the"]
            #[doc = "stream. With `tx` it exists only if your transaction commits."]
            Stream.publish(payload) -> [i64] with PublishArgs into $crate::stream::PublishOptions [tx traced json] {
                #[doc = "A label stored with the event (up to 512 bytes)."]
                key: [String] = key,
                #[doc = "A retried publish with this key (within 24 h) returns the original offset and"]
                #[doc = "appends nothing; the same key with another payload is `INVALID_ARGUMENT`."]
                idempotency_key: [String] = idempotency_key,
                #[doc = "A priority stored with the event and handed to its readers (any 32-bit"]
                #[doc = "integer; reading stays in offset order)."]
                priority: [i32] = priority,
            }

            #[doc = "Creates the consumer group, starting at `start` (the stream's beginning unless"]
            #[doc = "given); returns its next offset. Idempotent: on an existing group it keeps the"]
            #[doc = "group's place and takes these options (a process that starts with its group list"]
            #[doc = "creates each every time). An option not given is its default, not the stored one."]
            Group.create(start) -> [i64] with GroupArgs into $crate::stream::group::GroupSettings [write] {
                #[doc = "Deliveries before an event that keeps failing (or whose lease keeps lapsing)"]
                #[doc = "goes to the group's dead letters (1 to 1,000; 5 by default)."]
                max_deliveries: [u32] = max_deliveries,
                #[doc = "The lease a claim takes when it names none (1 ms to 24 h; 60 s by default)."]
                lease: [Duration] = lease,
                #[doc = "A member that has neither claimed nor heartbeated for this long and holds"]
                #[doc = "nothing is removed by maintenance (1 s to 365 days; 24 h by default)."]
                member_idle: [Duration] = member_idle,
            }

            #[doc = "Takes the lock for `owner` if it is free (or its holder's TTL lapsed): a grant"]
            #[doc = "with a new fencing token; none while anyone holds it (a holder with the same owner"]
            #[doc = "name too: every acquire is its own holder). With `tx`, held only if your"]
            #[doc = "transaction commits."]
            Lock.try_acquire(owner) -> [Option<LockGrant>] with LockArgs into $crate::lock::AcquireOptions [tx] {
                #[doc = "How long the grant lasts unless renewed (1 ms to 30 days)."]
                ttl: [Duration] = ttl,
            }

            #[doc = "Appends events in one transaction (up to 10,000); returns their offsets,"]
            #[doc = "consecutive. Each event gets the options (an idempotency key names one event:"]
            #[doc = "`publish` takes it)."]
            Stream.publish_many(payloads) -> [Vec<i64>] with PublishManyArgs into $crate::stream::PublishOptions [tx traced] {
                key: [String] = key,
                priority: [i32] = priority,
            }
        }
    };
}

/// The common emitter for [`options!`](crate::options): each input record
/// as a struct with `attrs` (a binding's derives; one attribute or none on
/// every field, such as clap's `#[arg(long)]`), every field optional, and
/// `to_core` filling the core options (the given fields over the defaults).
/// `units` (`seconds` or `ms`) is how the binding's wire carries the table's
/// `[Duration]` and `[Instant]` fields: an `f64` of seconds (a time: since
/// the Unix epoch) or of milliseconds, checked and converted by
/// [`units`](crate::surface::units) in `to_core`. `[Attempts]` is a `u32`
/// that core checks against its attempts limit (the hosts check the same
/// range first, so every surface words it alike). The caller's transaction
/// and trace headers cross beside the record, as the verb's flags say.
#[macro_export]
macro_rules! option_structs {
    // Each field resolved to its wire type and conversion, then emitted.
    (@munch $h:tt [$($done:tt)*]
        $(#[doc = $d:literal])* $field:ident : [Duration] = $src:ident $(, $($rest:tt)*)?
    ) => {
        $crate::option_structs!(@munch $h [$($done)* [$(#[doc = $d])*] $field [f64] [duration] $src] $($($rest)*)?);
    };
    (@munch $h:tt [$($done:tt)*]
        $(#[doc = $d:literal])* $field:ident : [Instant] = $src:ident $(, $($rest:tt)*)?
    ) => {
        $crate::option_structs!(@munch $h [$($done)* [$(#[doc = $d])*] $field [f64] [instant] $src] $($($rest)*)?);
    };
    (@munch $h:tt [$($done:tt)*]
        $(#[doc = $d:literal])* $field:ident : [Attempts] = $src:ident $(, $($rest:tt)*)?
    ) => {
        $crate::option_structs!(@munch $h [$($done)* [$(#[doc = $d])*] $field [u32] [same] $src] $($($rest)*)?);
    };
    (@munch $h:tt [$($done:tt)*]
        $(#[doc = $d:literal])* $field:ident : [$($ty:tt)*] = $src:ident $(, $($rest:tt)*)?
    ) => {
        $crate::option_structs!(@munch $h [$($done)* [$(#[doc = $d])*] $field [$($ty)*] [same] $src] $($($rest)*)?);
    };
    (@munch [[$($attr:tt)*] [# $fattr:tt] $units:ident [$($rdoc:tt)*] $flags:tt $name:ident $core:path]
        [$( [$($fdoc:tt)*] $field:ident [$($ty:tt)*] [$conv:ident] $src:ident )*]
    ) => {
        $($rdoc)*
        $($attr)*
        pub struct $name {
            $( $($fdoc)* #$fattr pub $field: Option<$($ty)*>, )*
        }

        impl $name {
            /// The core options: each given field over its default (a
            /// duration or time checked as it is converted).
            #[allow(dead_code)]
            pub fn to_core(&self) -> $crate::Result<$core> {
                #[allow(unused_mut)]
                let mut o = <$core>::default();
                $( if let Some(v) = &self.$field {
                    o.$src = $crate::surface::units::$units::$conv(stringify!($field), v.clone())?.into();
                } )*
                Ok(o)
            }
        }

        $crate::__if_flag!(traced $flags
            impl $name {
                /// [`to_core`](Self::to_core) with the producer's W3C trace
                /// headers (checked) as its trace context.
                #[allow(dead_code)]
                pub fn to_core_traced(
                    &self,
                    traceparent: Option<&str>,
                    tracestate: Option<&str>,
                ) -> $crate::Result<$core> {
                    let mut o = self.to_core()?;
                    o.trace_context = $crate::TraceContext::from_headers(traceparent, tracestate)?;
                    Ok(o)
                }
            }
        );
    };
    (@one $attrs:tt $fattr:tt $units:ident $rdoc:tt $flags:tt $name:ident $core:path {}) => {};
    (@one $attrs:tt [] $($rest:tt)*) => {
        $crate::option_structs!(@one $attrs [#[allow(dead_code)]] $($rest)*);
    };
    (@one $attrs:tt $fattr:tt $units:ident $rdoc:tt $flags:tt $name:ident $core:path { $($body:tt)* }) => {
        $crate::option_structs!(@munch [$attrs $fattr $units $rdoc $flags $name $core] [] $($body)*);
    };
    ($attrs:tt $fattrs:tt $units:ident $(
        $(#[doc = $rdoc:literal])*
        $noun:ident . $verb:ident ($($arg:ident),*) -> [$($ret:tt)*] with $name:ident into $core:path [$($flag:ident)*] { $($body:tt)* }
    )*) => {$(
        $crate::option_structs!(@one $attrs $fattrs $units [$(#[doc = $rdoc])*] [$($flag)*] $name $core { $($body)* });
    )*};
}

/// How a binding's wire carries the options table's durations and times
/// (`option_structs!`'s `units`), each checked by core's one rule for
/// durations ([`validate::seconds`](crate::validate::seconds)) or for times
/// (finite, after 1970). `same` passes any other field as it is.
pub mod units {
    use crate::{validate, Error, Result};
    use std::time::Duration;

    /// `f64` seconds; a time in seconds since the Unix epoch (Python, Swift,
    /// the `honker` command).
    pub mod seconds {
        pub use super::same;
        use super::*;

        /// A duration given in seconds.
        pub fn duration(what: &str, s: f64) -> Result<Duration> {
            validate::seconds(what, s)
        }

        /// A time given in seconds since the Unix epoch, as ms.
        pub fn instant(what: &str, s: f64) -> Result<i64> {
            super::instant(what, s * 1000.0, s, "seconds")
        }
    }

    /// `f64` milliseconds; a time in ms since the Unix epoch (Node).
    pub mod ms {
        pub use super::same;
        use super::*;

        /// A duration given in milliseconds.
        pub fn duration(what: &str, ms: f64) -> Result<Duration> {
            validate::millis(what, ms)
        }

        /// A time given in ms since the Unix epoch.
        pub fn instant(what: &str, ms: f64) -> Result<i64> {
            super::instant(what, ms, ms, "ms")
        }
    }

    /// A field that crosses as it is.
    pub fn same<T>(_what: &str, v: T) -> Result<T> {
        Ok(v)
    }

    /// `given` is the caller's value, in `unit`, for the error.
    fn instant(what: &str, ms: f64, given: f64, unit: &str) -> Result<i64> {
        // Up to the i64 range (2^63 ms); before 1970 is no time either.
        if !ms.is_finite() || !(0.0..9.223_372_036_854_775e18).contains(&ms.round()) {
            return Err(Error::invalid(format!(
                "{what} must be a time after 1970 ({unit} since the Unix epoch), got {given}"
            )));
        }
        Ok(ms.round() as i64)
    }
}

/// The common emitter for [`records!`](crate::records): each record as a
/// struct with `attrs` (a binding's derives) and its `From` the core type
/// through [`Wire`]. A binding forwards to it with its attributes:
///
/// ```ignore
/// macro_rules! emit {
///     ($($table:tt)*) => {
///         honker::record_structs! { [#[derive(Debug, uniffi::Record)]] $($table)* }
///     };
/// }
/// honker::records!(emit);
/// ```
///
/// (Node's emitter is its own: napi reads field types before macros expand.)
#[macro_export]
macro_rules! record_structs {
    (@one [$($attr:tt)*] [$($rdoc:tt)*] $name:ident $core:path {
        $( $(#[doc = $fdoc:literal])* $field:ident : [$($ty:tt)*] = $($src:ident).+ ),* $(,)?
    }) => {
        $($rdoc)*
        $($attr)*
        pub struct $name { $( $(#[doc = $fdoc])* pub $field: $($ty)*, )* }

        impl From<$core> for $name {
            fn from(v: $core) -> Self {
                $name { $( $field: $crate::surface::Wire::wire(v.$($src).+), )* }
            }
        }
    };
    ($attrs:tt $(
        $(#[doc = $rdoc:literal])*
        $name:ident from $core:path { $($body:tt)* }
    )*) => {$(
        $crate::record_structs!(@one $attrs [$(#[doc = $rdoc])*] $name $core { $($body)* });
    )*};
}

pub use crate::sqlfn::{FromJsonOptions, JsonOption};

/// `$then` if the flags include `$flag` (`traced`: the verb's options take
/// the W3C `traceparent` and `tracestate` headers, into `trace_context`;
/// `json`: its core options are read from JSON by this entry, one entry per
/// core options type).
#[doc(hidden)]
#[macro_export]
macro_rules! __if_flag {
    (traced [traced $($rest:ident)*] $($then:tt)*) => { $($then)* };
    (json [json $($rest:ident)*] $($then:tt)*) => { $($then)* };
    ($flag:ident [$other:ident $($rest:ident)*] $($then:tt)*) => {
        $crate::__if_flag!($flag [$($rest)*] $($then)*);
    };
    ($flag:ident [] $($then:tt)*) => {};
}

macro_rules! json_options {
    ($(
        $(#[doc = $vdoc:literal])*
        $noun:ident . $verb:ident ($($arg:ident),*) -> [$($ret:tt)*] with $name:ident into $core:path [$($flag:ident)*] {
            $( $(#[doc = $fdoc:literal])* $field:ident : [$($ty:tt)*] = $src:ident ),* $(,)?
        }
    )*) => {$( crate::__if_flag!(json [$($flag)*]
        impl FromJsonOptions for $core {
            fn from_json_options(what: &str, text: &str) -> crate::Result<Self> {
                let bad = |w: String| crate::Error::invalid(format!("{what}: options: {w}"));
                let obj = match serde_json::from_str(text) {
                    Ok(serde_json::Value::Object(m)) => m,
                    _ => return Err(bad("must be a JSON object".into())),
                };
                let mut o = <$core>::default();
                #[allow(unused_mut, unused_variables)]
                let (mut parent, mut state): (Option<String>, Option<String>) = (None, None);
                for (k, v) in &obj {
                    match k.as_str() {
                        $(stringify!($field) => {
                            let v = <$($ty)* as JsonOption>::from_json(v).ok_or_else(|| {
                                bad(format!("{k} must be {}", <$($ty)* as JsonOption>::MUST_BE))
                            })?;
                            o.$src = v.into();
                        })*
                        "traceparent" | "tracestate" if [$(stringify!($flag)),*].contains(&"traced") => {
                            let v = v.as_str().ok_or_else(|| bad(format!("{k} must be text")))?;
                            if k == "traceparent" { parent = Some(v.into()) } else { state = Some(v.into()) }
                        }
                        other => return Err(bad(format!("unknown key {other:?}"))),
                    }
                }
                crate::__if_flag!(traced [$($flag)*]
                    o.trace_context = crate::TraceContext::from_headers(parent.as_deref(), state.as_deref())?;
                );
                Ok(o)
            }
        }
    ); )*};
}

options!(json_options);

/// A core value as a binding's field: the conversions every emitter needs
/// (`Wire::wire(v.field)` with the field's type inferred). A binding adds
/// the one for its payload type where the orphan rule lets it (a payload
/// type of its own); Node's emitter converts payloads itself.
pub trait Wire<T> {
    /// The value as `T`.
    fn wire(self) -> T;
}

impl<T> Wire<T> for T {
    fn wire(self) -> T {
        self
    }
}

impl Wire<String> for crate::JobState {
    fn wire(self) -> String {
        self.as_str().to_owned()
    }
}

impl Wire<Option<String>> for Option<crate::UniqueMode> {
    fn wire(self) -> Option<String> {
        self.map(|m| m.as_str().to_owned())
    }
}

impl Wire<String> for crate::schedule::DayRule {
    fn wire(self) -> String {
        self.as_str().to_owned()
    }
}

impl Wire<String> for crate::schedule::CatchUp {
    fn wire(self) -> String {
        self.as_str().to_owned()
    }
}

impl Wire<String> for crate::schedule::Overlap {
    fn wire(self) -> String {
        self.as_str().to_owned()
    }
}

/// A trace context as the JSON object of its W3C headers; each wrapper
/// hands it out as its language's carrier (`dict`, object, dictionary).
impl Wire<Option<String>> for Option<crate::TraceContext> {
    fn wire(self) -> Option<String> {
        self.as_ref().map(crate::TraceContext::to_json)
    }
}

/// An optional duration as whole ms, rounded up.
impl Wire<Option<i64>> for Option<std::time::Duration> {
    fn wire(self) -> Option<i64> {
        self.map(Wire::wire)
    }
}

/// A duration as whole ms, rounded up (a wait that long is enough).
impl Wire<i64> for std::time::Duration {
    fn wire(self) -> i64 {
        i64::try_from(self.as_micros().div_ceil(1000)).unwrap_or(i64::MAX)
    }
}

impl Wire<u64> for usize {
    fn wire(self) -> u64 {
        self as u64
    }
}

/// A count as a JS number (napi has no plain-number `u64`).
impl Wire<i64> for u64 {
    fn wire(self) -> i64 {
        i64::try_from(self).unwrap_or(i64::MAX)
    }
}

/// A count as a JS number.
impl Wire<i64> for usize {
    fn wire(self) -> i64 {
        i64::try_from(self).unwrap_or(i64::MAX)
    }
}

#[cfg(all(test, feature = "rusqlite"))]
mod tests {
    use crate::Payload;

    macro_rules! emit {
        ($($table:tt)*) => {
            record_structs! { [#[derive(Debug)] #[allow(dead_code)]] $($table)* }
        };
    }

    records!(emit);

    macro_rules! emit_options {
        ($($table:tt)*) => {
            option_structs! { [#[derive(Debug, Default)]] [] seconds $($table)* }
        };
    }

    options!(emit_options);

    #[test]
    fn an_option_given_replaces_the_default_and_one_not_given_keeps_it() {
        let none = PublishArgs::default().to_core().unwrap();
        assert_eq!(none, crate::stream::PublishOptions::default());
        let some = PublishArgs {
            idempotency_key: Some("k".into()),
            ..Default::default()
        }
        .to_core()
        .unwrap();
        assert_eq!(
            (some.idempotency_key.as_deref(), some.key),
            (Some("k"), None)
        );
    }

    #[test]
    fn durations_and_times_cross_in_the_binding_s_units_and_bad_ones_are_refused() {
        use super::units;
        use std::time::Duration;
        let o = EnqueueArgs {
            delay: Some(1.5),
            max_attempts: Some(2),
            ..Default::default()
        }
        .to_core()
        .unwrap();
        assert_eq!(
            (o.delay, o.max_attempts, o.run_at),
            (Some(Duration::from_millis(1500)), Some(2), None)
        );
        let at = EnqueueArgs {
            run_at: Some(1_800_000_000.25),
            ..Default::default()
        };
        assert_eq!(at.to_core().unwrap().run_at, Some(1_800_000_000_250));
        assert_eq!(units::ms::instant("t", 5.4).unwrap(), 5);
        assert_eq!(
            units::ms::duration("d", 250.0).unwrap(),
            Duration::from_millis(250)
        );
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1e300] {
            let d = EnqueueArgs {
                delay: Some(bad),
                ..Default::default()
            };
            let t = EnqueueArgs {
                run_at: Some(bad),
                ..Default::default()
            };
            for e in [d.to_core().unwrap_err(), t.to_core().unwrap_err()] {
                assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{bad}: {e}");
            }
        }
        let e = EnqueueArgs::default()
            .to_core_traced(Some("not a traceparent"), None)
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        let traced = PublishArgs::default()
            .to_core_traced(
                Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
                None,
            )
            .unwrap();
        assert!(traced.trace_context.is_some());
    }

    #[test]
    fn every_record_converts_from_core() -> crate::Result<()> {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Database::open(dir.path().join("t.db"))?;
        let q = db.queue("q")?;
        let e: Enqueued = q
            .enqueue(Payload::Json("{}".into()), &Default::default())?
            .into();
        let info: JobInfo = q.get_job(e.id)?.into();
        assert_eq!((info.id, info.state.as_str()), (e.id, "ready"));
        let job: ClaimedJob = q.claim("w", 1)?.remove(0).into();
        assert_eq!(
            (job.id, job.attempts, job.token.is_empty()),
            (e.id, 1, false)
        );
        let stats: QueueStats = q.stats()?.into();
        assert_eq!(stats.running, 1);
        let r: MaintenanceReport = db.maintain()?.into();
        assert_eq!(r.dead, 0);
        Ok(())
    }
}
