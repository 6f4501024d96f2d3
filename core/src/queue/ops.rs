//! The lease protocol as operations on a connection that is already inside a
//! write transaction. [`Queue`](super::Queue) wraps each in a transaction (its
//! own or the caller's); the SQL functions call the same code. Nothing here
//! validates user input (the callers did) or reads the clock (`now` is
//! passed in).
//!
//! Invariants:
//! - every write on a leased job matches `id`, `queue` and `lease_token` and
//!   `state = 'running'` in one statement, so a stale token changes nothing;
//! - a job is always in exactly one of `_honker_jobs` (live) and
//!   `_honker_finished` (terminal), moved between them in one transaction.

use crate::raw::{params, Conn, Damage, Row, ToSql};

use super::metrics::{self, Event};
use super::statements;
use super::types::{JobInfo, JobState, QueueStats, RetryNow, Unique, UniqueMode};
use crate::error::{Error, Result};
use crate::payload::Payload;
use crate::rate::blocks::{Block, Blocks, KeyBlocks, QueueLimit};

/// A fully resolved enqueue, minus the payload.
#[derive(Debug)]
pub(crate) struct NewJob<'a> {
    pub priority: i32,
    pub run_at: i64,
    pub max_attempts: u32,
    pub backoff_base_ms: i64,
    pub backoff_max_ms: i64,
    pub backoff_jitter: f64,
    pub dedupe_key: Option<&'a str>,
    /// The dedupe key is (also) the payload's fingerprint.
    pub dedupe_by_payload: bool,
    pub unique: Unique,
    pub concurrency_key: Option<&'a str>,
    pub expires_at: Option<i64>,
    /// The stored form (JSON) of the producer's trace context.
    pub trace_context: Option<String>,
}

/// Inserts one job per payload, all with `job`'s settings; returns per
/// payload the job's id and, when its dedupe key was held and nothing was
/// added, the mode that acted (the id is then the holder's).
pub(crate) fn enqueue(
    conn: Conn<'_>,
    queue: &str,
    job: &NewJob<'_>,
    payloads: &[Payload],
    now: i64,
) -> Result<Vec<(i64, Option<UniqueMode>)>> {
    let state = if job.run_at > now {
        "scheduled"
    } else {
        "ready"
    };
    let mut out = Vec::with_capacity(payloads.len());
    let mut rest = payloads;
    if job.dedupe_key.is_none() && !job.dedupe_by_payload {
        let batches = [
            statements::ENQUEUE_32.as_str(),
            statements::ENQUEUE_8.as_str(),
        ];
        rest = by_batches(conn, payloads, batches, |insert, chunk| {
            let mut p: Vec<&dyn ToSql> = Vec::with_capacity(14 + chunk.len());
            p.extend_from_slice(&enqueue_params(&queue, &state, &chunk[0], job, &now));
            p.extend(chunk[1..].iter().map(|c| c as &dyn ToSql));
            if insert.execute(&p)? != chunk.len() {
                return Err(Error::internal(
                    "a batch insert added fewer jobs than it held",
                ));
            }
            let last = conn.last_insert_rowid();
            out.extend((last + 1 - chunk.len() as i64..=last).map(|id| (id, None)));
            Ok(())
        })?;
    }
    let insert = Insert {
        conn,
        queue,
        state,
        job,
        now,
    };
    for payload in rest {
        let key = match (job.dedupe_key, job.dedupe_by_payload) {
            (None, false) => None,
            (Some(k), false) => Some(std::borrow::Cow::Borrowed(k)),
            (None, true) => Some(format!("payload:{}", payload.fingerprint()).into()),
            (Some(k), true) => Some(format!("{k}|payload:{}", payload.fingerprint()).into()),
        };
        out.push(insert.one(payload, key.as_deref())?);
    }
    let added = out.iter().filter(|(_, held)| held.is_none()).count();
    // A key's ready jobs take their turns now in a round-robin queue; a
    // delayed job takes its turn when it comes due (ADR 36).
    if let (Some(key), "ready") = (job.concurrency_key, state) {
        let ids: Vec<i64> = out
            .iter()
            .filter(|(_, held)| held.is_none())
            .map(|(id, _)| *id)
            .collect();
        if !ids.is_empty() {
            give_turns(conn, queue, key, &ids)?;
        }
    }
    metrics::count(conn, queue, Event::Enqueued, added as u64)?;
    Ok(out)
}

/// What every job of one enqueue shares: where, in which state, with which
/// settings, when.
struct Insert<'c, 'j> {
    conn: Conn<'c>,
    queue: &'c str,
    state: &'c str,
    job: &'c NewJob<'j>,
    now: i64,
}

impl Insert<'_, '_> {
    /// One job under its dedupe key `key` (if any) and `job.unique` (ADR
    /// 37): its id, and the mode that acted when nothing was added (the id
    /// is then the holder's). Unique indexes decide every outcome: the live
    /// index who holds a key while its job is live, `_honker_unique`'s
    /// primary key who holds it after; a read ahead of them
    /// ([`statements::HOLD`]) only spares a write.
    fn one(&self, payload: &Payload, key: Option<&str>) -> Result<(i64, Option<UniqueMode>)> {
        let (conn, queue, now) = (self.conn, self.queue, self.now);
        let held = |id| Ok((id, Some(UniqueMode::Live)));
        let Some(key) = key else {
            let id = self.insert(payload, None)?;
            return Ok((
                id.ok_or_else(|| Error::internal("a job without a key was not added"))?,
                None,
            ));
        };
        let (mode, period) = match self.job.unique {
            Unique::Live => {
                return match self.insert(payload, Some(key))? {
                    Some(id) => Ok((id, None)),
                    None => held(dedupe_holder(conn, queue, key)?),
                };
            }
            Unique::Debounce => return self.debounce(payload, key),
            Unique::Period(ms) => (UniqueMode::Period, ms),
            Unique::Throttle(ms) => (UniqueMode::Throttle, ms),
        };
        let holder =
            |sql: &'static str, p: &[&dyn ToSql]| -> Result<Option<(i64, Option<UniqueMode>)>> {
                let found: Option<(i64, String)> = conn
                    .prepare_cached(sql)?
                    .query_row(p, |r| Ok((r.get(0)?, r.get(1)?)))?;
                found
                    .map(|(id, m)| Ok((id, Some(UniqueMode::parse(&m)?))))
                    .transpose()
            };
        if let Some(found) = holder(statements::HOLD, params![queue, key, now])? {
            return Ok(found);
        }
        let Some(id) = self.insert(payload, Some(key))? else {
            return held(dedupe_holder(conn, queue, key)?);
        };
        let until = match mode {
            UniqueMode::Throttle => now.saturating_add(period),
            _ => statements::HELD_WHILE_LIVE,
        };
        let took = conn
            .prepare_cached(statements::TAKE_HOLD)?
            .execute(params![queue, key, id, mode.as_str(), period, until, now])?;
        if took == 1 {
            return Ok((id, None));
        }
        // A hold taken since the read above (another writer cannot come
        // between them in SQLite; kept for engines where it can): the hold
        // wins.
        conn.prepare_cached(statements::DELETE_JOB)?
            .execute(params![id])?;
        holder(statements::HOLD_ANY, params![queue, key])?
            .ok_or_else(|| Error::internal("a hold refused a job and then held nothing"))
    }

    /// `debounce`: a new job, or the pending holder replaced (ADR 37).
    fn debounce(&self, payload: &Payload, key: &str) -> Result<(i64, Option<UniqueMode>)> {
        let (conn, queue, job) = (self.conn, self.queue, self.job);
        if let Some(id) = self.insert(payload, Some(key))? {
            return Ok((id, None));
        }
        let replaced: Option<(i64, Option<String>)> = conn
            .prepare_cached(statements::REPLACE_PENDING)?
            .query_row(
                params![
                    queue,
                    key,
                    payload,
                    self.state,
                    job.run_at,
                    job.priority,
                    job.expires_at,
                    job.trace_context
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
        if let Some((id, concurrency_key)) = replaced {
            if let (Some(ck), "ready") = (concurrency_key, self.state) {
                give_turns(conn, queue, &ck, &[id])?;
            }
            return Ok((id, Some(UniqueMode::Debounce)));
        }
        conn.prepare_cached(statements::DETACH_RUNNING)?
            .execute(params![queue, key])?;
        conn.prepare_cached(statements::DROP_LIVE_HOLD)?
            .execute(params![queue, key])?;
        match self.insert(payload, Some(key))? {
            Some(id) => Ok((id, None)),
            None => Err(Error::internal(
                "debounce: the key stayed held after its running job gave it up",
            )),
        }
    }

    /// [`statements::ENQUEUE`] of one job; its id, or `None` when a live
    /// job holds `key`.
    fn insert(&self, payload: &Payload, key: Option<&str>) -> Result<Option<i64>> {
        let mut p = enqueue_params(&self.queue, &self.state, payload, self.job, &self.now);
        p[9] = &key;
        let inserted = self.conn.prepare_cached(statements::ENQUEUE)?.execute(&p)?;
        // No RETURNING: it costs an ephemeral table per statement, while
        // the connection already knows the new rowid.
        Ok((inserted == 1).then(|| self.conn.last_insert_rowid()))
    }
}

/// Gives `ids` (new ready jobs of `key`, oldest first) their turns when
/// `queue` takes its keys in turn (ADR 36); writes nothing otherwise.
fn give_turns(conn: Conn<'_>, queue: &str, key: &str, ids: &[i64]) -> Result<()> {
    let n = ids.len() as i64;
    let given = conn
        .prepare_cached(statements::GIVE_TURNS)?
        .execute(params![queue, key, n])?;
    if given == 0 {
        return Ok(());
    }
    let last: i64 = conn
        .prepare_cached(statements::KEY_TURN)?
        .query_one(params![queue, key], |r| r.get(0))?;
    let first = last - n + 1;
    let mut set = conn.prepare_cached(statements::SET_TURNS)?;
    // By runs of consecutive ids (a batch's), one statement each.
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        set.execute(params![ids[i], ids[j], first + i as i64])?;
        i = j + 1;
    }
    Ok(())
}

/// [`statements::ENQUEUE`]'s parameters for one job (the batch statements
/// take the same, then the other jobs' payloads).
fn enqueue_params<'a>(
    queue: &'a &str,
    state: &'a &str,
    payload: &'a Payload,
    job: &'a NewJob<'_>,
    now: &'a i64,
) -> [&'a dyn ToSql; 14] {
    [
        queue,
        state,
        payload,
        &job.priority,
        &job.run_at,
        &job.max_attempts,
        &job.backoff_base_ms,
        &job.backoff_max_ms,
        &job.backoff_jitter,
        &job.dedupe_key,
        &job.expires_at,
        now,
        &job.trace_context,
        &job.concurrency_key,
    ]
}

fn dedupe_holder(conn: Conn<'_>, queue: &str, key: &str) -> Result<i64> {
    conn.prepare_cached(statements::FIND_BY_DEDUPE)?
        .query_row(params![queue, key], |r| r.get(0))?
        .ok_or_else(|| Error::internal("enqueue inserted nothing and found no dedupe holder"))
}

/// The error of a job dead-lettered because it has no attempt left when a
/// claim meets it (its lease lapsed on the last attempt, or it is ready with
/// none): Honker's words, which its clients and operators match.
pub(crate) const EXHAUSTED: &str = "max attempts exceeded";

/// A job as handed out by [`claim`].
#[derive(Debug)]
pub(crate) struct Claimed {
    pub id: i64,
    pub payload: Payload,
    pub attempts: u32,
    pub max_attempts: u32,
    pub priority: i32,
    pub run_at: i64,
    pub created_at: i64,
    pub lease_token: String,
    pub lease_expires_at: i64,
    pub trace_context: Option<crate::trace::TraceContext>,
    /// Read only where a per-key cap is counted.
    pub concurrency_key: Option<String>,
    /// Read only in a queue that shares its claims among keys (ADR 36).
    pub turn: Option<i64>,
    /// Its key's `tat_us`, read only under a rate limit per key.
    pub key_tat: Option<i64>,
}

/// Expires, promotes and reclaims what is due in `queue`, then leases up to
/// `n` ready jobs to `worker_id` until `now + lease_ms`, in priority order.
pub(crate) fn claim(
    conn: Conn<'_>,
    queue: &str,
    worker_id: &str,
    n: usize,
    lease_ms: i64,
    now: i64,
) -> Result<Vec<Claimed>> {
    claim_limited(conn, queue, worker_id, n, lease_ms, now, None).map(|(jobs, _)| jobs)
}

/// A database's blocks of starts reserved ahead (ADR 23 §9): of its
/// rate-limited queues, and of keys under a queue's rate limit per key
/// (ADR 36).
#[derive(Clone, Copy)]
pub(crate) struct ClaimBlocks<'b> {
    pub queues: &'b Blocks,
    pub keys: &'b KeyBlocks,
    /// Whether this claim, in a transaction of its own, may reserve blocks.
    pub own: bool,
}

/// The blocks a claim reserved, to install once it committed.
#[derive(Debug, Default)]
pub(crate) struct Reserved {
    pub queue: Option<Block>,
    pub keys: Vec<(String, Block)>,
}

/// [`claim`] by a `Database` with its blocks of starts reserved ahead;
/// what it reserved, to install once it commits.
pub(crate) fn claim_limited(
    conn: Conn<'_>,
    queue: &str,
    worker_id: &str,
    n: usize,
    lease_ms: i64,
    now: i64,
    blocks: Option<ClaimBlocks<'_>>,
) -> Result<(Vec<Claimed>, Reserved)> {
    // A paused queue (ADR 33) hands out nothing: the pick finds no job.
    // A capped queue (ADR 35) starts no more than its caps leave room for,
    // counted in this transaction (unexpired leases: what housekeeping
    // reclaims is not among them). A rate-limited queue starts what its
    // limit allows now, for every worker of every process together (ADR
    // 23); the rest keep waiting, their attempts untouched. A fair queue
    // (ADR 36) takes its keys in turn and steps over keys at their limit.
    let Controls {
        limit: stored,
        running,
        mut per_key,
        fair,
    } = claim_controls(conn, queue, now)?;
    housekeep(
        conn,
        queue,
        now,
        fair.as_ref().is_some_and(|f| f.round_robin),
    )?;
    let key_blocks = blocks.map(|b| (b.keys, b.own));
    let mut fair = fair.map(|f| FairClaim::new(f, queue, now, key_blocks));
    let mut n = n;
    if let Some(room) = running {
        n = n.min(room as usize);
        if n == 0 {
            return Ok((Vec::new(), Reserved::default()));
        }
    }
    let (jobs, block) = claim_under_limit(
        stored,
        n,
        now,
        blocks.map(|b| (b.queues, b.own)),
        queue,
        conn,
        |n| {
            lease_counted(
                conn,
                queue,
                worker_id,
                n,
                lease_ms,
                now,
                &mut per_key,
                &mut fair,
            )
        },
    )?;
    let keys = fair.map(|f| f.reserved).unwrap_or_default();
    Ok((jobs, Reserved { queue: block, keys }))
}

/// Leases through `lease_n` what the queue's rate limit (`stored`, if any)
/// allows of `n`, from this database's block when one serves; writes the
/// queue's `tat` otherwise, and returns the block this claim reserved.
fn claim_under_limit(
    stored: Option<QueueLimit>,
    n: usize,
    now: i64,
    blocks: Option<(&Blocks, bool)>,
    queue: &str,
    conn: Conn<'_>,
    mut lease_n: impl FnMut(usize) -> Result<Vec<Claimed>>,
) -> Result<(Vec<Claimed>, Option<Block>)> {
    let Some(stored) = stored else {
        return Ok((lease_n(n)?, None));
    };
    let want = n as i64;
    if let Some((blocks, _)) = blocks {
        if let Some(which) = blocks.take(queue, &stored, want, now) {
            let jobs = lease_n(n)?;
            blocks.give_back(queue, which, want - jobs.len() as i64);
            return Ok((jobs, None));
        }
    }
    let (allowed, _) = crate::rate::ops::queue_allowance(&stored.limit, stored.tat, want, now);
    if allowed == 0 {
        return Ok((Vec::new(), None));
    }
    let jobs = lease_n(allowed as usize)?;
    if jobs.is_empty() {
        return Ok((jobs, None));
    }
    let started = jobs.len() as i64;
    let mut tat = crate::rate::ops::queue_tat_after(&stored.limit, stored.tat, started, now);
    let mut block = None;
    if matches!(blocks, Some((_, true))) && started == want {
        if let Some((b, reserved)) = Block::plan(&stored, tat, want, now) {
            tat = reserved;
            block = Some(b);
        }
    }
    crate::rate::ops::set_queue_tat(conn, queue, tat, now)?;
    Ok((jobs, block))
}

/// What a claim of a queue obeys besides a pause, read in one statement
/// ([`statements::CLAIM_CONTROLS`]).
struct Controls {
    /// Its rate limit, with its state.
    limit: Option<QueueLimit>,
    /// With `max_running`: how many more of its jobs may start now.
    running: Option<u32>,
    /// With `max_running_per_key`: each key's room.
    per_key: Option<KeyRoom>,
    /// With turns or a rate limit per key (ADR 36).
    fair: Option<crate::rate::ops::Fair>,
}

fn claim_controls(conn: Conn<'_>, queue: &str, now: i64) -> Result<Controls> {
    let mut counts: Option<i64> = None;
    let rows =
        conn.prepare_cached(statements::CLAIM_CONTROLS)?
            .query_map(params![queue, now], |r| {
                counts = counts.or(r.get(3)?);
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
    let caps = crate::rate::ops::caps_of(&rows);
    let counts = counts.unwrap_or(0);
    let (running, keyed) = (counts >> 32, counts & 0xffff_ffff);
    let running = caps.max_running.map(|max| {
        let n = u32::try_from(running).unwrap_or(u32::MAX);
        max.saturating_sub(n)
    });
    let per_key = match caps.max_running_per_key {
        None => None,
        // No keyed job running: every key has room, nothing to read.
        Some(cap) if keyed == 0 => Some(KeyRoom {
            cap,
            running: std::collections::HashMap::new(),
        }),
        Some(cap) => Some(KeyRoom::read(conn, queue, cap, now)?),
    };
    Ok(Controls {
        limit: crate::rate::ops::queue_limit_of(queue, &rows)?,
        running,
        per_key,
        fair: crate::rate::ops::fairness_of(queue, &rows)?,
    })
}

/// How far a round-robin queue's stored turn may fall behind the turns its
/// claims take (ADR 36).
const TURN_LAG: i64 = 8;

/// A fair queue's state as one claim fills it (ADR 36): the keys that
/// ran out of starts under the rate limit per key, and each key's starts.
struct FairClaim<'b> {
    fair: crate::rate::ops::Fair,
    /// The `tat_us` above which a key can start nothing now.
    blocked_above: i64,
    starts: std::collections::HashMap<String, KeyStarts>,
    now: i64,
    queue: &'b str,
    /// This database's blocks of keys' starts, and whether this claim, in
    /// a transaction of its own, may reserve more (ADR 23 §9, per key).
    blocks: Option<(&'b KeyBlocks, bool)>,
    /// Blocks this claim reserved, to install once it committed.
    reserved: Vec<(String, Block)>,
}

/// One key's starts in a claim under a rate limit per key.
struct KeyStarts {
    /// Its `tat_us` as the pick read it.
    tat: Option<i64>,
    /// The starts it may take: its allowance, or what its block holds.
    room: i64,
    taken: i64,
    /// Whether its starts come from this database's block.
    from_block: bool,
    /// Its block's name ([`KeyBlocks::name`]), when this database keeps
    /// blocks.
    block_name: Option<String>,
}

impl<'b> FairClaim<'b> {
    fn new(
        fair: crate::rate::ops::Fair,
        queue: &'b str,
        now: i64,
        blocks: Option<(&'b KeyBlocks, bool)>,
    ) -> FairClaim<'b> {
        let blocked_above = fair
            .key_limit
            .as_ref()
            .map_or(i64::MAX, |l| crate::rate::ops::key_blocked_above(l, now));
        FairClaim {
            fair,
            blocked_above,
            starts: std::collections::HashMap::new(),
            now,
            queue,
            blocks,
            reserved: Vec::new(),
        }
    }

    /// The key's limit as a block compares it: its parameters, its `tat`
    /// as read, when the parameters were set.
    fn stored(&self, limit: &crate::rate::RateLimit, tat: Option<i64>) -> QueueLimit {
        QueueLimit {
            limit: *limit,
            tat,
            set_at: self.fair.key_set_at,
        }
    }

    /// Whether `job`'s key may start one more job in this claim.
    fn may_start(&mut self, job: &Claimed) -> bool {
        let (Some(limit), Some(key)) = (&self.fair.key_limit, &job.concurrency_key) else {
            return true;
        };
        if !self.starts.contains_key(key) {
            let stored = self.stored(limit, job.key_tat);
            let block_name = self.blocks.map(|_| KeyBlocks::name(self.queue, key));
            let block = self
                .blocks
                .zip(block_name.as_deref())
                .and_then(|((blocks, _), name)| blocks.0.left(name, &stored, self.now));
            let room = block.unwrap_or_else(|| {
                crate::rate::ops::queue_allowance(limit, job.key_tat, i64::MAX, self.now).0
            });
            self.starts.insert(
                key.clone(),
                KeyStarts {
                    tat: job.key_tat,
                    room,
                    taken: 0,
                    from_block: block.is_some(),
                    block_name,
                },
            );
        }
        let s = &self.starts[key];
        s.taken < s.room
    }

    /// Counts a start of `job`'s key.
    fn started(&mut self, job: &Claimed) {
        if let Some(key) = &job.concurrency_key {
            if let Some(s) = self.starts.get_mut(key) {
                s.taken += 1;
            }
        }
    }

    /// The keys out of starts in this claim.
    fn spent(&self) -> impl Iterator<Item = &str> {
        self.starts
            .iter()
            .filter(|(_, s)| s.taken >= s.room)
            .map(|(k, _)| k.as_str())
    }

    /// Stores what the claim took: the queue's current turn, the keys'
    /// `tat_us`. A key whose starts came from this database's block writes
    /// nothing; one that started exactly, in a claim of its own, while its
    /// limit is less than half used, also reserves a block of its next
    /// starts (written as its `tat` now, installed once this commits).
    fn store(&mut self, conn: Conn<'_>, queue: &str, jobs: &[Claimed]) -> Result<()> {
        if self.fair.round_robin {
            // The queue's turn is written when it has moved on by
            // `TURN_LAG`: one write per that many rounds, not one per
            // claim; a key that idled gets at most that many turns of
            // credit.
            let last = jobs.iter().filter_map(|j| j.turn).max();
            if let Some(turn) = last.filter(|&t| t >= self.fair.turn + TURN_LAG) {
                crate::settings::set_int(
                    conn,
                    crate::rate::ops::QUEUE_SCOPE,
                    queue,
                    crate::rate::ops::FAIR_KEYS[0],
                    Some(turn),
                    self.now,
                )?;
            }
        }
        let Some(limit) = self.fair.key_limit else {
            return Ok(());
        };
        for (key, s) in self.starts.iter_mut().filter(|(_, s)| s.taken > 0) {
            let stored = QueueLimit {
                limit,
                tat: s.tat,
                set_at: self.fair.key_set_at,
            };
            if let (true, Some((blocks, _)), Some(name)) =
                (s.from_block, self.blocks, s.block_name.as_deref())
            {
                // Claims of one database are one writer's, one at a time:
                // the block this claim read still holds what it read.
                if blocks.0.take(name, &stored, s.taken, self.now).is_none() {
                    return Err(Error::internal(format!(
                        "the block of key {key:?} of queue {queue:?} changed during a claim"
                    )));
                }
                continue;
            }
            let mut tat = crate::rate::ops::queue_tat_after(&limit, s.tat, s.taken, self.now);
            if let (Some((_, true)), Some(name)) = (self.blocks, s.block_name.take()) {
                if let Some((block, reserved)) = Block::plan(&stored, tat, s.taken, self.now) {
                    tat = reserved;
                    self.reserved.push((name, block));
                }
            }
            conn.prepare_cached(statements::SET_KEY_TAT)?
                .execute(params![queue, key, tat])?;
        }
        Ok(())
    }
}

/// The room each concurrency key has under a queue's
/// `max_running_per_key` (ADR 35), as a claim fills it.
pub(crate) struct KeyRoom {
    cap: u32,
    running: std::collections::HashMap<String, u32>,
}

impl KeyRoom {
    /// The keys' unexpired leases in `queue` at `now`.
    pub(crate) fn read(conn: Conn<'_>, queue: &str, cap: u32, now: i64) -> Result<KeyRoom> {
        let mut running = std::collections::HashMap::new();
        let keys = conn
            .prepare_cached(statements::RUNNING_KEYS)?
            .query_map(params![queue, now], |r| r.get::<String>(0))?;
        for key in keys {
            *running.entry(key).or_insert(0u32) += 1;
        }
        Ok(KeyRoom { cap, running })
    }

    /// The keys at their cap, as the JSON array [`statements::PICK_KEYED`]
    /// steps over; `None` while no key is full.
    pub(crate) fn full(&self) -> Option<String> {
        let keys: Vec<&str> = self.full_keys().collect();
        if keys.is_empty() {
            return None;
        }
        Some(serde_json::to_string(&keys).unwrap_or_else(|_| "[]".into()))
    }

    /// The keys at their cap.
    fn full_keys(&self) -> impl Iterator<Item = &str> {
        self.running
            .iter()
            .filter(|(_, &n)| n >= self.cap)
            .map(|(k, _)| k.as_str())
    }

    /// Takes a slot of `key` (none: always room); false when it is full.
    fn take(&mut self, key: Option<&str>) -> bool {
        let Some(key) = key else { return true };
        match self.running.get_mut(key) {
            Some(n) if *n >= self.cap => false,
            Some(n) => {
                *n += 1;
                true
            }
            None => {
                self.running.insert(key.to_owned(), 1);
                true
            }
        }
    }
}

/// Leases up to `n` ready jobs and counts the claim.
#[allow(clippy::too_many_arguments)]
fn lease_counted(
    conn: Conn<'_>,
    queue: &str,
    worker_id: &str,
    n: usize,
    lease_ms: i64,
    now: i64,
    per_key: &mut Option<KeyRoom>,
    fair: &mut Option<FairClaim<'_>>,
) -> Result<Vec<Claimed>> {
    let jobs = pick_and_lease(conn, queue, worker_id, n, lease_ms, now, per_key, fair)?;
    if let Some(f) = fair {
        f.store(conn, queue, &jobs)?;
    }
    metrics::count_claims(
        conn,
        queue,
        jobs.iter().map(|j| now.saturating_sub(j.run_at)),
    )?;
    Ok(jobs)
}

#[allow(clippy::too_many_arguments)]
fn pick_and_lease(
    conn: Conn<'_>,
    queue: &str,
    worker_id: &str,
    n: usize,
    lease_ms: i64,
    now: i64,
    per_key: &mut Option<KeyRoom>,
    fair: &mut Option<FairClaim<'_>>,
) -> Result<Vec<Claimed>> {
    let lease_expires_at = now.saturating_add(lease_ms);
    let mut jobs = Vec::with_capacity(n.min(1024));
    loop {
        // Every row is read before the first update: the pick's statement is
        // finished (reset) by then.
        let asked = n - jobs.len();
        // One job and no key full: any ready job may start, its key unread.
        // (A fair pick lists the keys it steps over itself.)
        let full = per_key
            .as_ref()
            .filter(|_| fair.is_none())
            .map(KeyRoom::full);
        let keyed = per_key.is_some() && !(asked == 1 && matches!(full, Some(None)));
        let cols = match fair.as_ref() {
            Some(f) => Cols {
                turn: f.fair.round_robin,
                key: per_key.is_some() || f.fair.key_limit.is_some(),
                limited: f.fair.key_limit.is_some(),
            },
            None => Cols {
                turn: false,
                key: keyed,
                limited: false,
            },
        };
        let row = |r: &Row<'_>| {
            let id: i64 = r.get(0)?;
            Ok(pick_row(r, lease_expires_at, cols).map_err(|d| (id, d)))
        };
        let picked = match full {
            _ if fair.is_some() => {
                let f = fair.as_ref().expect("fair");
                let mut skip: Vec<&str> = f.spent().collect();
                if let Some(room) = per_key.as_ref() {
                    skip.extend(room.full_keys());
                }
                let mut bits = cols.bits();
                if !skip.is_empty() {
                    bits |= statements::FAIR_SKIP;
                }
                let mut stmt = conn.prepare_cached(&statements::PICK_FAIR[bits])?;
                let n = asked as i64;
                let skip = (!skip.is_empty())
                    .then(|| serde_json::to_string(&skip).unwrap_or_else(|_| "[]".into()));
                if cols.limited {
                    stmt.query_map(params![queue, n, skip, f.blocked_above], row)?
                } else if let Some(skip) = skip {
                    stmt.query_map(params![queue, n, skip], row)?
                } else {
                    stmt.query_map(params![queue, n], row)?
                }
            }
            _ if !keyed => conn
                .prepare_cached(statements::PICK)?
                .query_map(params![queue, asked as i64], row)?,
            None | Some(None) => conn
                .prepare_cached(&statements::PICK_KEYS)?
                .query_map(params![queue, asked as i64], row)?,
            Some(Some(full)) => conn
                .prepare_cached(&statements::PICK_KEYED)?
                .query_map(params![queue, asked as i64, full], row)?,
        };
        let seen = picked.len();
        let mut skipped = 0;
        let leased_from = jobs.len();
        for row in picked {
            match row {
                // A ready job with no attempt left (a row written by hand, or
                // imported): Honker dead-letters it at claim, and so do we.
                Ok(job) if job.attempts >= job.max_attempts => {
                    skipped += 1;
                    archive(conn, queue, job.id, JobState::Dead, Some(EXHAUSTED), now)?;
                }
                // Its key filled up or ran out of starts in this claim: it
                // waits (the next pick steps over the key).
                Ok(job)
                    if fair.as_mut().is_some_and(|f| !f.may_start(&job))
                        || per_key
                            .as_mut()
                            .is_some_and(|r| !r.take(job.concurrency_key.as_deref())) =>
                {
                    skipped += 1;
                }
                Ok(mut job) => {
                    if let Some(f) = fair.as_mut() {
                        f.started(&job);
                    }
                    job.lease_token = crate::raw::random_token();
                    job.attempts += 1;
                    jobs.push(job);
                }
                // A damaged row must not halt its queue, nor be skipped (it
                // would be picked again and again): it goes to the dead
                // letters in this transaction, and the claim picks again.
                Err((id, damage)) => {
                    skipped += 1;
                    let why = format!("undecodable row: {} holds {}", damage.column, damage.found);
                    archive(conn, queue, id, JobState::Dead, Some(&why), now)?;
                }
            }
        }
        lease(conn, worker_id, lease_expires_at, &jobs[leased_from..])?;
        // Skipped rows (damaged, exhausted, of a key that filled) did not
        // count: pick again, unless the pick found all there was.
        if skipped == 0 || seen < asked || jobs.len() >= n {
            return Ok(jobs);
        }
    }
}

/// Leases `jobs` (picked as ready, each with its new token) to `worker_id`:
/// by 32s and 8s in one statement each, the rest one by one.
fn lease(conn: Conn<'_>, worker_id: &str, expires_at: i64, jobs: &[Claimed]) -> Result<()> {
    let leased = |changed: usize, chunk: &[Claimed]| {
        if changed == chunk.len() {
            return Ok(());
        }
        let ids: Vec<i64> = chunk.iter().map(|j| j.id).collect();
        Err(Error::internal(format!(
            "jobs {ids:?} were picked as ready but {changed} could be leased"
        )))
    };
    let batches = [statements::LEASE_32.as_str(), statements::LEASE_8.as_str()];
    let rest = by_batches(conn, jobs, batches, |update, chunk| {
        let mut p: Vec<&dyn ToSql> = Vec::with_capacity(2 + 2 * chunk.len());
        p.extend_from_slice(params![worker_id, expires_at]);
        for job in chunk {
            p.extend_from_slice(params![job.id, job.lease_token]);
        }
        leased(update.execute(&p)?, chunk)
    })?;
    if !rest.is_empty() {
        let mut update = conn.prepare_cached(statements::LEASE)?;
        for job in rest {
            let p = params![job.id, worker_id, job.lease_token, expires_at];
            leased(update.execute(p)?, std::slice::from_ref(job))?;
        }
    }
    Ok(())
}

/// Runs `each` on `items` by chunks of 32, then of 8, with the statement of
/// that many rows (`sqls`: the 32's, then the 8's); returns the rest (fewer
/// than 8), for the one-row statement.
fn by_batches<'i, T>(
    conn: Conn<'_>,
    items: &'i [T],
    sqls: [&'static str; 2],
    mut each: impl FnMut(&mut crate::raw::Stmt<'_>, &'i [T]) -> Result<()>,
) -> Result<&'i [T]> {
    let mut rest = items;
    for (rows, sql) in [32, 8].into_iter().zip(sqls) {
        if rest.len() < rows {
            continue;
        }
        let mut stmt = conn.prepare_cached(sql)?;
        while rest.len() >= rows {
            let (chunk, tail) = rest.split_at(rows);
            each(&mut stmt, chunk)?;
            rest = tail;
        }
    }
    Ok(rest)
}

/// Which of the pick's columns a claim reads, after [`statements::PICK`]'s
/// own, in this order.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Cols {
    /// The turn (a round-robin queue).
    turn: bool,
    /// The key (a per-key cap or limit).
    key: bool,
    /// The key's `tat_us` (a rate limit per key).
    limited: bool,
}

impl Cols {
    /// As [`statements::PICK_FAIR`]'s bits.
    fn bits(self) -> usize {
        let mut bits = 0;
        if self.turn {
            bits |= statements::FAIR_TURN;
        }
        if self.key {
            bits |= statements::FAIR_KEY;
        }
        if self.limited {
            bits |= statements::FAIR_LIMITED;
        }
        bits
    }
}

/// A row of a pick ([`Cols`]) as a job, or what is damaged in it.
fn pick_row(
    r: &Row<'_>,
    lease_expires_at: i64,
    cols: Cols,
) -> std::result::Result<Claimed, Damage> {
    // Checked only: see PICK.
    r.decode::<i64>(7)?;
    r.decode::<i64>(8)?;
    r.decode::<f64>(9)?;
    r.decode::<Option<i64>>(10)?;
    Ok(Claimed {
        id: r.decode(0)?,
        payload: r.decode(1)?,
        attempts: r.decode(2)?,
        max_attempts: r.decode(3)?,
        priority: r.decode(4)?,
        run_at: r.decode(5)?,
        created_at: r.decode(6)?,
        lease_token: String::new(),
        lease_expires_at,
        trace_context: r.decode::<crate::trace::Stored>(11)?.0,
        turn: if cols.turn { r.decode(12)? } else { None },
        concurrency_key: if cols.key {
            r.decode(12 + usize::from(cols.turn))?
        } else {
            None
        },
        key_tat: if cols.limited {
            r.decode(13 + usize::from(cols.turn))?
        } else {
            None
        },
    })
}

/// The state changes that time alone makes due: expiry, promotion of
/// scheduled jobs, and reclaiming lapsed leases (dead-lettering those on their
/// last attempt).
fn housekeep(conn: Conn<'_>, queue: &str, now: i64, round_robin: bool) -> Result<()> {
    // One read of three index ranges; the usual answer is "nothing to do".
    let due: bool = conn
        .prepare_cached(statements::HOUSEKEEPING_DUE)?
        .query_one(params![queue, now], |r| r.get(0))?;
    if !due {
        return Ok(());
    }
    // A damaged time would keep its job from ever coming due (and from
    // being reclaimed): dead letters, as the pick does with damaged rows.
    let damaged: Vec<(i64, String, String)> = conn
        .prepare_cached(statements::DAMAGED_TIMES)?
        .query_map(params![queue], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    for (id, column, kind) in damaged {
        let why = format!("undecodable row: {column} holds {kind}");
        archive(conn, queue, id, JobState::Dead, Some(&why), now)?;
    }
    expire(conn, queue, now)?;
    if round_robin {
        turn_due(conn, queue, now)?;
    }
    conn.prepare_cached(statements::PROMOTE)?
        .execute(params![queue, now])?;
    for id in ids(conn, statements::LAPSED_EXHAUSTED, queue, now)? {
        archive(conn, queue, id, JobState::Dead, Some(EXHAUSTED), now)?;
    }
    let reclaimed = conn
        .prepare_cached(statements::RECLAIM)?
        .execute(params![queue, now])?;
    metrics::count(conn, queue, Event::Reclaimed, reclaimed as u64)
}

/// Gives a round-robin queue's due delayed jobs their turns, key by key,
/// as they come due (ADR 36).
fn turn_due(conn: Conn<'_>, queue: &str, now: i64) -> Result<()> {
    let due: Vec<(i64, String)> = conn
        .prepare_cached(statements::DUE_UNTURNED)?
        .query_map(params![queue, now], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let mut keys: std::collections::HashMap<String, Vec<i64>> = std::collections::HashMap::new();
    for (id, key) in due {
        keys.entry(key).or_default().push(id);
    }
    for (key, ids) in keys {
        give_turns(conn, queue, &key, &ids)?;
    }
    Ok(())
}

/// Moves `queue`'s jobs whose expiry passed before they started to the
/// finished records (`expired`); how many.
pub(crate) fn expire(conn: Conn<'_>, queue: &str, now: i64) -> Result<usize> {
    let expired = ids(conn, statements::DUE_EXPIRED, queue, now)?;
    for &id in &expired {
        archive(
            conn,
            queue,
            id,
            JobState::Expired,
            Some("expired before it started"),
            now,
        )?;
    }
    Ok(expired.len())
}

/// The earliest moment (ms) after `now` at which one of `queue`'s jobs
/// becomes claimable: a scheduled job's due time or a lease's lapse (not a
/// job that will expire first, nor a lease on its last attempt, which is
/// dead-lettered rather than reclaimed). `None`: nothing is coming.
pub(crate) fn next_claim_at(conn: Conn<'_>, queue: &str, now: i64) -> Result<Option<i64>> {
    conn.prepare_cached(statements::NEXT_CLAIM_AT)?
        .query_one(params![queue, now], |r| r.get(0))
}

fn ids(conn: Conn<'_>, sql: &'static str, queue: &str, now: i64) -> Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached(sql)?;
    stmt.query_map(params![queue, now], |r| r.get(0))
}

/// Moves a live job of `queue` to the finished records with `state`, and
/// counts it (a completed job as acked).
pub(crate) fn archive(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    state: JobState,
    error: Option<&str>,
    now: i64,
) -> Result<()> {
    let event = match state {
        JobState::Dead => Event::Dead,
        JobState::Expired => Event::Expired,
        JobState::Cancelled => Event::Cancelled,
        JobState::Completed => Event::Acked,
        JobState::Ready | JobState::Scheduled | JobState::Running => {
            return Err(Error::internal(format!("archive as {}", state.as_str())))
        }
    };
    move_to_finished(conn, id, state, error, now)?;
    metrics::count(conn, queue, event, 1)
}

/// [`archive`] without the count.
fn move_to_finished(
    conn: Conn<'_>,
    id: i64,
    state: JobState,
    error: Option<&str>,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(statements::ARCHIVE)?
        .execute(params![id, state.as_str(), error, now])?;
    conn.prepare_cached(statements::DELETE_JOB)?
        .execute(params![id])?;
    Ok(())
}

/// The error for a token that matched nothing: `LEASE_LOST` if the job is (or
/// was) in this queue, `NOT_FOUND` if it never existed here.
pub(crate) fn lease_error(conn: Conn<'_>, queue: &str, id: i64) -> Error {
    match job_queue(conn, id) {
        Ok(Some(q)) if q == queue => Error::lease_lost(id),
        Ok(Some(_)) => Error::not_found(format!("job {id} is not in queue {queue:?}")),
        Ok(None) if id > 0 && id <= max_id(conn).unwrap_or(0) => Error::lease_lost(id),
        Ok(None) => Error::not_found(format!("no job {id}")),
        Err(e) => e,
    }
}

/// The queue holding job `id` (live or finished), if it still exists.
pub(crate) fn job_queue(conn: Conn<'_>, id: i64) -> Result<Option<String>> {
    let live = conn
        .prepare_cached(statements::LIVE_QUEUE)?
        .query_row(params![id], |r| r.get(0))?;
    if live.is_some() {
        return Ok(live);
    }
    conn.prepare_cached(statements::FINISHED_QUEUE)?
        .query_row(params![id], |r| r.get(0))
}

fn max_id(conn: Conn<'_>) -> Result<i64> {
    Ok(conn
        .prepare_cached(statements::MAX_ID)?
        .query_row(params![], |r| r.get(0))?
        .unwrap_or(0))
}

/// A lease found by Honker's ownership rule ([`lease_by_worker`]).
#[derive(Debug)]
pub(crate) struct WorkerLease {
    pub queue: String,
    pub token: String,
    pub expires_at: i64,
}

/// The lease on `id` held by `worker_id` (and taken by the claim that
/// counted `attempt`, when given): Honker's ownership rule, for its SQL
/// forms. `None` when the worker holds none.
pub(crate) fn lease_by_worker(
    conn: Conn<'_>,
    id: i64,
    worker_id: &str,
    attempt: Option<i64>,
) -> Result<Option<WorkerLease>> {
    conn.prepare_cached(statements::LEASE_BY_WORKER)?.query_row(
        params![id, worker_id, attempt],
        |r| {
            Ok(WorkerLease {
                queue: r.get(0)?,
                token: r.get(1)?,
                expires_at: r.get(2)?,
            })
        },
    )
}

/// Acks a leased job: deletes it (or archives it as completed when
/// `keep_completed`), saving `result` in the same transaction.
pub(crate) fn ack(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    token: &str,
    result: Option<&Payload>,
    keep_completed: bool,
    now: i64,
) -> Result<()> {
    ack_uncounted(conn, queue, id, token, keep_completed, now)?;
    metrics::count(conn, queue, Event::Acked, 1)?;
    if let Some(value) = result {
        save_result(conn, queue, id, value, None, now)?;
    }
    Ok(())
}

/// Acks each `(id, token)` of `queue`, passing over the failures `skip`
/// accepts (a lease lost meanwhile); how many were acked, counted once.
pub(crate) fn ack_many<'t>(
    conn: Conn<'_>,
    queue: &str,
    leases: impl IntoIterator<Item = (i64, &'t str)>,
    keep_completed: bool,
    now: i64,
    skip: impl Fn(&Error) -> bool,
) -> Result<usize> {
    let mut acked = 0;
    for (id, token) in leases {
        match ack_uncounted(conn, queue, id, token, keep_completed, now) {
            Ok(()) => acked += 1,
            Err(e) if skip(&e) => {}
            Err(e) => return Err(e),
        }
    }
    metrics::count(conn, queue, Event::Acked, acked as u64)?;
    Ok(acked)
}

/// The ack itself: the job deleted (or kept as completed), not counted.
fn ack_uncounted(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    token: &str,
    keep_completed: bool,
    now: i64,
) -> Result<()> {
    if !keep_completed
        && conn
            .prepare_cached(statements::ACK)?
            .execute(params![id, queue, token])?
            == 1
    {
        return Ok(());
    }
    // Kept as completed, or with a dedupe key: a `period` hold starts
    // counting from now (ADR 37).
    let key: Option<String> = conn
        .prepare_cached(statements::LEASED_KEY)?
        .query_row(params![id, queue, token], |r| r.get(0))?
        .ok_or_else(|| lease_error(conn, queue, id))?;
    if let Some(key) = key {
        conn.prepare_cached(statements::END_HOLD)?
            .execute(params![queue, key, id, now])?;
    }
    if keep_completed {
        move_to_finished(conn, id, JobState::Completed, None, now)
    } else {
        conn.prepare_cached(statements::DELETE_JOB)?
            .execute(params![id])?;
        Ok(())
    }
}

/// The retry-relevant fields of a job held under a valid lease.
#[derive(Debug)]
pub(crate) struct Leased {
    pub attempts: u32,
    pub max_attempts: u32,
    pub run_at: i64,
    pub backoff_base_ms: i64,
    pub backoff_max_ms: i64,
    pub backoff_jitter: f64,
}

/// Checks the lease and reads the job's retry fields.
pub(crate) fn leased(conn: Conn<'_>, queue: &str, id: i64, token: &str) -> Result<Leased> {
    conn.prepare_cached(statements::LEASED)?
        .query_row(params![id, queue, token], |r| {
            Ok(Leased {
                attempts: r.get(0)?,
                max_attempts: r.get(1)?,
                run_at: r.get(2)?,
                backoff_base_ms: r.get(3)?,
                backoff_max_ms: r.get(4)?,
                backoff_jitter: r.get(5)?,
            })
        })?
        .ok_or_else(|| lease_error(conn, queue, id))
}

/// Exponential backoff with jitter for the retry after attempt `attempts`.
pub(crate) fn backoff_delay_ms(job: &Leased, random: f64) -> i64 {
    let exp = job.attempts.saturating_sub(1).min(62);
    let raw = job.backoff_base_ms.saturating_mul(1_i64 << exp.min(40));
    let capped = raw.min(job.backoff_max_ms).max(0);
    let scale = 1.0 - job.backoff_jitter.clamp(0.0, 1.0) * random.clamp(0.0, 1.0);
    (capped as f64 * scale).round() as i64
}

/// How a leased job goes back to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GiveBack {
    /// A failed attempt: counts, and dead-letters the job when it was the last.
    Retry,
    /// Not an attempt (release, snooze): the claim's attempt is given back.
    Uncounted,
}

/// Puts a leased job back: ready at `run_at` (or scheduled if that is in the
/// future). Returns the state it ended in.
pub(crate) fn give_back(
    conn: Conn<'_>,
    id: i64,
    run_at: i64,
    how: GiveBack,
    error: Option<&str>,
    now: i64,
) -> Result<JobState> {
    let state = if run_at > now {
        JobState::Scheduled
    } else {
        JobState::Ready
    };
    let refund = i64::from(how == GiveBack::Uncounted);
    conn.prepare_cached(statements::RESCHEDULE)?
        .execute(params![id, state.as_str(), run_at, refund, error])?;
    Ok(state)
}

/// Retries a leased job after `delay_ms` (or the job's backoff when `None`);
/// dead-letters it when its attempts are used up. Returns the new state.
pub(crate) fn retry(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    token: &str,
    delay_ms: Option<i64>,
    error: Option<&str>,
    now: i64,
) -> Result<JobState> {
    let job = leased(conn, queue, id, token)?;
    if job.attempts >= job.max_attempts {
        archive(
            conn,
            queue,
            id,
            JobState::Dead,
            error.or(Some("attempts exhausted")),
            now,
        )?;
        return Ok(JobState::Dead);
    }
    let delay = delay_ms.unwrap_or_else(|| backoff_delay_ms(&job, fastrand::f64()));
    metrics::count(conn, queue, Event::Retried, 1)?;
    give_back(
        conn,
        id,
        now.saturating_add(delay),
        GiveBack::Retry,
        error,
        now,
    )
}

/// Dead-letters a leased job now.
pub(crate) fn fail(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    token: &str,
    error: &str,
    now: i64,
) -> Result<()> {
    leased(conn, queue, id, token)?;
    archive(conn, queue, id, JobState::Dead, Some(error), now)
}

/// Gives a leased job back without consuming an attempt: at its old place in
/// line (`delay_ms` = `None`, release) or after a delay (snooze).
pub(crate) fn release(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    token: &str,
    delay_ms: Option<i64>,
    now: i64,
) -> Result<JobState> {
    let job = leased(conn, queue, id, token)?;
    let run_at = match delay_ms {
        Some(d) => now.saturating_add(d),
        None => job.run_at.min(now),
    };
    give_back(conn, id, run_at, GiveBack::Uncounted, None, now)
}

/// Extends a lease to `now + extend_ms`; returns the new expiry.
pub(crate) fn heartbeat(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    token: &str,
    extend_ms: i64,
    now: i64,
) -> Result<i64> {
    let until = now.saturating_add(extend_ms);
    let n = conn
        .prepare_cached(statements::HEARTBEAT)?
        .execute(params![id, queue, token, until])?;
    if n == 0 {
        return Err(lease_error(conn, queue, id));
    }
    Ok(until)
}

/// Cancels a live job (whatever its state). `Ok(false)` if it had already
/// finished; `NOT_FOUND` if it never existed in this queue.
pub(crate) fn cancel(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    reason: Option<&str>,
    now: i64,
) -> Result<bool> {
    let live: Option<String> = conn
        .prepare_cached(statements::LIVE_QUEUE)?
        .query_row(params![id], |r| r.get(0))?;
    match live {
        Some(q) if q == queue => {
            archive(
                conn,
                queue,
                id,
                JobState::Cancelled,
                Some(reason.unwrap_or("cancelled")),
                now,
            )?;
            Ok(true)
        }
        Some(_) => Err(Error::not_found(format!(
            "job {id} is not in queue {queue:?}"
        ))),
        None => match lease_error(conn, queue, id) {
            // Existed here once: already finished (acked, dead, cancelled, pruned).
            e if e.kind() == crate::ErrorKind::LeaseLost => Ok(false),
            e => Err(e),
        },
    }
}

/// Finds a job in any state.
pub(crate) fn get_job(conn: Conn<'_>, queue: &str, id: i64, now: i64) -> Result<Option<JobInfo>> {
    for q in [statements::GET_LIVE, statements::GET_FINISHED] {
        let info = conn
            .prepare_cached(q)?
            .query_row(params![id, queue], |r| JobInfo::from_row(r, now))?;
        if info.is_some() {
            return Ok(info);
        }
    }
    Ok(None)
}

/// Saves (or replaces) job `id`'s result, kept until `expires_at` (ms) when
/// given, else until retention.
pub(crate) fn save_result(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    value: &Payload,
    expires_at: Option<i64>,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(statements::SAVE_RESULT)?
        .execute(params![id, queue, value, now, expires_at])?;
    Ok(())
}

/// The saved result of a job, if any and not expired.
pub(crate) fn get_result(
    conn: Conn<'_>,
    queue: &str,
    id: i64,
    now: i64,
) -> Result<Option<Payload>> {
    conn.prepare_cached(statements::GET_RESULT)?
        .query_row(params![id, queue, now], |r| r.get(0))
}

/// The saved result of job `id` in any queue, if not expired (Honker's
/// results are keyed by job id alone).
pub(crate) fn get_result_by_id(conn: Conn<'_>, id: i64, now: i64) -> Result<Option<Payload>> {
    conn.prepare_cached(statements::GET_RESULT_BY_ID)?
        .query_row(params![id, now], |r| r.get(0))
}

/// Deletes every expired result; how many.
pub(crate) fn sweep_results(conn: Conn<'_>, now: i64) -> Result<usize> {
    conn.prepare_cached(statements::SWEEP_RESULTS)?
        .execute(params![now])
}

/// A page of dead letters with ids above `after`.
pub(crate) fn list_dead(
    conn: Conn<'_>,
    queue: &str,
    after: i64,
    limit: usize,
    now: i64,
) -> Result<Vec<JobInfo>> {
    let mut stmt = conn.prepare_cached(statements::LIST_DEAD)?;
    let rows = stmt.query_map(params![queue, after, limit as i64], |r| {
        JobInfo::from_row(r, now)
    })?;
    Ok(rows)
}

/// Requeues one dead letter (`id`) or all of them (`None`); returns how many
/// went back. Dead letters whose dedupe key a live job now holds stay dead.
pub(crate) fn requeue_dead(
    conn: Conn<'_>,
    queue: &str,
    id: Option<i64>,
    now: i64,
) -> Result<usize> {
    conn.prepare_cached(statements::REQUEUE_DEAD)?
        .execute(params![queue, now, id])?;
    conn.prepare_cached(statements::DELETE_REQUEUED)?
        .execute(params![queue, id])
}

/// What [`Queue::retry_now`](super::Queue::retry_now) did.
pub(crate) fn retry_now(conn: Conn<'_>, queue: &str, id: i64, now: i64) -> Result<RetryNow> {
    let state = get_job(conn, queue, id, now)?
        .ok_or_else(|| Error::not_found(format!("no job {id} in queue {queue:?}")))?
        .state;
    Ok(match state {
        JobState::Ready | JobState::Scheduled => {
            let moved = conn
                .prepare_cached(statements::RUN_NOW)?
                .execute(params![id, queue, now])?;
            if moved == 1 {
                RetryNow::MadeReady
            } else {
                RetryNow::Unchanged(JobState::Ready)
            }
        }
        JobState::Dead if requeue_dead(conn, queue, Some(id), now)? == 1 => RetryNow::Requeued,
        other => RetryNow::Unchanged(other),
    })
}

/// Deletes dead letters that died before `before` (ms).
pub(crate) fn purge_dead(conn: Conn<'_>, queue: &str, before: i64) -> Result<usize> {
    conn.prepare_cached(statements::PURGE_DEAD)?
        .execute(params![queue, before])
}

/// What a waiting claimer needs: whether work is claimable now, else the
/// earliest time (ms) at which it will be without another commit.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    Claimable,
    NextAt(Option<i64>),
    /// Paused (ADR 33): nothing is claimable until a commit resumes it;
    /// `held` when work is due that the pause holds back.
    Paused {
        held: bool,
    },
}

/// Read-only check of `queue` (runs on a reader).
pub(crate) fn probe(conn: Conn<'_>, queue: &str, now: i64) -> Result<Probe> {
    let (ready, due, lapse, paused): (bool, Option<i64>, Option<i64>, bool) = conn
        .prepare_cached(statements::PROBE)?
        .query_one(params![queue], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .map_err(|e| name_damaged(conn, queue, e))?;
    if paused {
        // Nothing is claimable until a commit resumes it: wait for one.
        let held = ready || due.is_some_and(|t| t <= now) || lapse.is_some_and(|t| t <= now);
        return Ok(Probe::Paused { held });
    }
    let next = match (due, lapse) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let probe = match next {
        _ if ready => Probe::Claimable,
        Some(t) if t <= now => Probe::Claimable,
        other => Probe::NextAt(other),
    };
    if let Probe::Claimable = probe {
        // What the claim would read: its caps' room and its rate limit.
        let Controls {
            limit: stored,
            running,
            per_key,
            fair,
        } = claim_controls(conn, queue, now)?;
        // Ready work its caps hold back (ADR 35) waits for a commit (an
        // ack, say) or for a running job's lease to end, whichever comes
        // first; a due scheduled job (`next`, now or past) is promoted by
        // a claim first.
        if ready && capped(conn, queue, running, per_key.as_ref())? {
            return Ok(Probe::NextAt(next));
        }
        // Ready work whose keys are all at their rate limit or cap (ADR
        // 36) waits as long, or until the first of those keys may start
        // again.
        if let Some(limit) = fair.as_ref().and_then(|f| f.key_limit.as_ref()) {
            if ready {
                if let Some(opens) = keys_held(conn, queue, limit, per_key.as_ref(), now)? {
                    let at = next.map_or(opens, |t| t.min(opens));
                    return Ok(Probe::NextAt(Some(at)));
                }
            }
        }
        // Work is there; a rate limit may still hold it back. Then sleep
        // until the limit lets one start, plus a jitter up to a quarter of
        // the interval (at most 25 ms), so that the workers waiting on one
        // queue do not all wake at that instant and race for one start.
        if let Some(stored) = stored {
            let l = stored.limit;
            let (allowed, next_ms) = crate::rate::ops::queue_allowance(&l, stored.tat, 1, now);
            if allowed == 0 {
                let spread = (l.interval_us() / 4000).clamp(0, 25);
                let jitter = if spread > 0 {
                    fastrand::i64(0..=spread)
                } else {
                    0
                };
                return Ok(Probe::NextAt(Some(next_ms.saturating_add(jitter))));
            }
        }
    }
    Ok(probe)
}

/// Whether `queue`'s caps, with the room a claim's [`Controls`] found,
/// let no ready job start.
fn capped(
    conn: Conn<'_>,
    queue: &str,
    running: Option<u32>,
    per_key: Option<&KeyRoom>,
) -> Result<bool> {
    if running == Some(0) {
        return Ok(true);
    }
    let Some(full) = per_key.and_then(KeyRoom::full) else {
        return Ok(false);
    };
    let open: bool = conn
        .prepare_cached(statements::READY_UNCAPPED)?
        .query_one(params![queue, full], |r| r.get(0))?;
    Ok(!open)
}

/// When every ready job of `queue` belongs to a key at its rate limit (or
/// its cap): the moment (ms) the first key at its rate limit may start one
/// again. `None` when a ready job may start now.
fn keys_held(
    conn: Conn<'_>,
    queue: &str,
    limit: &crate::rate::RateLimit,
    per_key: Option<&KeyRoom>,
    now: i64,
) -> Result<Option<i64>> {
    let above = crate::rate::ops::key_blocked_above(limit, now);
    let skip = per_key
        .and_then(KeyRoom::full)
        .unwrap_or_else(|| "[]".into());
    let open: bool = conn
        .prepare_cached(statements::READY_OPEN)?
        .query_one(params![queue, skip, above], |r| r.get(0))?;
    if open {
        return Ok(None);
    }
    let first: Option<i64> = conn
        .prepare_cached(statements::FIRST_HELD_KEY)?
        .query_one(params![queue, above], |r| r.get(0))?;
    // A key whose tat is `first` may start one once `first − τ + T` came.
    Ok(Some(first.map_or(i64::MAX, |tat| {
        crate::rate::ops::queue_allowance(limit, Some(tat), 1, now).1
    })))
}

/// The queues with a concurrency cap or a fairness (`honker status` lists
/// them, jobs or not).
pub(crate) fn capped_queues(conn: Conn<'_>) -> Result<Vec<String>> {
    conn.prepare_cached(statements::CAPPED_QUEUES)?
        .query_map(params![], |r| r.get(0))
}

/// Sets (`None`: lifts) each of `queue`'s concurrency caps, checked.
pub(crate) fn limit_concurrency(
    conn: Conn<'_>,
    queue: &str,
    caps: &super::Concurrency,
    now: i64,
) -> Result<()> {
    caps.check()?;
    let keys = crate::rate::ops::CAP_KEYS;
    for (key, cap) in keys
        .into_iter()
        .zip([caps.max_running, caps.max_running_per_key])
    {
        match cap {
            Some(n) => crate::settings::set_int(
                conn,
                crate::rate::ops::QUEUE_SCOPE,
                queue,
                key,
                Some(i64::from(n)),
                now,
            )?,
            None => {
                conn.prepare_cached(statements::CLEAR_CAP)?
                    .execute(params![queue, key])?;
            }
        }
    }
    Ok(())
}

/// Removes up to `batch` key rows that carry nothing any more
/// ([`statements::SWEEP_KEYS`]); how many.
pub(crate) fn sweep_keys(conn: Conn<'_>, now: i64, batch: usize) -> Result<usize> {
    conn.prepare_cached(statements::SWEEP_KEYS)?
        .execute(params![now.saturating_mul(1000), batch as i64])
}

/// Removes up to `batch` unique holds that hold nothing any more
/// ([`statements::SWEEP_HOLDS`]); how many.
pub(crate) fn sweep_holds(conn: Conn<'_>, now: i64, batch: usize) -> Result<usize> {
    conn.prepare_cached(statements::SWEEP_HOLDS)?
        .execute(params![now, batch as i64])
}

/// Sets `queue`'s fairness (ADR 36), checked: its order and its rate limit
/// per key (a field not given: the default, priority order and no limit).
/// Leaving round-robin order forgets the queue's turns.
pub(crate) fn set_fairness(
    conn: Conn<'_>,
    queue: &str,
    fairness: &super::Fairness,
    now: i64,
) -> Result<()> {
    let (round_robin, limit) = fairness.parse()?;
    let scope = crate::rate::ops::QUEUE_SCOPE;
    let [order_key, limit_key, per_key] = crate::rate::ops::FAIR_KEYS;
    let clear = |key: &str| -> Result<()> {
        conn.prepare_cached(statements::CLEAR_CAP)?
            .execute(params![queue, key])?;
        Ok(())
    };
    let was = crate::settings::get_int(conn, scope, queue, order_key)?.is_some();
    if round_robin && !was {
        // Its turns start at 0 (the row's value is the current turn).
        crate::settings::set_int(conn, scope, queue, order_key, Some(0), now)?;
    } else if !round_robin && was {
        clear(order_key)?;
        conn.prepare_cached(statements::CLEAR_TURNS)?
            .execute(params![queue])?;
        conn.prepare_cached(statements::CLEAR_KEY_TURNS)?
            .execute(params![queue])?;
    }
    match limit {
        Some(l) => {
            let packed = crate::rate::ops::pack_key_limit(&l);
            crate::settings::set_int(conn, scope, queue, limit_key, Some(packed), now)?;
            crate::settings::set_int(conn, scope, queue, per_key, Some(l.per_ms()), now)?;
        }
        None => {
            clear(limit_key)?;
            clear(per_key)?;
        }
    }
    Ok(())
}

/// Pauses `queue` (`""`: all queues) with `note` (checked here, for the
/// handle's verbs and the SQL functions alike); a queue paused already
/// keeps its time and takes the note.
pub(crate) fn pause(conn: Conn<'_>, queue: &str, note: Option<&str>, now: i64) -> Result<()> {
    if let Some(n) = note {
        crate::validate::key_or_empty("a pause note", n)?;
    }
    conn.prepare_cached(statements::PAUSE)?
        .execute(params![queue, note, now])?;
    Ok(())
}

/// Lifts `queue`'s own pause (`""`: all queues'); whether there was one.
pub(crate) fn resume(conn: Conn<'_>, queue: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(statements::RESUME)?
        .execute(params![queue])?
        > 0)
}

/// The pauses that cover `queue` (its own first, then all queues'); with
/// `""`, the pause of all queues alone.
pub(crate) fn pauses(conn: Conn<'_>, queue: &str) -> Result<Vec<super::Pause>> {
    conn.prepare_cached(statements::PAUSES)?
        .query_map(params![queue], |r| Ok(pause_row(r)?.1))
}

/// Each queue's own pause, by the queue's name.
pub(crate) fn paused_queues(conn: Conn<'_>) -> Result<Vec<(String, super::Pause)>> {
    conn.prepare_cached(statements::PAUSED_QUEUES)?
        .query_map(params![], pause_row)
}

/// A pause's row: (name, note, since), `''` naming all queues.
fn pause_row(r: &Row<'_>) -> Result<(String, super::Pause)> {
    let name: String = r.get(0)?;
    let pause = super::Pause {
        all: name.is_empty(),
        note: r.get(1)?,
        since: r.get(2)?,
    };
    Ok((name, pause))
}

/// Counts per state for `queue`.
pub(crate) fn stats(conn: Conn<'_>, queue: &str, now: i64) -> Result<QueueStats> {
    let mut s = live_stats(conn, queue, now).map_err(|e| name_damaged(conn, queue, e))?;
    s.paused = !pauses(conn, queue)?.is_empty();
    let (_, caps, fair) = crate::rate::ops::queue_controls(conn, queue)?;
    s.max_running = caps.max_running;
    s.max_running_per_key = caps.max_running_per_key;
    if let Some(f) = fair {
        s.round_robin = f.round_robin;
        s.key_limit = f.key_limit.as_ref().map(|l| l.limit as u32);
        s.key_per_ms = f.key_limit.as_ref().map(|l| l.per_ms());
    }
    let finished = conn
        .prepare_cached(statements::FINISHED_STATS)?
        .query_map(params![queue], |r| Ok((r.get::<String>(0)?, count(r, 1)?)))?;
    for (state, n) in finished {
        match JobState::parse(&state) {
            Some(JobState::Dead) => s.dead = n,
            Some(JobState::Cancelled) => s.cancelled = n,
            Some(JobState::Expired) => s.expired = n,
            Some(JobState::Completed) => s.completed = n,
            _ => {}
        }
    }
    Ok(s)
}

/// `err` (from reading `queue`'s live jobs) naming the damaged job when
/// that is what it is.
fn name_damaged(conn: Conn<'_>, queue: &str, err: Error) -> Error {
    if err.sqlite_code() != Some(libsqlite3_sys::SQLITE_CORRUPT) {
        return err;
    }
    match conn
        .prepare_cached(statements::DAMAGED_LIVE)
        .and_then(|mut s| s.query_row(params![queue], |r| r.get::<i64>(0)))
    {
        Ok(Some(id)) => err.for_job(id),
        _ => err,
    }
}

fn live_stats(conn: Conn<'_>, queue: &str, now: i64) -> Result<QueueStats> {
    conn.prepare_cached(statements::LIVE_STATS)?
        .query_one(params![queue, now], |r| {
            let ready = count(r, 0)?;
            let due = count(r, 1)?;
            let oldest: Option<i64> = match (r.get::<Option<i64>>(5)?, r.get::<Option<i64>>(6)?) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b).filter(|&t| t <= now),
            };
            Ok(QueueStats {
                ready: ready + due,
                scheduled: count(r, 2)?,
                running: count(r, 3)?,
                lapsed: count(r, 4)?,
                oldest_ready_age_ms: oldest.map(|t| (now - t).max(0)),
                ..QueueStats::default()
            })
        })
}

fn count(r: &Row<'_>, i: usize) -> Result<u64> {
    Ok(u64::try_from(r.get::<i64>(i)?).unwrap_or(0))
}

/// The `_honker_settings` scope of a queue's stored defaults.
pub(crate) const SETTINGS_SCOPE: &str = "queue";

/// The options a queue's jobs and claims get where a call names none: its
/// stored settings over the defaults, read on `conn` (what a handle made now
/// would have). The SQL functions and the scheduler, which make no handle,
/// read them so.
pub(crate) fn stored_options(conn: Conn<'_>, queue: &str) -> Result<crate::QueueOptions> {
    Ok(settings_of(conn, queue)?.over(&crate::QueueOptions::default()))
}

/// A queue's stored settings, read on `conn`.
pub(crate) fn settings_of(conn: Conn<'_>, queue: &str) -> Result<crate::QueueSettings> {
    let mut s = crate::QueueSettings::default();
    for (key, value) in crate::settings::get_all(conn, SETTINGS_SCOPE, queue)? {
        let Some(v) = value else { continue };
        let ms = || std::time::Duration::from_millis(u64::try_from(v).unwrap_or(0));
        match key.as_str() {
            "lease_ms" => s.lease = Some(ms()),
            "max_attempts" => s.max_attempts = u32::try_from(v).ok(),
            "backoff_base_ms" => s.backoff_base = Some(ms()),
            "backoff_max_ms" => s.backoff_max = Some(ms()),
            "backoff_jitter_ppm" => s.backoff_jitter = Some(v as f64 / 1e6),
            _ => {}
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(attempts: u32, base: i64, max: i64, jitter: f64) -> Leased {
        Leased {
            attempts,
            max_attempts: 10,
            run_at: 0,
            backoff_base_ms: base,
            backoff_max_ms: max,
            backoff_jitter: jitter,
        }
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_delay_ms(&job(1, 1000, 60_000, 0.0), 0.7), 1000);
        assert_eq!(backoff_delay_ms(&job(2, 1000, 60_000, 0.0), 0.7), 2000);
        assert_eq!(backoff_delay_ms(&job(4, 1000, 60_000, 0.0), 0.7), 8000);
        assert_eq!(backoff_delay_ms(&job(30, 1000, 60_000, 0.0), 0.7), 60_000);
        assert_eq!(backoff_delay_ms(&job(200, 1000, 60_000, 0.0), 0.7), 60_000);
    }

    #[test]
    fn jitter_scales_down_within_bounds() {
        assert_eq!(backoff_delay_ms(&job(1, 1000, 60_000, 0.5), 0.0), 1000);
        assert_eq!(backoff_delay_ms(&job(1, 1000, 60_000, 0.5), 1.0), 500);
        assert_eq!(backoff_delay_ms(&job(1, 1000, 60_000, 0.5), 0.5), 750);
    }
}
