//! The channels' records and options.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::payload::Payload;

/// The largest notification payload, in bytes (a notification is a signal,
/// not a store: publish large data to a stream or a table).
pub const MAX_NOTIFY_BYTES: usize = 64 * 1024;

/// One notification as a listener receives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// Its id: global, increasing in commit order, never reused (Honker's
    /// `_honker_notifications.id`).
    pub id: i64,
    /// Its number within its channel: dense from 1.
    pub seq: i64,
    /// Its payload.
    pub payload: Payload,
    /// When it was sent (ms since the epoch).
    pub created_at: i64,
}

/// How long a channel keeps its notifications, for listeners that are
/// briefly behind. Both limits always apply: a channel is never unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelRetention {
    /// Older notifications are removed (default 1 hour; 1 s to 7 days).
    pub max_age: Duration,
    /// At most this many of the newest are kept (default 100,000; 1 to
    /// 10,000,000).
    pub max_count: u64,
}

impl Default for ChannelRetention {
    fn default() -> ChannelRetention {
        ChannelRetention {
            max_age: Duration::from_secs(3600),
            max_count: 100_000,
        }
    }
}

impl ChannelRetention {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<()> {
        crate::options::in_range(
            "channel max_age",
            self.max_age,
            Duration::from_secs(1),
            Duration::from_secs(7 * 86_400),
        )?;
        if self.max_count == 0 || self.max_count > 10_000_000 {
            return Err(Error::invalid(format!(
                "channel max_count must be between 1 and 10000000, got {}",
                self.max_count
            )));
        }
        Ok(())
    }
}
