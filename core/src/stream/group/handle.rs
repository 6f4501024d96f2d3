//! The [`Group`] handle (`stream.group(name)`): each verb validates, then
//! runs `ops` in a write transaction (its own or the caller's) or on a
//! reader.

use std::sync::Arc;
use std::time::Duration;

use super::ops;
use super::{DeadEvent, Delivered, GroupClaim, GroupInfo, GroupOptions};
use crate::clock::duration_ms;
use crate::error::Result;
use crate::stream::{Start, Stream};
use crate::transaction::Transaction;
use crate::validate;

impl Stream {
    /// A handle on the consumer group `name` of this stream. Creating the
    /// handle writes nothing; [`Group::create`] makes the group.
    pub fn group(&self, name: &str) -> Result<Group> {
        validate::name("group", name)?;
        Ok(Group {
            stream: self.clone(),
            name: name.into(),
        })
    }
}

/// A handle on one consumer group. Cheap to clone, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Group {
    stream: Stream,
    name: Arc<str>,
}

fn lease_ms(lease: Option<Duration>) -> Result<Option<i64>> {
    lease
        .map(|l| {
            crate::options::in_range("lease", l, Duration::from_millis(1), super::MAX_LEASE)?;
            Ok(duration_ms(l))
        })
        .transpose()
}

impl Group {
    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stream it reads.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    fn write<R>(
        &self,
        tx: Option<&Transaction>,
        f: impl FnOnce(crate::raw::Conn<'_>, &str, &str, i64) -> Result<R>,
    ) -> Result<R> {
        let (s, g) = (self.stream.name(), &*self.name);
        self.stream
            .database()
            .inner
            .write(tx, |conn, now| f(conn.raw(), s, g, now))
    }

    /// Creates the group, starting at `start` (resolved now: `Latest` is
    /// the next event published). Registering again is idempotent: an
    /// existing group keeps its position and takes `options`. Returns its
    /// next offset.
    pub fn create(&self, start: Start, options: &GroupOptions) -> Result<i64> {
        options.validate()?;
        self.write(None, |c, s, g, now| {
            ops::create(c, s, g, start, options, now)
        })
    }

    /// Deletes the group with its pending events, dead letters and members.
    /// Returns whether it existed.
    pub fn delete(&self) -> Result<bool> {
        self.write(None, |c, s, g, _| ops::drop_group(c, s, g))
    }

    /// Up to `n` events for `member` (1 to 10,000), leased for `lease` (the
    /// group's when `None`). Events waiting in the group (lapsed, released,
    /// or whose key came free) come first, oldest idle first; then new ones.
    /// Never waits: empty when nothing is claimable. Takes in events waiting
    /// behind a busy key in bounded transactions, so it returns nothing only
    /// when nothing is claimable.
    pub fn claim(&self, member: &str, n: usize, lease: Option<Duration>) -> Result<GroupClaim> {
        let mut all = GroupClaim::default();
        loop {
            let c = self.claim_in(None, member, n - all.events.len(), lease)?;
            all.events.extend(c.events);
            all.missed += c.missed;
            if !c.more || all.events.len() >= n {
                return Ok(all);
            }
        }
    }

    /// [`claim`](Self::claim), waiting up to `wait` for something to claim:
    /// it sleeps on the process's watcher (a commit by any process wakes
    /// it) and re-checks read-only before taking the write lock. Empty when
    /// the wait ran out.
    pub fn claim_wait(
        &self,
        member: &str,
        n: usize,
        lease: Option<Duration>,
        wait: Duration,
    ) -> Result<GroupClaim> {
        self.claim_until(member, n, lease, wait, &|| false)
    }

    /// [`claim_wait`](Self::claim_wait) that also returns (empty) once
    /// `stop` says so, checked on each wake-up.
    pub(crate) fn claim_until(
        &self,
        member: &str,
        n: usize,
        lease: Option<Duration>,
        wait: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<GroupClaim> {
        validate::name("member", member)?;
        validate::batch_usize(n)?;
        lease_ms(lease)?;
        validate::delay("wait", wait)?;
        if wait.is_zero() {
            return self.claim(member, n, lease); // `more` with no events too
        }
        let claim = Claim {
            group: self,
            member,
            n,
            lease,
        };
        let db = self.stream.database();
        let got = db
            .inner
            .wait_for(&claim, wait, stop, "a claim with a wait")?;
        Ok(got.unwrap_or_default())
    }

    /// When a claim could hand something out, found with one read and no
    /// waiting: `Some(ZERO)` now, `Some(d)` in `d` (a lease lapses, a key
    /// comes free), `None` when only a commit can bring something. An event
    /// loop's wait, as [`Claimer::due_in`](crate::runtime::Claimer::due_in)'s.
    pub fn due_in(&self) -> Result<Option<Duration>> {
        let (probe, now) = self.probe_now()?;
        Ok(match probe {
            ops::Probe::Claimable => Some(Duration::ZERO),
            ops::Probe::NextAt(t) => t.map(|t| crate::clock::look_again_in(t, now)),
        })
    }

    /// The read-only check a waiting claim makes: whether this group has
    /// something claimable now, else when it will (its clock's now too).
    pub(crate) fn probe_now(&self) -> Result<(ops::Probe, i64)> {
        let db = self.stream.database();
        let now = db.inner.now();
        let reader = db.inner.reader()?;
        Ok((
            ops::probe(reader.raw(), self.stream.name(), &self.name, now)?,
            now,
        ))
    }

    /// [`claim`](Self::claim) only when a read-only check finds something
    /// claimable (a consumer's poll without waiting: an idle member never
    /// takes the write lock).
    pub(crate) fn claim_ready(
        &self,
        member: &str,
        n: usize,
        lease: Option<Duration>,
    ) -> Result<GroupClaim> {
        match self.probe_now()?.0 {
            ops::Probe::Claimable => self.claim(member, n, lease),
            ops::Probe::NextAt(_) => Ok(GroupClaim::default()),
        }
    }

    /// [`claim`](Self::claim) inside the caller's transaction: the claim
    /// commits with it. One bounded step: `more` says to claim again.
    pub fn claim_tx(
        &self,
        tx: &Transaction,
        member: &str,
        n: usize,
        lease: Option<Duration>,
    ) -> Result<GroupClaim> {
        self.claim_in(Some(tx), member, n, lease)
    }

    pub(crate) fn claim_in(
        &self,
        tx: Option<&Transaction>,
        member: &str,
        n: usize,
        lease: Option<Duration>,
    ) -> Result<GroupClaim> {
        validate::name("member", member)?;
        let n = validate::batch_usize(n)?;
        let lease = lease_ms(lease)?;
        self.write(tx, |c, s, g, now| {
            ops::claim(c, s, g, member, n, lease, now)
        })
    }

    /// Acks a delivered event: the group is done with it, and the next
    /// event of its key gets its turn. A stale token is `LEASE_LOST`.
    pub fn ack(&self, event: &impl Delivered) -> Result<()> {
        self.ack_in(None, event)
    }

    /// [`ack`](Self::ack) inside the caller's transaction: the event's
    /// effect and its ack commit together.
    pub fn ack_tx(&self, tx: &Transaction, event: &impl Delivered) -> Result<()> {
        self.ack_in(Some(tx), event)
    }

    /// Acks several delivered events in one transaction; all or none (a
    /// stale token anywhere is `LEASE_LOST` and acks nothing).
    pub fn ack_many<D: Delivered>(&self, events: &[D]) -> Result<()> {
        validate::batch_usize(events.len().max(1))?;
        self.write(None, |c, s, g, now| {
            for e in events {
                ops::ack(c, s, g, e.offset(), e.token(), now)?;
            }
            Ok(())
        })
    }

    /// The form of [`ack`](Self::ack) that runtimes call: inside `tx` when
    /// one is given.
    pub fn ack_in(&self, tx: Option<&Transaction>, event: &impl Delivered) -> Result<()> {
        let (offset, token) = (event.offset(), event.token());
        self.write(tx, |c, s, g, now| ops::ack(c, s, g, offset, token, now))
    }

    /// A failed delivery: claimable again after `delay` (at once when
    /// `None`), recording `error`; dead once its deliveries are spent.
    /// Returns whether it died.
    pub fn retry(
        &self,
        event: &impl Delivered,
        delay: Option<Duration>,
        error: Option<&str>,
    ) -> Result<bool> {
        self.retry_in(None, event, delay, error)
    }

    /// [`retry`](Self::retry), inside `tx` when one is given.
    pub fn retry_in(
        &self,
        tx: Option<&Transaction>,
        event: &impl Delivered,
        delay: Option<Duration>,
        error: Option<&str>,
    ) -> Result<bool> {
        let delay = match delay {
            Some(d) => validate::delay("retry delay", d)?,
            None => 0,
        };
        self.write(tx, |c, s, g, now| {
            ops::retry(
                c,
                s,
                g,
                (event.offset(), event.token()),
                (delay, error),
                now,
            )
        })
    }

    /// Sends a delivered event to the dead letters now, with `error`.
    pub fn fail(&self, event: &impl Delivered, error: &str) -> Result<()> {
        self.fail_in(None, event, error)
    }

    /// [`fail`](Self::fail), inside `tx` when one is given.
    pub fn fail_in(
        &self,
        tx: Option<&Transaction>,
        event: &impl Delivered,
        error: &str,
    ) -> Result<()> {
        self.write(tx, |c, s, g, now| {
            ops::fail(c, s, g, event.offset(), event.token(), error, now)
        })
    }

    /// Gives a delivered event back, claimable at once, its delivery not
    /// counted.
    pub fn release(&self, event: &impl Delivered) -> Result<()> {
        self.release_in(None, event)
    }

    /// [`release`](Self::release), inside `tx` when one is given.
    pub fn release_in(&self, tx: Option<&Transaction>, event: &impl Delivered) -> Result<()> {
        self.write(tx, |c, s, g, now| {
            ops::release(c, s, g, event.offset(), event.token(), now)
        })
    }

    /// Extends the lease to now + `extend` (the group's lease when `None`);
    /// returns its new end (ms).
    pub fn heartbeat(&self, event: &impl Delivered, extend: Option<Duration>) -> Result<i64> {
        let extend = lease_ms(extend)?;
        self.write(None, |c, s, g, now| {
            let ms = match extend {
                Some(ms) => ms,
                None => duration_ms(ops::get(c, s, g)?.options.lease),
            };
            ops::heartbeat(c, s, g, event.offset(), event.token(), ms, now)
        })
    }

    /// Removes `member`. One that holds events is `INVALID_ARGUMENT` unless
    /// `force`, and then its events are claimable at once. Returns how many
    /// it held.
    pub fn remove_member(&self, member: &str, force: bool) -> Result<i64> {
        validate::name("member", member)?;
        self.write(None, |c, s, g, now| {
            ops::remove_member(c, s, g, member, force, now)
        })
    }

    /// Up to `limit` dead letters with offsets above `after`, in order.
    pub fn dead(&self, after: i64, limit: usize) -> Result<Vec<DeadEvent>> {
        let limit = validate::batch_usize(limit)?;
        let reader = self.stream.database().inner.reader()?;
        ops::dead(reader.raw(), self.stream.name(), &self.name, after, limit)
    }

    /// Re-drives the dead letter at `offset` (`NOT_FOUND` if it is not one).
    pub fn redrive(&self, offset: i64) -> Result<()> {
        self.write(None, |c, s, g, now| ops::redrive(c, s, g, offset, now))
    }

    /// Re-drives every dead letter, in batches; returns how many.
    pub fn redrive_all(&self) -> Result<usize> {
        let mut total = 0;
        loop {
            let n = self.write(None, |c, s, g, now| {
                ops::redrive_all(c, s, g, crate::database::BATCH, now)
            })?;
            total += n;
            if n < crate::database::BATCH {
                return Ok(total);
            }
        }
    }

    /// Position, lag, pending and dead counts, oldest pending age, members.
    pub fn info(&self) -> Result<GroupInfo> {
        let db = self.stream.database();
        let now = db.inner.now();
        let reader = db.inner.reader()?;
        ops::info(reader.raw(), self.stream.name(), &self.name, now)
    }
}

/// A group claim with a wait, as the wait sees it: a look is
/// [`Group::due_in`], a take the claim (`None` when it got nothing).
struct Claim<'a> {
    group: &'a Group,
    member: &'a str,
    n: usize,
    lease: Option<Duration>,
}

impl crate::Source for Claim<'_> {
    type Item = GroupClaim;

    fn look(&self) -> Result<Option<Duration>> {
        self.group.due_in()
    }

    fn take(&self) -> Result<Option<GroupClaim>> {
        let got = self.group.claim(self.member, self.n, self.lease)?;
        Ok((!got.events.is_empty() || got.missed > 0).then_some(got))
    }
}
