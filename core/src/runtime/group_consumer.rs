//! [`GroupConsumer`]: a member of a consumer group as a stream of delivered
//! events.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::stream::group::{Group, GroupEvent};
use crate::validate;

/// Hands out a group member's events one at a time, claiming `batch` at
/// once and sleeping on the watcher until something is claimable.
/// Thread-safe: `close` may come from another thread while `next` waits.
/// The caller acks (or retries, fails, releases) each event through the
/// [`Group`]; at-least-once.
#[derive(Debug)]
pub struct GroupConsumer {
    group: Group,
    member: String,
    batch: usize,
    lease: Option<Duration>,
    buffer: Mutex<VecDeque<GroupEvent>>,
    closed: AtomicBool,
    /// The process that made it: in a forked copy the buffered events are
    /// the parent's.
    pid: u32,
}

impl GroupConsumer {
    /// `member` of `group`, claiming up to `batch` events at a time, leased
    /// for `lease` (the group's when `None`).
    pub fn new(
        group: &Group,
        member: &str,
        batch: usize,
        lease: Option<Duration>,
    ) -> Result<GroupConsumer> {
        validate::name("member", member)?;
        let batch = validate::batch_usize(batch)?;
        if let Some(l) = lease {
            crate::options::in_range(
                "lease",
                l,
                Duration::from_millis(1),
                crate::stream::group::MAX_LEASE,
            )?;
        }
        Ok(GroupConsumer {
            group: group.clone(),
            member: member.to_owned(),
            batch,
            lease,
            buffer: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            pid: std::process::id(),
        })
    }

    /// The group.
    pub fn group(&self) -> &Group {
        &self.group
    }

    /// The member's name.
    pub fn member(&self) -> &str {
        &self.member
    }

    /// The next event: a buffered one, or the first of a new claim, waiting
    /// up to `wait` (with no wait, it claims only when a read-only check
    /// finds something claimable: polling an idle group takes no write
    /// lock). `None` when the wait ran out or the consumer was closed.
    /// `TRIMMED` (with the number missed) when the stream's age limit removed
    /// events before the group handled them; the next call goes on.
    pub fn next(&self, wait: Duration) -> Result<Option<GroupEvent>> {
        super::Reader::next_until(self, wait, &|| false)
    }

    /// Events claimed and not handed out yet.
    pub fn buffered(&self) -> usize {
        self.buffer.lock().len()
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Stops the stream: releases the events claimed but not handed out
    /// (their deliveries not counted) and wakes a waiting `next`, which
    /// returns `None`. Returns how many were released. Idempotent. In a
    /// forked copy it only stops the stream.
    pub fn close(&self) -> usize {
        self.closed.store(true, Ordering::SeqCst);
        if self.pid != std::process::id() {
            return 0;
        }
        self.group.stream().database().poke();
        let events: Vec<GroupEvent> = self.buffer.lock().drain(..).collect();
        release_all(&self.group, events)
    }
}

impl super::Reader for GroupConsumer {
    fn next_until(&self, wait: Duration, stop: &dyn Fn() -> bool) -> Result<Option<GroupEvent>> {
        if self.is_closed() {
            return Ok(None);
        }
        if let Some(e) = self.buffer.lock().pop_front() {
            return Ok(Some(e));
        }
        let got = if wait.is_zero() {
            self.group
                .claim_ready(&self.member, self.batch, self.lease)?
        } else {
            let stop = || self.is_closed() || stop();
            self.group
                .claim_until(&self.member, self.batch, self.lease, wait, &stop)?
        };
        let mut buffer = self.buffer.lock();
        if self.is_closed() {
            drop(buffer);
            release_all(&self.group, got.events);
            return Ok(None);
        }
        buffer.extend(got.events);
        if got.missed > 0 {
            let resumes = buffer.front().map_or(0, |e| e.offset);
            return Err(Error::trimmed(
                &format!(
                    "group {:?} of stream {:?}",
                    self.group.name(),
                    self.group.stream().name()
                ),
                got.missed,
                resumes,
            ));
        }
        Ok(buffer.pop_front())
    }

    fn is_closed(&self) -> bool {
        GroupConsumer::is_closed(self)
    }
}

/// A host's wait that holds no thread: the look is the group's
/// [`due_in`](Group::due_in) (now while something is buffered), the take
/// `next(ZERO)`.
impl crate::Source for GroupConsumer {
    type Item = GroupEvent;

    fn look(&self) -> Result<Option<Duration>> {
        if self.is_closed() || self.buffered() > 0 {
            return Ok(Some(Duration::ZERO));
        }
        self.group.due_in()
    }

    fn take(&self) -> Result<Option<GroupEvent>> {
        self.next(Duration::ZERO)
    }
}

impl Drop for GroupConsumer {
    fn drop(&mut self) {
        self.close();
    }
}

impl super::QuickDrop for GroupConsumer {
    /// Closed: its buffer is given back already.
    fn drops_quickly(&self) -> bool {
        self.is_closed()
    }
}

fn release_all(group: &Group, events: Vec<GroupEvent>) -> usize {
    // A release that fails (lapsed and reclaimed, or the database is gone)
    // leaves that event to its lease.
    events
        .into_iter()
        .filter(|e| group.release(e).is_ok())
        .count()
}
