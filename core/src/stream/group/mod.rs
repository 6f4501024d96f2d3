//! Consumer groups (ADR 21): competing consumers on a stream. Each event is
//! handled by one member, under a lease and a token like a job (ack,
//! retry, fail, release, heartbeat; a lapsed lease is reclaimed by another
//! member; after `max_deliveries` the event is dead, and can be re-driven).
//! Within a group, events with the same key are handed out in offset order
//! and one at a time; events without a key have no such limit.
//!
//! At-least-once: an event whose lease lapses runs again on another member.

#[cfg(feature = "rusqlite")]
mod handle;
pub(crate) mod ops;
pub(crate) mod sqlfn;
pub mod statements;

use std::time::Duration;

use crate::error::{Error, Result};
use crate::payload::Payload;

#[cfg(feature = "rusqlite")]
pub use handle::Group;
pub use ops::INTAKE;

/// Largest `max_deliveries`.
pub const MAX_DELIVERIES: u32 = 1000;
/// Longest group lease (24 h); the shortest is 1 ms.
pub const MAX_LEASE: Duration = Duration::from_secs(86_400);
/// Longest member idle time (365 days); the shortest is 1 s.
pub const MAX_MEMBER_IDLE: Duration = Duration::from_secs(365 * 86_400);

/// A group's options, kept in its row (every process sees them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupOptions {
    /// Deliveries before an event that keeps failing (or whose lease keeps
    /// lapsing) goes to the dead letters (default 5; 1 to 1,000).
    pub max_deliveries: u32,
    /// The lease a claim takes when it names none (default 60 s; 1 ms to
    /// 24 h).
    pub lease: Duration,
    /// A member that has neither claimed nor heartbeated for this long and
    /// holds nothing is removed by maintenance (default 24 h; 1 s to 365
    /// days).
    pub member_idle: Duration,
}

impl Default for GroupOptions {
    fn default() -> GroupOptions {
        GroupOptions {
            max_deliveries: crate::defaults::GROUP_MAX_DELIVERIES,
            lease: crate::defaults::GROUP_LEASE,
            member_idle: crate::defaults::GROUP_MEMBER_IDLE,
        }
    }
}

/// What a caller gave of a group's options (`Group.create` in every
/// binding, through the options table): each one not given is its default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupSettings {
    /// [`GroupOptions::max_deliveries`].
    pub max_deliveries: Option<u32>,
    /// [`GroupOptions::lease`].
    pub lease: Option<Duration>,
    /// [`GroupOptions::member_idle`].
    pub member_idle: Option<Duration>,
}

impl From<GroupSettings> for GroupOptions {
    fn from(s: GroupSettings) -> GroupOptions {
        let d = GroupOptions::default();
        GroupOptions {
            max_deliveries: s.max_deliveries.unwrap_or(d.max_deliveries),
            lease: s.lease.unwrap_or(d.lease),
            member_idle: s.member_idle.unwrap_or(d.member_idle),
        }
    }
}

impl GroupOptions {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<()> {
        if self.max_deliveries == 0 || self.max_deliveries > MAX_DELIVERIES {
            return Err(Error::invalid(format!(
                "max_deliveries must be between 1 and {MAX_DELIVERIES}, got {}",
                self.max_deliveries
            )));
        }
        crate::options::in_range(
            "group lease",
            self.lease,
            Duration::from_millis(1),
            MAX_LEASE,
        )?;
        crate::options::in_range(
            "member_idle",
            self.member_idle,
            Duration::from_secs(1),
            MAX_MEMBER_IDLE,
        )
    }
}

/// An event delivered to a member of a group.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupEvent {
    /// Its offset in the stream.
    pub offset: i64,
    /// Its key (events of one key are handed out in order, one at a time).
    pub key: Option<String>,
    /// Its payload.
    pub payload: Payload,
    /// When it was published (ms since the epoch).
    pub created_at: i64,
    /// How many times it has been delivered, this one included.
    pub deliveries: u32,
    /// The lease's token: every outcome must present it.
    pub token: String,
    /// When the lease ends unless renewed (ms since the epoch).
    pub lease_expires_at: i64,
    /// The producer's W3C trace context, if it had one.
    pub trace_context: Option<crate::TraceContext>,
    /// The priority it was published with (0 unless given).
    pub priority: i32,
}

/// What names a delivered event to its outcome (ack, retry, fail,
/// release, heartbeat): its offset and its lease token. A [`GroupEvent`],
/// or `(offset, token)` for an event another process or surface claimed.
pub trait Delivered {
    /// The event's offset.
    fn offset(&self) -> i64;
    /// The lease token its claim returned.
    fn token(&self) -> &str;
}

impl Delivered for GroupEvent {
    fn offset(&self) -> i64 {
        self.offset
    }
    fn token(&self) -> &str {
        &self.token
    }
}

impl Delivered for (i64, &str) {
    fn offset(&self) -> i64 {
        self.0
    }
    fn token(&self) -> &str {
        self.1
    }
}

impl Delivered for (i64, String) {
    fn offset(&self) -> i64 {
        self.0
    }
    fn token(&self) -> &str {
        &self.1
    }
}

/// What one claim took. `missed`: events the stream's age limit removed
/// before the group handled them (this claim noticed; see `TRIMMED`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupClaim {
    /// The events delivered, in hand-out order.
    pub events: Vec<GroupEvent>,
    /// Events lost to the stream's retention, noticed by this claim.
    pub missed: u64,
    /// The claim stopped taking in new events at its bound (many waiting
    /// behind a busy key): claim again at once.
    pub more: bool,
}

/// An event in a group's dead letters (one the stream's age limit removed
/// is not listed: the group's next claim drops it, counted as missed).
#[derive(Clone, Debug, PartialEq)]
pub struct DeadEvent {
    /// Its offset in the stream.
    pub offset: i64,
    /// Its key.
    pub key: Option<String>,
    /// Its payload.
    pub payload: Payload,
    /// When it was published (ms since the epoch).
    pub created_at: i64,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// Its last error.
    pub last_error: Option<String>,
    /// When it died (ms since the epoch).
    pub died_at: i64,
}

/// A member of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    /// Its name.
    pub member: String,
    /// When it first claimed (ms).
    pub joined_at: i64,
    /// Its last claim or heartbeat (ms).
    pub seen_at: i64,
    /// Events it holds now.
    pub holds: i64,
}

/// What [`Group::info`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupInfo {
    /// The group's name.
    pub group: String,
    /// The next offset it takes in.
    pub next_offset: i64,
    /// Events published and not finished by the group: those not taken in
    /// yet, plus the pending ones.
    pub lag: i64,
    /// Events taken in and not finished (waiting, ready or delivered).
    pub pending: i64,
    /// Of those, delivered now.
    pub delivered: i64,
    /// Dead letters.
    pub dead: i64,
    /// Age of the oldest pending event (ms), if any.
    pub oldest_pending_age_ms: Option<i64>,
    /// Every member, by name.
    pub members: Vec<MemberInfo>,
    /// The group's options.
    pub options: GroupOptions,
}
