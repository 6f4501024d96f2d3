//! The [`Stream`] handle: each verb validates, then runs `ops` in a write
//! transaction (its own or the caller's) or on a reader.

use std::sync::Arc;

use super::ops;
use super::types::{Event, PublishOptions, Start, StreamInfo};
use super::StreamRetention;
use crate::database::Database;
use crate::error::Result;
use crate::payload::Payload;
use crate::transaction::Transaction;
use crate::validate;

impl Database {
    /// A handle on the stream `name`. Creating it writes nothing.
    pub fn stream(&self, name: &str) -> Result<Stream> {
        validate::name("stream", name)?;
        Ok(Stream {
            db: self.clone(),
            name: name.into(),
        })
    }
}

/// A handle on one named stream. Cheap to clone, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Stream {
    db: Database,
    name: Arc<str>,
}

impl Stream {
    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The database the stream lives in.
    pub fn database(&self) -> &Database {
        &self.db
    }

    fn write<R>(
        &self,
        tx: Option<&Transaction>,
        f: impl FnOnce(crate::raw::Conn<'_>, i64) -> Result<R>,
    ) -> Result<R> {
        self.db.inner.write(tx, |conn, now| f(conn.raw(), now))
    }

    /// Appends an event and returns its offset (see [`PublishOptions`]).
    pub fn publish(&self, payload: impl Into<Payload>, options: &PublishOptions) -> Result<i64> {
        self.publish_in(None, payload.into(), options)
    }

    /// [`publish`](Self::publish) inside the caller's transaction: the event
    /// exists only if it commits (the outbox).
    pub fn publish_tx(
        &self,
        tx: &Transaction,
        payload: impl Into<Payload>,
        options: &PublishOptions,
    ) -> Result<i64> {
        self.publish_in(Some(tx), payload.into(), options)
    }

    fn publish_in(
        &self,
        tx: Option<&Transaction>,
        payload: Payload,
        o: &PublishOptions,
    ) -> Result<i64> {
        o.check()?;
        payload.validate(self.db.inner.options.max_payload_bytes)?;
        let offsets = self.write(tx, |conn, now| {
            ops::publish(conn, &self.name, o, std::slice::from_ref(&payload), now)
        })?;
        Ok(offsets[0])
    }

    /// Appends events in one transaction; returns their offsets (consecutive).
    pub fn publish_many<P: Into<Payload>>(
        &self,
        payloads: impl IntoIterator<Item = P>,
        key: Option<&str>,
    ) -> Result<Vec<i64>> {
        let o = PublishOptions {
            key: key.map(str::to_owned),
            ..PublishOptions::default()
        };
        self.publish_many_with(None, payloads, &o)
    }

    /// [`publish_many`](Self::publish_many) inside the caller's transaction.
    pub fn publish_many_tx<P: Into<Payload>>(
        &self,
        tx: &Transaction,
        payloads: impl IntoIterator<Item = P>,
        key: Option<&str>,
    ) -> Result<Vec<i64>> {
        let o = PublishOptions {
            key: key.map(str::to_owned),
            ..PublishOptions::default()
        };
        self.publish_many_with(Some(tx), payloads, &o)
    }

    /// [`publish_many`](Self::publish_many) with every option but the
    /// idempotency key (which names one event: `INVALID_ARGUMENT`), in `tx`
    /// when given. Every event of the batch gets the key and trace context.
    pub fn publish_many_with<P: Into<Payload>>(
        &self,
        tx: Option<&Transaction>,
        payloads: impl IntoIterator<Item = P>,
        o: &PublishOptions,
    ) -> Result<Vec<i64>> {
        o.check()?;
        if o.idempotency_key.is_some() {
            return Err(crate::Error::invalid(
                "an idempotency key names one event, not a batch",
            ));
        }
        let payloads: Vec<Payload> = payloads.into_iter().map(Into::into).collect();
        validate::batch_usize(payloads.len().max(1))?;
        for p in &payloads {
            p.validate(self.db.inner.options.max_payload_bytes)?;
        }
        self.write(tx, |conn, now| {
            ops::publish(conn, &self.name, o, &payloads, now)
        })
    }

    /// Up to `limit` events with offsets above `after`, in order (paging).
    pub fn read(&self, after: i64, limit: usize) -> Result<Vec<Event>> {
        if after < 0 {
            return Err(crate::Error::invalid(format!(
                "after must not be negative, got {after}"
            )));
        }
        let limit = validate::batch_usize(limit)?;
        let reader = self.db.inner.reader()?;
        Ok(ops::read(reader.raw(), &self.name, after, limit)?
            .into_iter()
            .map(Event::from)
            .collect())
    }

    /// Commits `next_offset` ("the next event to read") for `consumer`; it
    /// never moves back. Returns the consumer's next offset after it.
    pub fn commit(&self, consumer: &str, next_offset: i64) -> Result<i64> {
        self.commit_in(None, consumer, next_offset)
    }

    /// [`commit`](Self::commit) inside the caller's transaction: the offset
    /// and the caller's own writes commit (or roll back) together.
    pub fn commit_tx(&self, tx: &Transaction, consumer: &str, next_offset: i64) -> Result<i64> {
        self.commit_in(Some(tx), consumer, next_offset)
    }

    pub(crate) fn commit_in(
        &self,
        tx: Option<&Transaction>,
        consumer: &str,
        next_offset: i64,
    ) -> Result<i64> {
        validate::name("consumer", consumer)?;
        self.write(tx, |conn, now| {
            ops::commit(conn, &self.name, consumer, next_offset, now, true)
        })
    }

    /// Moves `consumer` to `next_offset`, back or forward.
    pub fn seek(&self, consumer: &str, next_offset: i64) -> Result<()> {
        validate::name("consumer", consumer)?;
        self.write(None, |conn, now| {
            ops::seek(conn, &self.name, consumer, next_offset, now)
        })
    }

    /// The consumer's next offset, if it has one.
    pub fn position(&self, consumer: &str) -> Result<Option<i64>> {
        validate::name("consumer", consumer)?;
        let reader = self.db.inner.reader()?;
        ops::position(reader.raw(), &self.name, consumer)
    }

    /// Where `consumer` starts: its committed offset, else `start` resolved
    /// and stored now.
    pub fn start(&self, consumer: &str, start: Start) -> Result<i64> {
        validate::name("consumer", consumer)?;
        self.write(None, |conn, now| {
            ops::start(conn, &self.name, consumer, start, now)
        })
    }

    /// Sets this stream's retention (every process sees it; see
    /// [`StreamRetention`]). Trimming happens in maintenance.
    pub fn set_retention(&self, retention: &StreamRetention) -> Result<()> {
        retention.validate()?;
        self.write(None, |conn, now| {
            super::retention::set(conn, &self.name, retention, now)
        })
    }

    /// This stream's retention (the defaults where none was set).
    pub fn retention(&self) -> Result<StreamRetention> {
        let reader = self.db.inner.reader()?;
        super::retention::get(reader.raw(), &self.name)
    }

    /// Applies the retention now, in batches of short transactions; returns
    /// how many events were removed. (Maintenance does this for every stream.)
    pub fn trim(&self) -> Result<usize> {
        let mut total = 0;
        loop {
            let n = self.write(None, |conn, now| {
                super::retention::trim(conn, &self.name, now, crate::database::BATCH)
            })?;
            total += n;
            if n < crate::database::BATCH {
                return Ok(total);
            }
        }
    }

    /// In one snapshot: the last offset and the first retained event at or
    /// above `from`.
    pub(crate) fn head_from(&self, from: i64) -> Result<(i64, Option<i64>)> {
        let reader = self.db.inner.reader()?;
        ops::head_from(reader.raw(), &self.name, from)
    }

    /// Length, first and last offsets, and every consumer's place and lag.
    pub fn info(&self) -> Result<StreamInfo> {
        let now = self.db.inner.now();
        let reader = self.db.inner.reader()?;
        Ok(ops::info(reader.raw(), &self.name, now)?.into())
    }
}
