//! Consumer groups for Swift (`honker::stream::group`,
//! `honker::runtime::GroupConsumer`), with durations in milliseconds. The
//! idiomatic layer (`Sources/Honker/Group.swift`) runs every call off the
//! caller's thread and turns a consumer into an `AsyncSequence` that ends on
//! Task cancellation.

use std::sync::Arc;

use honker::runtime::OffThreadDrop;
use honker::stream::group::GroupOptions;

use crate::database::{in_tx, Transaction};
use crate::errors::{ms, opt_ms, R};
use crate::queue::CancelToken;
use crate::records::{GroupArgs, GroupDeadLetter, GroupEvent, GroupMember};
use crate::stream::{StartPosition, Stream};

/// What one claim delivered, and the events retention removed before the
/// group handled them.
#[derive(Debug, uniffi::Record)]
pub struct GroupClaimRecord {
    pub events: Vec<GroupEvent>,
    pub missed: u64,
}

/// What `Group::info` (and each of a stream's groups) reports.
#[derive(Debug, uniffi::Record)]
pub struct GroupInfoRecord {
    pub group: String,
    pub next_offset: i64,
    pub lag: i64,
    pub pending: i64,
    pub delivered: i64,
    pub dead: i64,
    pub oldest_pending_age_ms: Option<i64>,
    pub members: Vec<GroupMember>,
    pub max_deliveries: u32,
    pub lease_ms: u64,
    pub member_idle_ms: u64,
}

impl From<honker::stream::group::GroupInfo> for GroupInfoRecord {
    fn from(i: honker::stream::group::GroupInfo) -> GroupInfoRecord {
        GroupInfoRecord {
            group: i.group,
            next_offset: i.next_offset,
            lag: i.lag,
            pending: i.pending,
            delivered: i.delivered,
            dead: i.dead,
            oldest_pending_age_ms: i.oldest_pending_age_ms,
            members: i.members.into_iter().map(GroupMember::from).collect(),
            max_deliveries: i.options.max_deliveries,
            lease_ms: i.options.lease.as_millis() as u64,
            member_idle_ms: i.options.member_idle.as_millis() as u64,
        }
    }
}

/// A handle on one consumer group of a stream.
#[derive(Debug, uniffi::Object)]
pub struct Group {
    g: honker::stream::group::Group,
}

#[uniffi::export]
impl Stream {
    /// A handle on the consumer group `name` (writes nothing).
    pub fn group(&self, name: String) -> R<Arc<Group>> {
        Ok(Arc::new(Group {
            g: self.core().group(&name)?,
        }))
    }
}

impl Group {
    pub(crate) fn core(&self) -> &honker::stream::group::Group {
        &self.g
    }
}

#[uniffi::export]
impl Group {
    pub fn name(&self) -> String {
        self.g.name().to_owned()
    }

    /// Creates the group at `start` (idempotent: an existing group keeps its
    /// place and takes the options); returns its next offset.
    /// `GroupArgs` from the generated `create` overload (seconds); a field
    /// not given is core's default.
    pub fn create(&self, start: StartPosition, options: GroupArgs) -> R<i64> {
        let o = GroupOptions::from(options.to_core()?);
        Ok(self.g.create(crate::stream::start(start), &o)?)
    }

    pub fn delete(&self) -> R<bool> {
        Ok(self.g.delete()?)
    }

    /// Up to `n` events for `member`, waiting up to `wait_ms` (0: not at
    /// all).
    pub fn claim(
        &self,
        member: String,
        n: u32,
        lease_ms: Option<u64>,
        wait_ms: u64,
        cancel: Option<Arc<CancelToken>>,
    ) -> R<GroupClaimRecord> {
        let (lease, wait) = (opt_ms("lease", lease_ms)?, ms("wait", wait_ms)?);
        let c = match cancel {
            Some(c) => c
                .core()
                .claim_group(&self.g, &member, n as usize, lease, wait)?,
            None => self.g.claim_wait(&member, n as usize, lease, wait)?,
        };
        Ok(GroupClaimRecord {
            events: c.events.into_iter().map(GroupEvent::from).collect(),
            missed: c.missed,
        })
    }

    pub fn ack(&self, offset: i64, token: String, tx: Option<Arc<Transaction>>) -> R<()> {
        in_tx(&tx, |t| match t {
            Some(t) => self.g.ack_tx(t, &(offset, token)),
            None => self.g.ack(&(offset, token)),
        })
    }

    /// Returns whether the event died (its deliveries were spent).
    pub fn retry(
        &self,
        offset: i64,
        token: String,
        delay_ms: Option<u64>,
        error: Option<String>,
    ) -> R<bool> {
        Ok(self.g.retry(
            &(offset, token),
            opt_ms("delay", delay_ms)?,
            error.as_deref(),
        )?)
    }

    pub fn fail(&self, offset: i64, token: String, error: String) -> R<()> {
        Ok(self.g.fail(&(offset, token), &error)?)
    }

    pub fn release(&self, offset: i64, token: String) -> R<()> {
        Ok(self.g.release(&(offset, token))?)
    }

    /// Extends the lease; returns its new end (ms since the epoch).
    pub fn heartbeat(&self, offset: i64, token: String, extend_ms: Option<u64>) -> R<i64> {
        Ok(self
            .g
            .heartbeat(&(offset, token), opt_ms("extend", extend_ms)?)?)
    }

    /// Removes `member` (one holding events only with `force`); returns how
    /// many it held.
    pub fn remove_member(&self, member: String, force: bool) -> R<i64> {
        Ok(self.g.remove_member(&member, force)?)
    }

    pub fn dead(&self, after: i64, limit: u32) -> R<Vec<GroupDeadLetter>> {
        let dead = self.g.dead(after, limit as usize)?;
        Ok(dead.into_iter().map(GroupDeadLetter::from).collect())
    }

    pub fn redrive(&self, offset: i64) -> R<()> {
        Ok(self.g.redrive(offset)?)
    }

    pub fn redrive_all(&self) -> R<u64> {
        Ok(self.g.redrive_all()? as u64)
    }

    pub fn info(&self) -> R<GroupInfoRecord> {
        Ok(self.g.info()?.into())
    }

    /// `member` as a stream of events, claiming `batch` at once.
    pub fn consume(
        &self,
        member: String,
        batch: u32,
        lease_ms: Option<u64>,
    ) -> R<Arc<GroupConsumer>> {
        let c = honker::runtime::GroupConsumer::new(
            &self.g,
            &member,
            batch as usize,
            opt_ms("lease", lease_ms)?,
        )?;
        Ok(Arc::new(GroupConsumer {
            c: OffThreadDrop::new(c),
        }))
    }
}

/// See `Group::consume`. Its last reference is dropped on another thread
/// (the drop releases what it buffered: a write that may wait).
#[derive(Debug, uniffi::Object)]
pub struct GroupConsumer {
    c: OffThreadDrop<honker::runtime::GroupConsumer>,
}

#[uniffi::export]
impl GroupConsumer {
    /// The next event, waiting up to `wait_ms`; `None` when the wait ran out
    /// or the consumer was closed.
    pub fn next(&self, wait_ms: u64) -> R<Option<GroupEvent>> {
        Ok(self.c.next(ms("wait", wait_ms)?)?.map(GroupEvent::from))
    }

    /// `next` that returns `None` at once when `cancel` is cancelled; the
    /// consumer stays open and loses nothing.
    pub fn next_cancellable(
        &self,
        wait_ms: u64,
        cancel: Arc<CancelToken>,
    ) -> R<Option<GroupEvent>> {
        let e = cancel.core().next(&*self.c, ms("wait", wait_ms)?)?;
        Ok(e.map(GroupEvent::from))
    }

    /// Stops: releases the events claimed and not handed out; returns how
    /// many.
    pub fn close(&self) -> u64 {
        self.c.close() as u64
    }

    pub fn is_closed(&self) -> bool {
        self.c.is_closed()
    }

    pub fn member(&self) -> String {
        self.c.member().to_owned()
    }
}
