//! Streams and channels for Swift (`honker::stream`, `honker::channel`,
//! `honker::runtime::{Subscription, Listener}`), with durations in
//! milliseconds and an optional transaction. The idiomatic layer
//! (`Sources/Honker/Stream.swift`) runs every call off the caller's thread
//! and turns `next` into an `AsyncSequence` that ends on Task cancellation.

use std::sync::Arc;

use honker::runtime::OffThreadDrop;
use honker::stream::{Start, StreamRetention};

use crate::database::{in_tx, Database, Payload, Transaction};
use crate::errors::{ms, opt_ms, R};
use crate::queue::CancelToken;
use crate::records::{ConsumerInfo, Notification, PublishArgs, PublishManyArgs, StreamEvent};

/// Where a consumer with no committed offset starts.
#[derive(Debug, uniffi::Enum)]
pub enum StartPosition {
    Beginning,
    Latest,
    Offset {
        offset: i64,
    },
    /// The first event published at or after this time (ms since the epoch).
    Time {
        ms: i64,
    },
}

#[derive(Debug, uniffi::Record)]
pub struct AutoCommitOptions {
    pub every: u32,
    pub interval_ms: u64,
}

#[derive(Debug, uniffi::Record)]
pub struct StreamInfo {
    pub length: i64,
    pub first_offset: Option<i64>,
    pub last_offset: i64,
    pub consumers: Vec<ConsumerInfo>,
    pub groups: Vec<crate::group::GroupInfoRecord>,
}

#[derive(Debug, uniffi::Record)]
pub struct StreamRetentionRecord {
    pub max_age_ms: Option<u64>,
    pub max_count: Option<u64>,
    pub trim_passed: bool,
}

#[derive(Debug, uniffi::Record)]
pub struct ChannelRetentionRecord {
    pub max_age_ms: u64,
    pub max_count: u64,
}

pub(crate) fn start(start: StartPosition) -> Start {
    match start {
        StartPosition::Beginning => Start::Beginning,
        StartPosition::Latest => Start::Latest,
        StartPosition::Offset { offset } => Start::Offset(offset),
        StartPosition::Time { ms } => Start::Time(ms),
    }
}

/// A handle on one stream.
#[derive(Debug, uniffi::Object)]
pub struct Stream {
    s: honker::stream::Stream,
}

impl Stream {
    pub(crate) fn core(&self) -> &honker::stream::Stream {
        &self.s
    }
}

#[uniffi::export]
impl Stream {
    pub fn name(&self) -> String {
        self.s.name().to_owned()
    }

    /// Appends one event; returns its offset.
    pub fn publish(
        &self,
        payload: Payload,
        options: PublishArgs,
        tx: Option<Arc<Transaction>>,
    ) -> R<i64> {
        let o = options.to_core()?;
        let payload: honker::Payload = payload.into();
        in_tx(&tx, |t| match t {
            Some(t) => self.s.publish_tx(t, payload, &o),
            None => self.s.publish(payload, &o),
        })
    }

    /// Appends events in one transaction; returns their offsets.
    pub fn publish_many(
        &self,
        payloads: Vec<Payload>,
        options: PublishManyArgs,
        tx: Option<Arc<Transaction>>,
    ) -> R<Vec<i64>> {
        let payloads: Vec<honker::Payload> = payloads.into_iter().map(Into::into).collect();
        let o = options.to_core()?;
        in_tx(&tx, |t| self.s.publish_many_with(t, payloads, &o))
    }

    /// Up to `limit` events with offsets above `after`.
    pub fn read(&self, after: i64, limit: u32) -> R<Vec<StreamEvent>> {
        let events = self.s.read(after, limit as usize)?;
        Ok(events.into_iter().map(StreamEvent::from).collect())
    }

    /// Commits `next_offset` for `consumer` (never back); returns its next
    /// offset.
    pub fn commit(
        &self,
        consumer: String,
        next_offset: i64,
        tx: Option<Arc<Transaction>>,
    ) -> R<i64> {
        in_tx(&tx, |t| match t {
            Some(t) => self.s.commit_tx(t, &consumer, next_offset),
            None => self.s.commit(&consumer, next_offset),
        })
    }

    pub fn seek(&self, consumer: String, next_offset: i64) -> R<()> {
        Ok(self.s.seek(&consumer, next_offset)?)
    }

    pub fn position(&self, consumer: String) -> R<Option<i64>> {
        Ok(self.s.position(&consumer)?)
    }

    pub fn info(&self) -> R<StreamInfo> {
        let i = self.s.info()?;
        Ok(StreamInfo {
            length: i.length,
            first_offset: i.first_offset,
            last_offset: i.last_offset,
            consumers: i.consumers.into_iter().map(ConsumerInfo::from).collect(),
            groups: i.groups.into_iter().map(Into::into).collect(),
        })
    }

    pub fn retention(&self) -> R<StreamRetentionRecord> {
        let r = self.s.retention()?;
        Ok(StreamRetentionRecord {
            max_age_ms: r.max_age.map(|d| d.as_millis() as u64),
            max_count: r.max_count,
            trim_passed: r.trim_passed,
        })
    }

    pub fn set_retention(&self, retention: StreamRetentionRecord) -> R<()> {
        let r = StreamRetention {
            max_age: opt_ms("maxAge", retention.max_age_ms)?,
            max_count: retention.max_count,
            trim_passed: retention.trim_passed,
        };
        Ok(self.s.set_retention(&r)?)
    }

    /// Applies the retention now; returns how many events went.
    pub fn trim(&self) -> R<u64> {
        Ok(self.s.trim()? as u64)
    }

    /// An independent consumer from its committed offset, or `start` if it
    /// has none (stored at once); `auto_commit` none commits only when told.
    pub fn subscribe(
        &self,
        consumer: String,
        start: StartPosition,
        batch: u32,
        auto_commit: Option<AutoCommitOptions>,
    ) -> R<Arc<Subscription>> {
        let start = self::start(start);
        let auto = match auto_commit {
            Some(a) => Some(honker::runtime::AutoCommit {
                every: a.every as usize,
                interval: ms("commitInterval", a.interval_ms)?,
            }),
            None => None,
        };
        let sub =
            honker::runtime::Subscription::new(&self.s, &consumer, start, batch as usize, auto)?;
        Ok(Arc::new(Subscription {
            s: OffThreadDrop::new(sub),
        }))
    }
}

/// See `Stream::subscribe`. Its last reference is dropped on another
/// thread (the drop commits: a write that may wait for the writer).
#[derive(Debug, uniffi::Object)]
pub struct Subscription {
    s: OffThreadDrop<honker::runtime::Subscription>,
}

#[uniffi::export]
impl Subscription {
    /// The next event, waiting up to `wait_ms`; `None` when the wait ran out
    /// or the subscription was closed. `Trimmed` (once, with `missed`) when
    /// retention removed events it had not read.
    pub fn next(&self, wait_ms: u64) -> R<Option<StreamEvent>> {
        Ok(self.s.next(ms("wait", wait_ms)?)?.map(StreamEvent::from))
    }

    /// `next` that returns `None` at once when `cancel` is cancelled (Swift's
    /// task cancellation); the subscription stays open and loses nothing.
    pub fn next_cancellable(
        &self,
        wait_ms: u64,
        cancel: Arc<CancelToken>,
    ) -> R<Option<StreamEvent>> {
        let e = cancel.core().next(&*self.s, ms("wait", wait_ms)?)?;
        Ok(e.map(StreamEvent::from))
    }

    /// Commits the place after the event at `offset`.
    pub fn commit(&self, offset: i64, tx: Option<Arc<Transaction>>) -> R<()> {
        in_tx(&tx, |t| self.s.commit_offset(t, offset))
    }

    /// Stops: with auto-commit, commits the place after the last event
    /// passed, and wakes a waiting `next`.
    pub fn close(&self) -> R<()> {
        Ok(self.s.close()?)
    }

    pub fn is_closed(&self) -> bool {
        self.s.is_closed()
    }

    pub fn consumer(&self) -> String {
        self.s.consumer().to_owned()
    }
}

/// See `Database::listen`.
#[derive(Debug, uniffi::Object)]
pub struct Listener {
    l: OffThreadDrop<honker::runtime::Listener>,
}

#[uniffi::export]
impl Listener {
    /// The next notification, waiting up to `wait_ms`; `None` when the wait
    /// ran out or the listener was closed. `Trimmed` (once, with `missed`)
    /// when the channel's window moved past notifications it had not read.
    pub fn next(&self, wait_ms: u64) -> R<Option<Notification>> {
        Ok(self.l.next(ms("wait", wait_ms)?)?.map(Notification::from))
    }

    /// `next` that returns `None` at once when `cancel` is cancelled.
    pub fn next_cancellable(
        &self,
        wait_ms: u64,
        cancel: Arc<CancelToken>,
    ) -> R<Option<Notification>> {
        let n = cancel.core().next(&*self.l, ms("wait", wait_ms)?)?;
        Ok(n.map(Notification::from))
    }

    /// Stops listening and wakes a waiting `next`.
    pub fn close(&self) {
        self.l.close();
    }

    pub fn is_closed(&self) -> bool {
        self.l.is_closed()
    }

    pub fn channel(&self) -> String {
        self.l.channel().to_owned()
    }
}

#[uniffi::export]
impl Database {
    /// A handle on a stream (writes nothing).
    pub fn stream(&self, name: String) -> R<Arc<Stream>> {
        Ok(Arc::new(Stream {
            s: self.core().stream(&name)?,
        }))
    }

    /// Sends a notification (after commit, with `tx`); returns its id.
    pub fn notify(
        &self,
        channel: String,
        payload: Payload,
        tx: Option<Arc<Transaction>>,
    ) -> R<i64> {
        let payload: honker::Payload = payload.into();
        in_tx(&tx, |t| match t {
            Some(t) => self.core().notify_tx(t, &channel, payload),
            None => self.core().notify(&channel, payload),
        })
    }

    /// Starts listening on `channel` now.
    pub fn listen(&self, channel: String) -> R<Arc<Listener>> {
        Ok(Arc::new(Listener {
            l: OffThreadDrop::new(self.core().listen(&channel)?),
        }))
    }

    /// The channel's window; with `set`, sets it first (for every process).
    pub fn channel_retention(
        &self,
        channel: String,
        set: Option<ChannelRetentionRecord>,
    ) -> R<ChannelRetentionRecord> {
        let ch = self.core().channel(&channel)?;
        if let Some(w) = set {
            ch.set_retention(&honker::channel::ChannelRetention {
                max_age: ms("maxAge", w.max_age_ms)?,
                max_count: w.max_count,
            })?;
        }
        let r = ch.retention()?;
        Ok(ChannelRetentionRecord {
            max_age_ms: r.max_age.as_millis() as u64,
            max_count: r.max_count,
        })
    }
}
