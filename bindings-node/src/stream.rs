//! Streams and channels for Node (`honker::stream`, `honker::channel`,
//! `honker::runtime::{Subscription, Listener}`): every verb once as an
//! operation, exported async and `try*` (errors.rs's `verbs!`); a
//! subscription's and a listener's waits run on tokio's blocking pool, and
//! their last reference is dropped there (a subscription's drop commits).

use std::sync::Arc;

use honker::runtime::OffThreadDrop;
use honker::stream::{Start, StreamRetention};
use napi_derive::napi;

use crate::database::{with_tx, Database, Txs};
use napi::bindgen_prelude::AsyncBlock;
use napi::Env;

use crate::errors::{invalid, ms, now, out, pending, verbs, Op, Out};
use crate::records::{
    numbers, payload_in, payloads_in, ConsumerInfo, Notification, PayloadIo, Payloads, PublishArgs,
    PublishManyArgs, StreamEvent,
};
use napi::bindgen_prelude::Float64Array;

/// Where a consumer with no committed offset starts: `kind` is
/// "beginning", "latest", "offset" (`at`: the offset) or "time" (`at`: ms
/// since the Unix epoch).
#[napi(object)]
pub struct StartArg {
    pub kind: String,
    pub at: Option<i64>,
}

#[napi(object)]
pub struct AutoCommitArg {
    /// Commit after this many events passed.
    pub every: u32,
    /// ... or this many ms after the last commit.
    pub interval: f64,
}

#[napi(object)]
pub struct StreamInfo {
    pub length: i64,
    pub first_offset: Option<i64>,
    pub last_offset: i64,
    pub consumers: Vec<ConsumerInfo>,
    pub groups: Vec<crate::group::GroupInfo>,
}

/// A stream's retention; `maxAge` in ms.
#[napi(object)]
pub struct Retention {
    pub max_age: Option<f64>,
    pub max_count: Option<i64>,
    pub trim_passed: bool,
}

/// A channel's window; `maxAge` in ms.
#[napi(object)]
pub struct ChannelWindow {
    pub max_age: f64,
    pub max_count: i64,
}

pub(crate) fn start(s: StartArg) -> honker::Result<Start> {
    match (s.kind.as_str(), s.at) {
        ("beginning", None) => Ok(Start::Beginning),
        ("latest", None) => Ok(Start::Latest),
        ("offset", Some(n)) => Ok(Start::Offset(n)),
        ("time", Some(t)) => Ok(Start::Time(t)),
        (k, _) => Err(invalid(format!(
            "start must be 'beginning', 'latest', an offset or a Date, got {k:?}"
        ))),
    }
}

/// A handle on one stream.
#[napi]
pub struct Stream {
    s: honker::stream::Stream,
    txs: Arc<Txs>,
}

impl Stream {
    fn parts(&self) -> (honker::stream::Stream, Arc<Txs>) {
        (self.s.clone(), Arc::clone(&self.txs))
    }

    fn publish_op(
        &self,
        payload: PayloadIo,
        options: Option<PublishArgs>,
        tx: Option<u32>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> Op<i64> {
        let (s, txs) = self.parts();
        let payload = payload_in(payload);
        Box::new(move || {
            let o = options
                .unwrap_or_default()
                .to_core_traced(traceparent.as_deref(), tracestate.as_deref())?;
            with_tx(&txs, tx, |t| match t {
                Some(t) => s.publish_tx(t, payload, &o),
                None => s.publish(payload, &o),
            })
        })
    }

    fn publish_many_op(
        &self,
        payloads: Payloads,
        options: Option<PublishManyArgs>,
        tx: Option<u32>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> Op<Float64Array> {
        let (s, txs) = self.parts();
        let payloads = payloads_in(payloads);
        Box::new(move || {
            let o = options
                .unwrap_or_default()
                .to_core_traced(traceparent.as_deref(), tracestate.as_deref())?;
            let offsets = with_tx(&txs, tx, |t| s.publish_many_with(t, payloads, &o))?;
            Ok(numbers(offsets))
        })
    }

    fn read_op(&self, after: i64, limit: u32) -> Op<Vec<StreamEvent>> {
        let s = self.s.clone();
        Box::new(move || {
            let events = s.read(after, limit as usize)?;
            Ok(events.into_iter().map(StreamEvent::from).collect())
        })
    }

    fn commit_op(&self, consumer: String, next_offset: i64, tx: Option<u32>) -> Op<i64> {
        let (s, txs) = self.parts();
        Box::new(move || {
            with_tx(&txs, tx, |t| match t {
                Some(t) => s.commit_tx(t, &consumer, next_offset),
                None => s.commit(&consumer, next_offset),
            })
        })
    }

    fn seek_op(&self, consumer: String, next_offset: i64) -> Op<()> {
        let s = self.s.clone();
        Box::new(move || s.seek(&consumer, next_offset))
    }

    fn position_op(&self, consumer: String) -> Op<Option<i64>> {
        let s = self.s.clone();
        Box::new(move || s.position(&consumer))
    }

    fn info_op(&self) -> Op<StreamInfo> {
        let s = self.s.clone();
        Box::new(move || {
            let i = s.info()?;
            Ok(StreamInfo {
                length: i.length,
                first_offset: i.first_offset,
                last_offset: i.last_offset,
                consumers: i.consumers.into_iter().map(ConsumerInfo::from).collect(),
                groups: i
                    .groups
                    .into_iter()
                    .map(crate::group::GroupInfo::from)
                    .collect(),
            })
        })
    }

    fn retention_op(&self) -> Op<Retention> {
        let s = self.s.clone();
        Box::new(move || {
            let r = s.retention()?;
            Ok(Retention {
                max_age: r.max_age.map(|d| d.as_secs_f64() * 1000.0),
                max_count: r.max_count.map(|n| n as i64),
                trim_passed: r.trim_passed,
            })
        })
    }

    fn set_retention_op(
        &self,
        max_age: Option<f64>,
        max_count: Option<i64>,
        trim_passed: bool,
    ) -> Op<()> {
        let s = self.s.clone();
        Box::new(move || {
            let r = StreamRetention {
                max_age: max_age.map(|v| ms("maxAge", v)).transpose()?,
                max_count: max_count
                    .map(|n| honker::validate::count("maxCount", n))
                    .transpose()?,
                trim_passed,
            };
            s.set_retention(&r)
        })
    }
}

#[napi]
impl Stream {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.s.name().to_owned()
    }

    /// A handle on the consumer group `name` (writes nothing).
    #[napi]
    pub fn group(&self, name: String) -> Out<crate::group::Group> {
        out(self
            .s
            .group(&name)
            .map(|g| crate::group::Group::new(g, Arc::clone(&self.txs))))
    }

    /// Applies the retention now (in batches); resolves to how many events
    /// went.
    #[napi]
    pub fn trim(&self, env: Env) -> napi::Result<AsyncBlock<Out<i64>>> {
        let s = self.s.clone();
        pending(&env, Box::new(move || s.trim().map(|n| n as i64)))
    }

    /// An independent consumer from its committed offset, or `start` if it
    /// has none (stored at once); `autoCommit` null commits only when told.
    #[napi]
    pub fn subscribe(
        &self,
        env: Env,
        consumer: String,
        start: StartArg,
        batch: u32,
        auto_commit: Option<AutoCommitArg>,
    ) -> napi::Result<AsyncBlock<Out<Subscription>>> {
        let s = self.s.clone();
        let txs = Arc::clone(&self.txs);
        pending(
            &env,
            Box::new(move || {
                let auto = match auto_commit {
                    Some(a) => Some(honker::runtime::AutoCommit {
                        every: a.every as usize,
                        interval: ms("commitInterval", a.interval)?,
                    }),
                    None => None,
                };
                let sub = honker::runtime::Subscription::new(
                    &s,
                    &consumer,
                    self::start(start)?,
                    batch as usize,
                    auto,
                )?;
                Ok(Subscription {
                    db: s.database().clone(),
                    s: OffThreadDrop::new(sub),
                    txs,
                })
            }),
        )
    }
}

verbs! {
    impl Stream;
    #[doc = "Appends one event; resolves to its offset."]
    publish / try_publish (payload: PayloadIo, options: Option<PublishArgs>, tx: Option<u32>,
        traceparent: Option<String>, tracestate: Option<String>) -> i64 = publish_op;
    #[doc = "Appends events in one transaction: `payloads` as `convert.js`'s `packed` gives"]
    #[doc = "them; resolves to their offsets."]
    publish_many / try_publish_many (payloads: Payloads, options: Option<PublishManyArgs>, tx: Option<u32>,
        traceparent: Option<String>, tracestate: Option<String>) -> Float64Array = publish_many_op;
    #[doc = "Up to `limit` events with offsets above `after`."]
    read / try_read (after: i64, limit: u32) -> Vec<StreamEvent> = read_op;
    #[doc = "Commits `nextOffset` for `consumer` (never back); resolves to its next offset."]
    commit / try_commit (consumer: String, next_offset: i64, tx: Option<u32>) -> i64 = commit_op;
    seek / try_seek (consumer: String, next_offset: i64) -> () = seek_op;
    position / try_position (consumer: String) -> Option<i64> = position_op;
    info / try_info () -> StreamInfo = info_op;
    retention / try_retention () -> Retention = retention_op;
    set_retention / try_set_retention (max_age: Option<f64>, max_count: Option<i64>, trim_passed: bool)
        -> () = set_retention_op;
}

/// See `Stream.subscribe`.
#[napi]
pub struct Subscription {
    s: OffThreadDrop<honker::runtime::Subscription>,
    db: honker::Database,
    txs: Arc<Txs>,
}

impl Subscription {
    fn inner(&self) -> Arc<honker::runtime::Subscription> {
        self.s.shared()
    }

    fn commit_op(&self, offset: i64, tx: Option<u32>) -> Op<()> {
        let (s, txs) = (self.inner(), Arc::clone(&self.txs));
        Box::new(move || with_tx(&txs, tx, |t| s.commit_offset(t, offset)))
    }
}

verbs! {
    impl Subscription;
    #[doc = "Commits the place after the event at `offset`."]
    commit / try_commit (offset: i64, tx: Option<u32>) -> () = commit_op;
}

#[napi]
impl Subscription {
    /// The next event, waiting up to `wait` ms (holding no thread while it
    /// waits); null when the wait ran out or the subscription was closed.
    /// TRIMMED (once, with `missed`) when retention removed events it had
    /// not read.
    #[napi]
    pub async fn next(&self, wait: f64) -> napi::Result<Out<Option<StreamEvent>>> {
        let e = crate::waits::next(
            self.db.clone(),
            wait,
            self.inner(),
            honker::runtime::Subscription::is_closed,
        )
        .await;
        Ok(out(e.map(|e| e.map(StreamEvent::from))))
    }

    /// `next` without waiting (`wait` must be 0): `WOULD_WAIT` where it
    /// would.
    #[napi]
    pub fn try_next(&self, wait: f64) -> Out<Option<StreamEvent>> {
        let s = self.inner();
        now(move || Ok(s.next(ms("wait", wait)?)?.map(StreamEvent::from)))
    }

    /// Stops: with auto-commit, commits the place after the last event
    /// passed, and wakes a waiting `next`.
    #[napi]
    pub fn close(&self, env: Env) -> napi::Result<AsyncBlock<Out<()>>> {
        let s = self.inner();
        pending(&env, Box::new(move || s.close()))
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.s.is_closed()
    }

    #[napi(getter)]
    pub fn consumer(&self) -> String {
        self.s.consumer().to_owned()
    }
}

/// See `Database.listen`.
#[napi]
pub struct Listener {
    l: OffThreadDrop<honker::runtime::Listener>,
    db: honker::Database,
}

#[napi]
impl Listener {
    /// The next notification, waiting up to `wait` ms (holding no thread
    /// while it waits); null when the wait ran out or the listener was
    /// closed. TRIMMED (once, with `missed`) when the channel's window moved
    /// past notifications it had not read.
    #[napi]
    pub async fn next(&self, wait: f64) -> napi::Result<Out<Option<Notification>>> {
        let n = crate::waits::next(
            self.db.clone(),
            wait,
            self.l.shared(),
            honker::runtime::Listener::is_closed,
        )
        .await;
        Ok(out(n.map(|n| n.map(Notification::from))))
    }

    /// `next` without waiting (`wait` must be 0): `WOULD_WAIT` where it
    /// would.
    #[napi]
    pub fn try_next(&self, wait: f64) -> Out<Option<Notification>> {
        let l = self.l.shared();
        now(move || Ok(l.next(ms("wait", wait)?)?.map(Notification::from)))
    }

    /// Stops listening and wakes a waiting `next`.
    #[napi]
    pub fn close(&self) {
        self.l.close();
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.l.is_closed()
    }

    #[napi(getter)]
    pub fn channel(&self) -> String {
        self.l.channel().to_owned()
    }
}

impl Database {
    fn notify_op(&self, channel: String, payload: PayloadIo, tx: Option<u32>) -> Op<i64> {
        let (db, txs) = (self.core().clone(), self.txs());
        let payload = payload_in(payload);
        Box::new(move || {
            with_tx(&txs, tx, |t| match t {
                Some(t) => db.notify_tx(t, &channel, payload),
                None => db.notify(&channel, payload),
            })
        })
    }
}

verbs! {
    impl Database;
    #[doc = "Sends a notification (after commit, with `tx`); resolves to its id."]
    notify / try_notify (channel: String, payload: PayloadIo, tx: Option<u32>) -> i64 = notify_op;
}

#[napi]
impl Database {
    /// A handle on a stream (writes nothing).
    #[napi]
    pub fn stream(&self, name: String) -> Out<Stream> {
        out(self
            .core()
            .stream(&name)
            .map(|s| Stream { s, txs: self.txs() }))
    }

    /// Starts listening on `channel` now, here (one read of the channel's
    /// head, so what commits after this call returns is heard).
    #[napi]
    pub fn listen(&self, channel: String) -> Out<Listener> {
        out(self.core().listen(&channel).map(|l| Listener {
            l: OffThreadDrop::new(l),
            db: self.core().clone(),
        }))
    }

    /// The channel's window; with `set`, sets it first (for every process).
    #[napi]
    pub fn channel_retention(
        &self,
        env: Env,
        channel: String,
        set: Option<ChannelWindow>,
    ) -> napi::Result<AsyncBlock<Out<ChannelWindow>>> {
        let db = self.core().clone();
        pending(
            &env,
            Box::new(move || {
                let ch = db.channel(&channel)?;
                if let Some(w) = set {
                    ch.set_retention(&honker::channel::ChannelRetention {
                        max_age: ms("maxAge", w.max_age)?,
                        max_count: honker::validate::count("maxCount", w.max_count)?,
                    })?;
                }
                let r = ch.retention()?;
                Ok(ChannelWindow {
                    max_age: r.max_age.as_secs_f64() * 1000.0,
                    max_count: r.max_count as i64,
                })
            }),
        )
    }
}
