//! [`Subscription`]: an independent consumer of a stream, as a sequence of
//! events that sleeps until another process (or thread) publishes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::stream::{Event, Start, Stream};
use crate::transaction::Transaction;
use crate::validate;

/// When a subscription commits its place on its own (at-least-once: after a
/// crash, up to `every` events, or `interval`'s worth, are read again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoCommit {
    /// Commit after this many events were handed out and passed (default
    /// 1,000; 1 to 10,000).
    pub every: usize,
    /// ... or when this long passed since the last commit (default 1 s; up to
    /// 1 hour).
    pub interval: Duration,
}

impl Default for AutoCommit {
    fn default() -> AutoCommit {
        AutoCommit {
            every: 1000,
            interval: Duration::from_secs(1),
        }
    }
}

#[derive(Debug)]
struct State {
    /// The next offset to read from the stream.
    read_from: i64,
    /// One past the last event handed out (passed once `next` is called again).
    handed: Option<i64>,
    /// One past the last event passed: what auto-commit commits.
    passed: i64,
    /// The consumer's committed next offset, as this subscription knows it.
    committed: i64,
    buffer: VecDeque<Event>,
    since_commit: usize,
    last_commit: Instant,
}

/// Hands out a stream's events to one consumer in offset order, each once,
/// from its committed place. An event counts as processed when `next` is
/// called again (or on [`commit`](Self::commit)); with auto-commit the place
/// is committed every N events or T seconds and on [`close`](Self::close).
/// Without it, commit explicitly — inside your transaction with
/// [`commit_tx`](Self::commit_tx) to make a local projection effectively
/// exactly-once. Thread-safe: `close` may come from another thread while
/// `next` waits.
#[derive(Debug)]
pub struct Subscription {
    stream: Stream,
    consumer: String,
    batch: usize,
    auto: Option<AutoCommit>,
    state: Mutex<State>,
    closed: AtomicBool,
}

impl Subscription {
    /// Subscribes `consumer` to `stream`: from its committed offset, or from
    /// `start` if it has none (stored at once, so a consumer killed before
    /// its first commit resumes there). Reads `batch` events at a time.
    pub fn new(
        stream: &Stream,
        consumer: &str,
        start: Start,
        batch: usize,
        auto: Option<AutoCommit>,
    ) -> Result<Subscription> {
        let batch = validate::batch_usize(batch)?;
        if let Some(a) = auto {
            validate::batch_usize(a.every)?;
            crate::options::in_range(
                "auto-commit interval",
                a.interval,
                Duration::from_millis(1),
                Duration::from_secs(3600),
            )?;
        }
        let next = stream.start(consumer, start)?;
        Ok(Subscription {
            stream: stream.clone(),
            consumer: consumer.to_owned(),
            batch,
            auto,
            state: Mutex::new(State {
                read_from: next,
                handed: None,
                passed: next,
                committed: next,
                buffer: VecDeque::new(),
                since_commit: 0,
                last_commit: Instant::now(),
            }),
            closed: AtomicBool::new(false),
        })
    }

    /// The consumer's name.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The next event, waiting up to `wait` for one to be published. `None`
    /// when the wait ran out or the subscription was closed.
    ///
    /// If retention removed events this consumer had not read (the stream's
    /// age limit), this call fails once with `TRIMMED` and
    /// [`Error::missed`] set to how many; the next call goes on from the
    /// oldest retained event.
    pub fn next(&self, wait: Duration) -> Result<Option<Event>> {
        super::Reader::next_until(self, wait, &|| false)
    }

    /// One read into the buffer when it is empty, then the next buffered
    /// event, marked as handed out.
    fn take_buffered(&self) -> Result<Option<Event>> {
        let mut s = self.state.lock();
        while s.buffer.is_empty() {
            let expected = s.read_from;
            let events = self.stream.read(expected - 1, self.batch)?;
            // Offsets are dense: a gap before the first event read, or
            // nothing to read below the last offset, means retention
            // removed events this consumer had not read.
            let resume = match events.first() {
                Some(e) => e.offset,
                None => match self.stream.head_from(expected)? {
                    // Published since the read: read it now.
                    (_, Some(_)) => continue,
                    (last, None) => (last + 1).max(expected),
                },
            };
            s.read_from = events.last().map_or(resume, |e| e.offset + 1);
            s.buffer.extend(events);
            if resume > expected {
                // The missed events will never be read: they count as
                // passed, and the next commit moves past them.
                s.passed = s.passed.max(resume);
                return Err(Error::trimmed(
                    &format!(
                        "stream {:?}, consumer {:?}",
                        self.stream.name(),
                        self.consumer
                    ),
                    (resume - expected) as u64,
                    resume,
                ));
            }
            break;
        }
        Ok(s.buffer
            .pop_front()
            .inspect(|e| s.handed = Some(e.offset + 1)))
    }

    /// Commits the place after the last event passed, if auto-commit says it
    /// is due (or `force`).
    fn auto_commit(&self, s: &mut State, force: bool) -> Result<()> {
        let Some(a) = self.auto else { return Ok(()) };
        let due = force || s.since_commit >= a.every || s.last_commit.elapsed() >= a.interval;
        if due && s.passed > s.committed {
            s.committed = self.stream.commit(&self.consumer, s.passed)?;
            s.since_commit = 0;
            s.last_commit = Instant::now();
        }
        Ok(())
    }

    /// Commits the place after `event` (it and everything before it are
    /// processed).
    pub fn commit(&self, event: &Event) -> Result<()> {
        self.commit_in(None, event)
    }

    /// [`commit`](Self::commit) inside the caller's transaction: the offset
    /// and the caller's writes commit or roll back together.
    pub fn commit_tx(&self, tx: &Transaction, event: &Event) -> Result<()> {
        self.commit_in(Some(tx), event)
    }

    fn commit_in(&self, tx: Option<&Transaction>, event: &Event) -> Result<()> {
        self.commit_offset(tx, event.offset)
    }

    /// Commits the place after the event at `offset` (inside `tx` if given):
    /// for hosts that hand events across as records and keep only offsets.
    pub fn commit_offset(&self, tx: Option<&Transaction>, offset: i64) -> Result<()> {
        let next = self.stream.commit_in(tx, &self.consumer, offset + 1)?;
        let mut s = self.state.lock();
        if tx.is_none() {
            s.committed = s.committed.max(next);
        }
        Ok(())
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Stops the subscription: with auto-commit, commits the place after the
    /// last event passed (the one handed out last counts as processed only
    /// if `next` was called again), and wakes a waiting `next`. Idempotent.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.stream.database().poke();
        let mut s = self.state.lock();
        self.auto_commit(&mut s, true).map_err(|e| {
            Error::new(
                e.kind(),
                format!("closing the subscription: {}", e.message()),
            )
        })
    }
}

impl super::Reader for Subscription {
    fn next_until(&self, wait: Duration, stop: &dyn Fn() -> bool) -> Result<Option<Event>> {
        {
            let mut s = self.state.lock();
            // The event handed out last is processed: the caller came back.
            if let Some(h) = s.handed.take() {
                s.passed = h;
                s.since_commit += 1;
                self.auto_commit(&mut s, false)?;
            }
        }
        let stop = || self.is_closed() || stop();
        let db = self.stream.database();
        let reads = crate::Reads(|| self.take_buffered());
        db.inner.wait_for(&reads, wait, &stop, "Subscription::next")
    }

    fn is_closed(&self) -> bool {
        Subscription::is_closed(self)
    }
}

/// A host's wait that holds no thread: each look says "now" (a take is
/// one read when nothing is buffered), the take `next(ZERO)`.
impl crate::Source for Subscription {
    type Item = Event;

    fn look(&self) -> Result<Option<Duration>> {
        Ok(Some(Duration::ZERO))
    }

    fn take(&self) -> Result<Option<Event>> {
        self.next(Duration::ZERO)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl super::QuickDrop for Subscription {
    /// Closed: its place is committed already.
    fn drops_quickly(&self) -> bool {
        self.is_closed()
    }
}

impl crate::stream::Stream {
    /// An independent consumer of this stream: from `consumer`'s committed
    /// offset, or `start` if it has none; 100 events per read, auto-commit
    /// every 1,000 events or 1 s (at-least-once). See
    /// [`Subscription`](Subscription).
    pub fn subscribe(&self, consumer: &str, start: crate::stream::Start) -> Result<Subscription> {
        Subscription::new(self, consumer, start, 100, Some(AutoCommit::default()))
    }
}
