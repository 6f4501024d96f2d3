//! Notify/listen channels (ADR 20 rule 4): ephemeral pub/sub in the file.
//!
//! `notify` writes a message inside the caller's transaction, so listeners
//! see it only after commit, in commit order; a rolled-back notify is never
//! seen. A [`Listener`](crate::runtime::Listener) gets every message
//! committed after it started listening, in any process. Messages are kept
//! for a window (by age and count per channel, [`ChannelRetention`]) and
//! trimmed by the notifying transactions themselves and by maintenance,
//! never waiting for a listener: a listener that falls behind the window is
//! told `TRIMMED` with the number it missed, then goes on from the oldest
//! retained message. A listener that stops reading slows nobody.

#[cfg(feature = "rusqlite")]
mod handle;
pub(crate) mod ops;
pub(crate) mod sqlfn;
pub mod statements;
mod types;

#[cfg(feature = "rusqlite")]
pub use handle::Channel;
pub use types::{ChannelRetention, Notification, MAX_NOTIFY_BYTES};
