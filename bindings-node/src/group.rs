//! Consumer groups for Node (`honker::stream::group`,
//! `honker::runtime::GroupConsumer`): every verb once as an operation,
//! exported async and `try*` (errors.rs's `verbs!`); a consumer's waits run
//! on tokio's blocking pool, and its last reference is dropped there (its
//! drop releases what it buffered). Durations cross as ms.

use std::sync::Arc;

use honker::runtime::OffThreadDrop;
use honker::stream::group::GroupOptions;
use napi_derive::napi;

use crate::database::{with_tx, Txs};
use napi::bindgen_prelude::AsyncBlock;
use napi::Env;

use crate::errors::{now, opt_ms, out, pending, verbs, Op, Out};
use crate::records::{GroupArgs, GroupDeadLetter, GroupEvent, GroupMember};
use crate::stream::StartArg;

/// An event's `(offset, token)`: what an outcome presents.
#[napi(object)]
pub struct GroupLease {
    pub offset: i64,
    pub token: String,
}

/// What one claim delivered, and the events retention removed before the
/// group handled them (noticed by this claim).
#[napi(object)]
pub struct GroupClaim {
    pub events: Vec<GroupEvent>,
    pub missed: i64,
}

/// A group's options as stored; durations in ms.
#[napi(object)]
pub struct GroupSettings {
    pub max_deliveries: u32,
    pub lease: f64,
    pub member_idle: f64,
}

/// What `Group.info` (and each of a stream's `groups`) reports.
#[napi(object)]
pub struct GroupInfo {
    pub group: String,
    pub next_offset: i64,
    pub lag: i64,
    pub pending: i64,
    pub delivered: i64,
    pub dead: i64,
    pub oldest_pending_age_ms: Option<i64>,
    pub members: Vec<GroupMember>,
    pub options: GroupSettings,
}

impl From<honker::stream::group::GroupInfo> for GroupInfo {
    fn from(i: honker::stream::group::GroupInfo) -> GroupInfo {
        GroupInfo {
            group: i.group,
            next_offset: i.next_offset,
            lag: i.lag,
            pending: i.pending,
            delivered: i.delivered,
            dead: i.dead,
            oldest_pending_age_ms: i.oldest_pending_age_ms,
            members: i.members.into_iter().map(GroupMember::from).collect(),
            options: GroupSettings {
                max_deliveries: i.options.max_deliveries,
                lease: i.options.lease.as_secs_f64() * 1000.0,
                member_idle: i.options.member_idle.as_secs_f64() * 1000.0,
            },
        }
    }
}

/// A handle on one consumer group of a stream.
#[napi]
pub struct Group {
    g: honker::stream::group::Group,
    txs: Arc<Txs>,
}

impl Group {
    pub(crate) fn new(g: honker::stream::group::Group, txs: Arc<Txs>) -> Group {
        Group { g, txs }
    }

    pub(crate) fn core(&self) -> &honker::stream::group::Group {
        &self.g
    }

    fn op<T>(
        &self,
        f: impl FnOnce(&honker::stream::group::Group) -> honker::Result<T> + Send + 'static,
    ) -> Op<T> {
        let g = self.g.clone();
        Box::new(move || f(&g))
    }

    fn create_op(&self, start: StartArg, options: Option<GroupArgs>) -> Op<i64> {
        self.op(move |g| {
            let o = GroupOptions::from(options.unwrap_or_default().to_core()?);
            g.create(crate::stream::start(start)?, &o)
        })
    }

    fn delete_op(&self) -> Op<bool> {
        self.op(|g| g.delete())
    }

    fn claim_op(&self, member: String, n: u32, lease: Option<f64>, wait: f64) -> Op<GroupClaim> {
        self.op(move |g| {
            let lease = opt_ms("lease", lease)?;
            let wait = crate::errors::ms("wait", wait)?;
            let c = g.claim_wait(&member, n as usize, lease, wait)?;
            Ok(GroupClaim {
                events: c.events.into_iter().map(GroupEvent::from).collect(),
                missed: i64::try_from(c.missed).unwrap_or(i64::MAX),
            })
        })
    }

    fn ack_op(&self, offset: i64, token: String, tx: Option<u32>) -> Op<()> {
        let txs = Arc::clone(&self.txs);
        self.op(move |g| {
            with_tx(&txs, tx, |t| match t {
                Some(t) => g.ack_tx(t, &(offset, token)),
                None => g.ack(&(offset, token)),
            })
        })
    }

    fn ack_many_op(&self, events: Vec<GroupLease>) -> Op<()> {
        self.op(move |g| {
            let leases: Vec<(i64, String)> =
                events.into_iter().map(|e| (e.offset, e.token)).collect();
            g.ack_many(&leases)
        })
    }

    fn retry_op(
        &self,
        offset: i64,
        token: String,
        delay: Option<f64>,
        error: Option<String>,
    ) -> Op<bool> {
        self.op(move |g| g.retry(&(offset, token), opt_ms("delay", delay)?, error.as_deref()))
    }

    fn fail_op(&self, offset: i64, token: String, error: String) -> Op<()> {
        self.op(move |g| g.fail(&(offset, token), &error))
    }

    fn release_op(&self, offset: i64, token: String) -> Op<()> {
        self.op(move |g| g.release(&(offset, token)))
    }

    fn heartbeat_op(&self, offset: i64, token: String, extend: Option<f64>) -> Op<i64> {
        self.op(move |g| g.heartbeat(&(offset, token), opt_ms("extend", extend)?))
    }

    fn remove_member_op(&self, member: String, force: bool) -> Op<i64> {
        self.op(move |g| g.remove_member(&member, force))
    }

    fn dead_op(&self, after: i64, limit: u32) -> Op<Vec<GroupDeadLetter>> {
        self.op(move |g| {
            Ok(g.dead(after, limit as usize)?
                .into_iter()
                .map(GroupDeadLetter::from)
                .collect())
        })
    }

    fn redrive_op(&self, offset: i64) -> Op<()> {
        self.op(move |g| g.redrive(offset))
    }

    fn info_op(&self) -> Op<GroupInfo> {
        self.op(|g| g.info().map(GroupInfo::from))
    }
}

verbs! {
    impl Group;
    #[doc = "Creates the group at `start` (idempotent: an existing group keeps its place and"]
    #[doc = "takes the options); resolves to its next offset."]
    create / try_create (start: StartArg, options: Option<GroupArgs>) -> i64 = create_op;
    #[doc = "Deletes the group with its pending events, dead letters and members."]
    delete / try_delete () -> bool = delete_op;
    #[doc = "Up to `n` events for `member`, waiting up to `wait` ms (0: not at all)."]
    claim / try_claim (member: String, n: u32, lease: Option<f64>, wait: f64) -> GroupClaim = claim_op;
    ack / try_ack (offset: i64, token: String, tx: Option<u32>) -> () = ack_op;
    #[doc = "Acks several delivered events in one transaction: all or none."]
    ack_many / try_ack_many (events: Vec<GroupLease>) -> () = ack_many_op;
    #[doc = "A failed delivery; resolves to whether the event died."]
    retry / try_retry (offset: i64, token: String, delay: Option<f64>, error: Option<String>) -> bool = retry_op;
    fail / try_fail (offset: i64, token: String, error: String) -> () = fail_op;
    release / try_release (offset: i64, token: String) -> () = release_op;
    #[doc = "Extends the lease; resolves to its new end (ms since the epoch)."]
    heartbeat / try_heartbeat (offset: i64, token: String, extend: Option<f64>) -> i64 = heartbeat_op;
    #[doc = "Removes `member` (one holding events only with `force`); resolves to how many it held."]
    remove_member / try_remove_member (member: String, force: bool) -> i64 = remove_member_op;
    dead / try_dead (after: i64, limit: u32) -> Vec<GroupDeadLetter> = dead_op;
    redrive / try_redrive (offset: i64) -> () = redrive_op;
    info / try_info () -> GroupInfo = info_op;
}

#[napi]
impl Group {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.g.name().to_owned()
    }

    /// Re-drives every dead letter (in batches); resolves to how many.
    #[napi]
    pub fn redrive_all(&self, env: Env) -> napi::Result<AsyncBlock<Out<i64>>> {
        let g = self.g.clone();
        pending(&env, Box::new(move || g.redrive_all().map(|n| n as i64)))
    }

    /// `member` as a stream of events, claiming `batch` at once, leased for
    /// `lease` ms (the group's when null). Writes nothing until read.
    #[napi]
    pub fn consume(&self, member: String, batch: u32, lease: Option<f64>) -> Out<GroupConsumer> {
        out(opt_ms("lease", lease).and_then(|lease| {
            let c = honker::runtime::GroupConsumer::new(&self.g, &member, batch as usize, lease)?;
            Ok(GroupConsumer {
                c: OffThreadDrop::new(c),
                db: self.g.stream().database().clone(),
            })
        }))
    }
}

/// See `Group.consume`.
#[napi]
pub struct GroupConsumer {
    c: OffThreadDrop<honker::runtime::GroupConsumer>,
    db: honker::Database,
}

#[napi]
impl GroupConsumer {
    /// The next event, waiting up to `wait` ms (holding no thread while it
    /// waits); null when the wait ran out or the consumer was closed.
    /// TRIMMED (with `missed`) when the stream's age limit removed events
    /// before the group handled them.
    #[napi]
    pub async fn next(&self, wait: f64) -> napi::Result<Out<Option<GroupEvent>>> {
        let e = crate::waits::next(
            self.db.clone(),
            wait,
            self.c.shared(),
            honker::runtime::GroupConsumer::is_closed,
        )
        .await;
        Ok(out(e.map(|e| e.map(GroupEvent::from))))
    }

    /// `next` without waiting (`wait` must be 0): `WOULD_WAIT` where it
    /// would.
    #[napi]
    pub fn try_next(&self, wait: f64) -> Out<Option<GroupEvent>> {
        let c = self.c.shared();
        now(move || {
            Ok(c.next(crate::errors::ms("wait", wait)?)?
                .map(GroupEvent::from))
        })
    }

    /// Stops: releases the events claimed and not handed out (their
    /// deliveries not counted) and wakes a waiting `next`; resolves to how
    /// many it released.
    #[napi]
    pub fn close(&self, env: Env) -> napi::Result<AsyncBlock<Out<i64>>> {
        let c = self.c.shared();
        pending(&env, Box::new(move || Ok(c.close() as i64)))
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.c.is_closed()
    }

    #[napi(getter)]
    pub fn member(&self) -> String {
        self.c.member().to_owned()
    }
}
