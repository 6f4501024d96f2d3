//! The [`Channel`] handle and `Database::notify` / `Database::listen`.

use std::sync::Arc;

use super::ops;
use super::types::ChannelRetention;
use crate::database::Database;
use crate::error::Result;
use crate::payload::Payload;
use crate::transaction::Transaction;
use crate::validate;

impl Database {
    /// A handle on the channel `name`. Creating it writes nothing.
    pub fn channel(&self, name: &str) -> Result<Channel> {
        validate::name("channel", name)?;
        Ok(Channel {
            db: self.clone(),
            name: name.into(),
        })
    }

    /// Sends `payload` to every listener of `channel` (after this call's own
    /// transaction commits); returns the notification's id.
    pub fn notify(&self, channel: &str, payload: impl Into<Payload>) -> Result<i64> {
        self.channel(channel)?.notify(payload)
    }

    /// [`notify`](Self::notify) inside the caller's transaction: listeners
    /// see it only if, and once, it commits.
    pub fn notify_tx(
        &self,
        tx: &Transaction,
        channel: &str,
        payload: impl Into<Payload>,
    ) -> Result<i64> {
        self.channel(channel)?.notify_tx(tx, payload)
    }
}

/// A handle on one named channel. Cheap to clone, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Channel {
    db: Database,
    name: Arc<str>,
}

impl Channel {
    /// The channel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The database the channel lives in.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Sends a notification; returns its id. At most
    /// [`MAX_NOTIFY_BYTES`](super::MAX_NOTIFY_BYTES) of payload.
    pub fn notify(&self, payload: impl Into<Payload>) -> Result<i64> {
        self.notify_in(None, payload.into())
    }

    /// [`notify`](Self::notify) inside the caller's transaction.
    pub fn notify_tx(&self, tx: &Transaction, payload: impl Into<Payload>) -> Result<i64> {
        self.notify_in(Some(tx), payload.into())
    }

    fn notify_in(&self, tx: Option<&Transaction>, payload: Payload) -> Result<i64> {
        ops::check_payload(&payload)?;
        let (id, _) = self.db.inner.write(tx, |conn, now| {
            ops::notify(conn.raw(), &self.name, &payload, now)
        })?;
        Ok(id)
    }

    /// Sets how long this channel keeps notifications (every process sees it).
    pub fn set_retention(&self, retention: &ChannelRetention) -> Result<()> {
        retention.validate()?;
        self.db.inner.write(None, |conn, now| {
            ops::set_retention(conn.raw(), &self.name, retention, now)
        })
    }

    /// This channel's window (the defaults where none was set).
    pub fn retention(&self) -> Result<ChannelRetention> {
        let reader = self.db.inner.reader()?;
        ops::retention(reader.raw(), &self.name)
    }

    /// In one snapshot: the last sequence number and the newest id.
    pub(crate) fn head(&self) -> Result<(i64, Option<i64>)> {
        let reader = self.db.inner.reader()?;
        ops::head(reader.raw(), &self.name)
    }

    /// In one snapshot: the last sequence number, and whether a message after
    /// `after_id` exists.
    pub(crate) fn head_after(&self, after_id: i64) -> Result<(i64, bool)> {
        let reader = self.db.inner.reader()?;
        ops::head_after(reader.raw(), &self.name, after_id)
    }

    /// Up to `limit` notifications after `after_id`, in commit order.
    pub(crate) fn read(&self, after_id: i64, limit: usize) -> Result<Vec<super::Notification>> {
        let reader = self.db.inner.reader()?;
        ops::read(reader.raw(), &self.name, after_id, limit)
    }
}
