//! The scheduler's records: a schedule's definition, what `list` shows,
//! and a fire.

use std::time::Duration;

use super::spec::{DayRule, Spec};
use crate::clock::duration_ms;
use crate::error::{Error, Result};
use crate::payload::Payload;
use crate::validate;

/// The default catch-up window: boundaries missed longer ago than this are
/// counted, never fired.
pub const DEFAULT_CATCH_UP_WINDOW: Duration = Duration::from_secs(86_400);
/// The default bound on fires in one catch-up under [`CatchUp::All`].
pub const DEFAULT_CATCH_UP_MAX: u32 = 100;
/// The largest `catch_up_max`.
pub const MAX_CATCH_UP_MAX: u32 = 10_000;
/// A boundary at most this late (or the catch-up window, if shorter) is
/// on time: it fires under every policy (a slow tick, a restart).
pub const ON_TIME: Duration = Duration::from_secs(60);
/// Fire records are kept for the schedule's catch-up window, but never
/// longer than this (Honker's registrations have a century-long window):
/// maintenance removes older ones.
pub const MAX_FIRE_RECORD_AGE: Duration = Duration::from_secs(7 * 86_400);
/// Boundaries counted per catch-up at most (a longer outage of a
/// per-second schedule counts this many missed).
pub const MAX_COUNTED: u64 = 100_000;

/// What a schedule does with boundaries that passed while no scheduler
/// ran (a process down, a phone app suspended). Boundaries older than the
/// catch-up window are never fired, only counted in `missed`; a boundary
/// at most [`ON_TIME`] late fires under every policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CatchUp {
    /// Late boundaries are counted as missed; none fires.
    Skip,
    /// The latest boundary within the window fires once (the default).
    #[default]
    Latest,
    /// Every boundary within the window fires, oldest first, at most
    /// `catch_up_max` of them (older ones beyond that are missed).
    All,
}

impl CatchUp {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Skip => "skip",
            CatchUp::Latest => "latest",
            CatchUp::All => "all",
        }
    }

    /// Parses the stored word.
    pub fn parse(s: &str) -> Result<CatchUp> {
        match s {
            "skip" => Ok(CatchUp::Skip),
            "latest" => Ok(CatchUp::Latest),
            "all" => Ok(CatchUp::All),
            other => Err(Error::invalid(format!(
                "catch_up must be \"skip\", \"latest\" or \"all\", got {other:?}"
            ))),
        }
    }
}

/// What a fire does while the schedule's previous job is still live
/// (ready, scheduled or running), named as Temporal names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Overlap {
    /// Every fire puts a job on the queue (the default).
    #[default]
    AllowAll,
    /// The fire is skipped (counted in `overlap_skipped`).
    Skip,
    /// One fire waits until the previous job is no longer live, then puts
    /// its job on the queue; more fires meanwhile are skipped.
    BufferOne,
}

impl Overlap {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::AllowAll => "allow",
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer_one",
        }
    }

    /// Parses the stored word (`allow_all` is accepted for `allow`).
    pub fn parse(s: &str) -> Result<Overlap> {
        match s {
            "allow" | "allow_all" => Ok(Overlap::AllowAll),
            "skip" => Ok(Overlap::Skip),
            "buffer_one" => Ok(Overlap::BufferOne),
            other => Err(Error::invalid(format!(
                "overlap must be \"allow\", \"skip\" or \"buffer_one\", got {other:?}"
            ))),
        }
    }
}

/// A schedule's definition: what `add` registers (an upsert by name).
///
/// ```
/// use honker::schedule::{CatchUp, Schedule};
/// let s = Schedule::cron("nightly-report", "0 2 * * *", "reports")
///     .time_zone("Europe/Berlin")
///     .catch_up(CatchUp::Latest);
/// assert_eq!(s.spec, "0 2 * * *");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Unique name (the upsert key).
    pub name: String,
    /// A cron expression (5 fields, or 6 with seconds first), a macro
    /// (`@hourly`, `@daily`…) or `@every <duration>` (`@every 90s`).
    pub spec: String,
    /// The queue its jobs go on.
    pub queue: String,
    /// Every fired job's payload. Defaults to JSON `null`.
    pub payload: Payload,
    /// The IANA zone its cron is evaluated in. Defaults to `UTC`.
    pub time_zone: String,
    /// When both day fields are restricted: Vixie's OR (the default) or
    /// Honker's AND.
    pub day_rule: DayRule,
    /// The fired jobs' priority.
    pub priority: i32,
    /// The fired jobs' attempts (default: the queue's).
    pub max_attempts: Option<u32>,
    /// A fired job not started this long after its fire time expires.
    pub expires: Option<Duration>,
    /// What to do with boundaries missed while no scheduler ran.
    pub catch_up: CatchUp,
    /// Boundaries older than this are never fired (counted as missed).
    pub catch_up_window: Duration,
    /// At most this many fires in one catch-up under [`CatchUp::All`].
    pub catch_up_max: u32,
    /// What a fire does while the previous job is live.
    pub overlap: Overlap,
    /// Each fire's job runs up to this much after its boundary; the delay
    /// is stable for (schedule, boundary), so every process agrees.
    pub jitter: Duration,
    /// No boundary before this time (ms since the epoch) fires; `@every`
    /// is aligned to it.
    pub start_at: Option<i64>,
    /// No boundary after this time fires; then the schedule has ended.
    pub end_at: Option<i64>,
}

impl Schedule {
    /// A schedule `name` firing on `spec` into `queue`, with every default.
    pub fn cron(name: &str, spec: &str, queue: &str) -> Schedule {
        Schedule {
            name: name.into(),
            spec: spec.into(),
            queue: queue.into(),
            payload: Payload::Json("null".into()),
            time_zone: "UTC".into(),
            day_rule: DayRule::Or,
            priority: 0,
            max_attempts: None,
            expires: None,
            catch_up: CatchUp::Latest,
            catch_up_window: DEFAULT_CATCH_UP_WINDOW,
            catch_up_max: DEFAULT_CATCH_UP_MAX,
            overlap: Overlap::AllowAll,
            jitter: Duration::ZERO,
            start_at: None,
            end_at: None,
        }
    }

    /// Sets the payload.
    pub fn payload(mut self, p: Payload) -> Schedule {
        self.payload = p;
        self
    }

    /// Sets the time zone.
    pub fn time_zone(mut self, tz: &str) -> Schedule {
        self.time_zone = tz.into();
        self
    }

    /// Sets the catch-up policy.
    pub fn catch_up(mut self, c: CatchUp) -> Schedule {
        self.catch_up = c;
        self
    }

    /// Sets the catch-up window.
    pub fn catch_up_window(mut self, w: Duration) -> Schedule {
        self.catch_up_window = w;
        self
    }

    /// Sets the overlap policy.
    pub fn overlap(mut self, o: Overlap) -> Schedule {
        self.overlap = o;
        self
    }

    /// Sets the day rule.
    pub fn day_rule(mut self, r: DayRule) -> Schedule {
        self.day_rule = r;
        self
    }

    /// Checks everything that does not depend on the file, and parses the
    /// rule: `INVALID_ARGUMENT` naming what is wrong.
    pub fn check(&self, max_payload: usize) -> Result<Spec> {
        validate::name("schedule", &self.name)?;
        validate::name("queue", &self.queue)?;
        self.payload.validate(max_payload)?;
        let spec = Spec::parse(&self.spec, &self.time_zone, self.day_rule)?;
        if let Some(n) = self.max_attempts {
            crate::options::check_attempts(n)?;
        }
        if let Some(e) = self.expires {
            if e.is_zero() {
                return Err(Error::invalid("expires must be positive"));
            }
            validate::delay("expires", e)?;
        }
        if self.catch_up_window.is_zero() {
            return Err(Error::invalid(
                "catch_up_window must be positive (catch_up = skip fires nothing late)",
            ));
        }
        validate::delay("catch_up_window", self.catch_up_window)?;
        if !(1..=MAX_CATCH_UP_MAX).contains(&self.catch_up_max) {
            return Err(Error::invalid(format!(
                "catch_up_max must be between 1 and {MAX_CATCH_UP_MAX}, got {}",
                self.catch_up_max
            )));
        }
        validate::delay("jitter", self.jitter)?;
        for (what, t) in [("start_at", self.start_at), ("end_at", self.end_at)] {
            if let Some(t) = t {
                validate::timestamp_ms(what, t)?;
            }
        }
        if let (Some(s), Some(e)) = (self.start_at, self.end_at) {
            if e < s {
                return Err(Error::invalid("end_at must not come before start_at"));
            }
        }
        Ok(spec)
    }

    pub(crate) fn expires_ms(&self) -> Option<i64> {
        self.expires.map(duration_ms)
    }
}

/// A schedule's options by name, as the bindings and SQL take them (their
/// units already converted): each `None` leaves the field as it is (core's
/// default in a new [`Schedule::cron`], or the stored value for an update).
/// The words are parsed here, once: `day_rule` (`or`/`and`), `catch_up`
/// (`skip`/`latest`/`all`), `overlap` (`allow`/`skip`/`buffer_one`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScheduleOptions {
    /// The fired jobs' payload.
    pub payload: Option<Payload>,
    /// The IANA zone.
    pub time_zone: Option<String>,
    /// `or` or `and`.
    pub day_rule: Option<String>,
    /// The fired jobs' priority.
    pub priority: Option<i32>,
    /// The fired jobs' attempts.
    pub max_attempts: Option<u32>,
    /// How long a fired job may wait to start.
    pub expires: Option<Duration>,
    /// `skip`, `latest` or `all`.
    pub catch_up: Option<String>,
    /// How late a boundary may still fire.
    pub catch_up_window: Option<Duration>,
    /// Fires in one catch-up under `all`.
    pub catch_up_max: Option<u32>,
    /// `allow`, `skip` or `buffer_one`.
    pub overlap: Option<String>,
    /// The stable delay's bound.
    pub jitter: Option<Duration>,
    /// No boundary before (ms since the epoch).
    pub start_at: Option<i64>,
    /// No boundary after (ms since the epoch).
    pub end_at: Option<i64>,
}

impl ScheduleOptions {
    /// Sets every option given on `s` (`INVALID_ARGUMENT` for a word that
    /// is not one of its choices; [`Schedule::check`] checks the rest).
    pub fn apply(self, s: &mut Schedule) -> Result<()> {
        if let Some(v) = self.payload {
            s.payload = v;
        }
        if let Some(v) = self.time_zone {
            s.time_zone = v;
        }
        if let Some(v) = self.day_rule {
            s.day_rule = DayRule::parse(&v)?;
        }
        if let Some(v) = self.priority {
            s.priority = v;
        }
        if let Some(v) = self.max_attempts {
            s.max_attempts = Some(v);
        }
        if let Some(v) = self.expires {
            s.expires = Some(v);
        }
        if let Some(v) = self.catch_up {
            s.catch_up = CatchUp::parse(&v)?;
        }
        if let Some(v) = self.catch_up_window {
            s.catch_up_window = v;
        }
        if let Some(v) = self.catch_up_max {
            s.catch_up_max = v;
        }
        if let Some(v) = self.overlap {
            s.overlap = Overlap::parse(&v)?;
        }
        if let Some(v) = self.jitter {
            s.jitter = v;
        }
        if let Some(v) = self.start_at {
            s.start_at = Some(v);
        }
        if let Some(v) = self.end_at {
            s.end_at = Some(v);
        }
        Ok(())
    }
}

/// A schedule as stored, with its state: what `list` and `get` return.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleInfo {
    /// The definition.
    pub schedule: Schedule,
    /// Whether it is paused.
    pub paused: bool,
    /// The note given when it was paused.
    pub note: Option<String>,
    /// The next boundary due (ms); `None` once it has ended.
    pub next_fire_at: Option<i64>,
    /// The last boundary fired.
    pub last_fire_at: Option<i64>,
    /// The job of the last fire.
    pub last_job_id: Option<i64>,
    /// A boundary held back by `buffer_one`.
    pub buffered_at: Option<i64>,
    /// Boundaries fired (jobs put on the queue by schedule).
    pub fires: u64,
    /// Boundaries missed: older than the catch-up window, or dropped by
    /// the catch-up policy.
    pub missed: u64,
    /// Boundaries skipped by the overlap policy.
    pub overlap_skipped: u64,
}

/// One fire: a boundary of a schedule and the job it put on the queue
/// (`None` when the overlap policy skipped it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fire {
    /// The schedule's name.
    pub schedule: String,
    /// The queue.
    pub queue: String,
    /// The boundary (ms): the job's scheduled time, before jitter.
    pub fire_at: i64,
    /// The job, if one was put on the queue.
    pub job_id: Option<i64>,
}
