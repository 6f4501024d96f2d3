//! Configuration structs with documented defaults, each validated in exactly
//! one place ([`Options::validate`], [`QueueOptions::validate`]).

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};

pub use honker_engine::Durability;

/// How long records that are no longer live are kept before
/// [`Database::maintain`](crate::Database::maintain) removes them.
///
/// There is no "keep forever": every table stays bounded. A zero duration
/// removes the records at the next maintenance (for `completed`, at once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Dead letters (attempts exhausted, `fail`ed, lease lapsed on the last
    /// attempt). Defaults to 7 days.
    pub dead: Duration,
    /// Cancelled and expired jobs. Defaults to 7 days.
    pub cancelled: Duration,
    /// Acked jobs. Defaults to zero: `ack` deletes the job row at once. A
    /// positive value archives acked jobs so `get_job` still finds them.
    pub completed: Duration,
    /// Results saved with `ack`. Defaults to 1 day.
    pub results: Duration,
}

impl Default for Retention {
    fn default() -> Retention {
        const DAY: Duration = Duration::from_secs(86_400);
        Retention {
            dead: DAY * 7,
            cancelled: DAY * 7,
            completed: Duration::ZERO,
            results: DAY,
        }
    }
}

/// Options for [`Database::open_with`](crate::Database::open_with).
#[derive(Clone, Debug)]
pub struct Options {
    /// Commit durability. Defaults to [`Durability::Normal`].
    pub durability: Durability,
    /// How long a write waits for another process's write lock before failing
    /// with `BUSY`, and how long a thread waits for this process's writer.
    /// Defaults to 10 s. Must be between 1 ms and 1 hour.
    pub busy_timeout: Duration,
    /// Read connections in the reader pool (used by `query`, `get_job`,
    /// `stats` and wake-up checks). Defaults to 4; 1 to 64.
    pub readers: usize,
    /// Largest payload or result accepted, in bytes. Defaults to 1 MiB; at most
    /// 256 MiB. Large objects belong in files: store their path instead.
    pub max_payload_bytes: usize,
    /// The time source. Defaults to the system clock.
    pub clock: Arc<dyn Clock>,
    /// Lifetimes of finished records. See [`Retention`].
    pub retention: Retention,
    /// How often the change watcher re-checks the file when the operating
    /// system sends no change notification (the timed fallback; on Linux,
    /// inotify normally wakes it first). Defaults to 100 ms; 1 ms to 10 s.
    /// The watcher is shared by every open of the file in this process, so
    /// the first open's value applies. Waiters also re-check on their own
    /// every ten times this.
    pub watch_fallback: Duration,
    /// How often writes also run the cheap part of maintenance (pruning past
    /// retention). Defaults to 5 minutes. Zero disables automatic maintenance.
    pub auto_maintain_every: Duration,
    /// How long this process keeps the queue counts it made (ADR 27) before
    /// writing them to the file: they go with a later write transaction, by
    /// a flush of their own when the process is idle, and at `close`. A
    /// process killed loses at most this long of its counts. Defaults to
    /// 1 s; at most 60 s. Zero counts in each transaction itself (exact,
    /// about a fifth slower on one-job transactions).
    pub metrics_flush_every: Duration,
}

/// [`Options`] as a binding receives them from its caller: every field
/// optional, `None` meaning "core's default". [`apply`](Self::apply) fills the
/// defaults, so they are written in one place ([`Options::default`]) and no
/// binding restates them.
#[derive(Clone, Debug, Default)]
pub struct OptionsPatch {
    pub durability: Option<Durability>,
    pub busy_timeout: Option<Duration>,
    pub readers: Option<usize>,
    pub max_payload_bytes: Option<usize>,
    pub watch_fallback: Option<Duration>,
    pub auto_maintain_every: Option<Duration>,
    pub metrics_flush_every: Option<Duration>,
    pub clock: Option<Arc<dyn Clock>>,
}

impl OptionsPatch {
    /// The options: what was given, core's defaults for the rest. Ranges
    /// are checked when the database opens with them.
    pub fn apply(self) -> Options {
        let d = Options::default();
        Options {
            durability: self.durability.unwrap_or(d.durability),
            busy_timeout: self.busy_timeout.unwrap_or(d.busy_timeout),
            readers: self.readers.unwrap_or(d.readers),
            max_payload_bytes: self.max_payload_bytes.unwrap_or(d.max_payload_bytes),
            watch_fallback: self.watch_fallback.unwrap_or(d.watch_fallback),
            auto_maintain_every: self.auto_maintain_every.unwrap_or(d.auto_maintain_every),
            metrics_flush_every: self.metrics_flush_every.unwrap_or(d.metrics_flush_every),
            clock: self.clock.unwrap_or(d.clock),
            retention: d.retention,
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            durability: Durability::Normal,
            busy_timeout: Duration::from_secs(10),
            readers: 4,
            max_payload_bytes: 1 << 20,
            clock: Arc::new(SystemClock),
            retention: Retention::default(),
            watch_fallback: Duration::from_millis(100),
            auto_maintain_every: Duration::from_secs(300),
            metrics_flush_every: Duration::from_secs(1),
        }
    }
}

/// Upper bound for [`Options::max_payload_bytes`].
pub const MAX_PAYLOAD_LIMIT: usize = 256 << 20;

impl Options {
    /// What the engine needs of these options.
    pub(crate) fn engine(&self) -> honker_engine::Options {
        honker_engine::Options {
            durability: self.durability,
            busy_timeout: self.busy_timeout,
            readers: self.readers,
            clock: Arc::clone(&self.clock),
            watch_fallback: self.watch_fallback,
        }
    }

    /// Checks every field; called by `open_with`.
    pub fn validate(&self) -> Result<()> {
        in_range(
            "busy_timeout",
            self.busy_timeout,
            Duration::from_millis(1),
            Duration::from_secs(3600),
        )?;
        if !(1..=64).contains(&self.readers) {
            return Err(Error::invalid(format!(
                "readers must be between 1 and 64, got {}",
                self.readers
            )));
        }
        if self.max_payload_bytes == 0 || self.max_payload_bytes > MAX_PAYLOAD_LIMIT {
            return Err(Error::invalid(format!(
                "max_payload_bytes must be between 1 and {MAX_PAYLOAD_LIMIT}, got {}",
                self.max_payload_bytes
            )));
        }
        in_range(
            "watch_fallback",
            self.watch_fallback,
            Duration::from_millis(1),
            Duration::from_secs(10),
        )?;
        in_range(
            "metrics_flush_every",
            self.metrics_flush_every,
            Duration::ZERO,
            Duration::from_secs(60),
        )?;
        Ok(())
    }
}

/// Retry backoff: attempt `k` (1-based, as counted after the claim that
/// failed) waits `base * 2^(k-1)`, capped at `max`, then scaled by a random
/// factor in `[1 - jitter, 1]` so that retries of a failed batch spread out.
///
/// The policy is stored with each job at enqueue time, so whichever process
/// (or language) retries the job applies the policy its producer chose.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    /// Delay before the first retry. Defaults to 1 s.
    pub base: Duration,
    /// Largest delay. Defaults to 1 hour.
    pub max: Duration,
    /// Fraction of the delay that is randomised, 0.0 to 1.0. Defaults to 0.5
    /// ("equal jitter"). Zero gives exact delays.
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(3600),
            jitter: 0.5,
        }
    }
}

impl Backoff {
    /// Checks the fields.
    pub fn validate(&self) -> Result<()> {
        in_range(
            "backoff.base",
            self.base,
            Duration::ZERO,
            Duration::from_secs(86_400 * 365),
        )?;
        in_range(
            "backoff.max",
            self.max,
            self.base,
            Duration::from_secs(86_400 * 365),
        )?;
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(Error::invalid(format!(
                "backoff.jitter must be between 0.0 and 1.0, got {}",
                self.jitter
            )));
        }
        Ok(())
    }
}

/// Per-queue defaults for [`Database::queue_with`](crate::Database::queue_with).
/// Each can be overridden per call.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueOptions {
    /// Lease given by `claim`. Defaults to 60 s. A worker that runs longer
    /// must `heartbeat` (the worker runtimes do it for you) or the job is
    /// handed to another worker. 1 ms to 24 hours.
    pub lease: Duration,
    /// Attempts before a job becomes a dead letter. Defaults to 3; 1 to 1000.
    pub max_attempts: u32,
    /// Backoff between retries. See [`Backoff`].
    pub backoff: Backoff,
}

impl Default for QueueOptions {
    fn default() -> QueueOptions {
        QueueOptions {
            lease: Duration::from_secs(60),
            max_attempts: 3,
            backoff: Backoff::default(),
        }
    }
}

/// Bounds for per-call values, shared by every surface.
pub mod limits {
    use std::time::Duration;

    /// Longest queue name, in bytes.
    pub const MAX_QUEUE_NAME: usize = 128;
    /// Most jobs one claim may return.
    pub const MAX_BATCH: usize = 10_000;
    /// Most attempts a job may be given.
    pub const MAX_ATTEMPTS: u32 = 1000;
    /// Longest lease.
    pub const MAX_LEASE: Duration = Duration::from_secs(86_400);
    /// Longest delay, run-at distance or expiry (100 years).
    pub const MAX_DELAY: Duration = Duration::from_secs(86_400 * 365 * 100);
    /// Longest dedupe key or worker id, in bytes.
    pub const MAX_KEY: usize = 512;
    /// Longest error message stored with a job, in bytes (longer ones are
    /// truncated, not rejected).
    pub const MAX_ERROR: usize = 4096;
}

/// A queue's defaults as given, field by field (`None`: not given): what
/// [`Queue::configure`](crate::queue::Queue::configure) stores in the file
/// for every process and language, and what a handle was opened with.
/// A handle's options are, field by field, what it was given, else what
/// the file holds for the queue, else the documented default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueSettings {
    /// The lease a claim gives.
    pub lease: Option<Duration>,
    /// Attempts before a job becomes a dead letter.
    pub max_attempts: Option<u32>,
    /// The first retry's delay.
    pub backoff_base: Option<Duration>,
    /// The largest retry delay.
    pub backoff_max: Option<Duration>,
    /// The randomised fraction of a retry's delay.
    pub backoff_jitter: Option<f64>,
}

impl QueueSettings {
    /// These settings, with `other`'s where these have none.
    pub fn or(&self, other: &QueueSettings) -> QueueSettings {
        QueueSettings {
            lease: self.lease.or(other.lease),
            max_attempts: self.max_attempts.or(other.max_attempts),
            backoff_base: self.backoff_base.or(other.backoff_base),
            backoff_max: self.backoff_max.or(other.backoff_max),
            backoff_jitter: self.backoff_jitter.or(other.backoff_jitter),
        }
    }

    /// `base` with the fields given here in place of its own.
    pub fn over(&self, base: &QueueOptions) -> QueueOptions {
        QueueOptions {
            lease: self.lease.unwrap_or(base.lease),
            max_attempts: self.max_attempts.unwrap_or(base.max_attempts),
            backoff: Backoff {
                base: self.backoff_base.unwrap_or(base.backoff.base),
                max: self.backoff_max.unwrap_or(base.backoff.max),
                jitter: self.backoff_jitter.unwrap_or(base.backoff.jitter),
            },
        }
    }
}

impl QueueOptions {
    /// Checks every field; called by `queue_with`.
    pub fn validate(&self) -> Result<()> {
        in_range(
            "lease",
            self.lease,
            Duration::from_millis(1),
            limits::MAX_LEASE,
        )?;
        check_attempts(self.max_attempts)?;
        self.backoff.validate()
    }
}

pub(crate) fn check_attempts(n: u32) -> Result<()> {
    if n == 0 || n > limits::MAX_ATTEMPTS {
        return Err(Error::invalid(format!(
            "max_attempts must be between 1 and {}, got {n}",
            limits::MAX_ATTEMPTS
        )));
    }
    Ok(())
}

pub(crate) fn in_range(what: &str, d: Duration, lo: Duration, hi: Duration) -> Result<()> {
    if d < lo || d > hi {
        return Err(Error::invalid(format!(
            "{what} must be between {} and {}, got {}",
            human(lo),
            human(hi),
            human(d)
        )));
    }
    Ok(())
}

/// A duration as people write it in an error: whole hours or seconds where
/// it is one, else milliseconds (fractions kept: a sub-ms lease is "0.5 ms",
/// not Rust's "500µs" or "0ns").
pub(crate) fn human(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if d >= Duration::from_secs(3600) && d.as_secs().is_multiple_of(3600) && d.subsec_nanos() == 0 {
        format!("{} h", d.as_secs() / 3600)
    } else if d >= Duration::from_secs(1) && d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else if ms.fract() == 0.0 {
        format!("{ms:.0} ms")
    } else {
        let s = format!("{ms:.6}");
        format!("{} ms", s.trim_end_matches('0'))
    }
}
