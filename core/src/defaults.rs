//! The defaults of the surface's optional arguments, declared once.
//!
//! Each is a `pub const` here, which core's own calls use (a group's
//! options, the renewal of a held lock or a kept-alive lease), and a row of
//! [`ALL`], which `core/examples/facts.rs` prints and `scripts/facts.py`
//! writes into each host as constants (Python's `honker/_defaults.py` in
//! seconds, Node's `lib/defaults.js` in ms, Swift's `Defaults.swift` as a
//! `TimeInterval`), so that a wrapper's signature names the default instead
//! of restating its value. `--check` fails CI when a host's copy differs.
//!
//! A duration is a [`Duration`]; a count has its argument's type.

use std::time::Duration;

/// A default's value, for the generators: a duration or a count of the
/// argument's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// A length of time (each host's unit: seconds, ms, `TimeInterval`).
    Duration(Duration),
    /// A count whose argument is a `u32` (`UInt32` in Swift).
    U32(u32),
    /// A count whose argument is an `i64` (`Int64` in Swift).
    I64(i64),
}

/// One row of [`ALL`].
#[derive(Debug, Clone, Copy)]
pub struct Default {
    /// The constant's name (`LOCK_TTL`).
    pub name: &'static str,
    /// Its value.
    pub value: Value,
    /// What it is the default of.
    pub doc: &'static str,
}

macro_rules! defaults {
    ($( #[doc = $doc:literal] $name:ident: $kind:ident = $value:expr; )*) => {
        $(
            #[doc = $doc]
            pub const $name: defaults!(@type $kind) = $value;
        )*
        /// Every default, in declaration order.
        pub const ALL: &[Default] = &[$(
            Default { name: stringify!($name), value: defaults!(@value $kind $name), doc: $doc },
        )*];
    };
    (@type duration) => { Duration };
    (@type u32) => { u32 };
    (@type i64) => { i64 };
    (@value duration $name:ident) => { Value::Duration($name) };
    (@value u32 $name:ident) => { Value::U32($name) };
    (@value i64 $name:ident) => { Value::I64($name) };
}

defaults! {
    /// A lock's time to live when a grant or a renewal names none.
    LOCK_TTL: duration = Duration::from_secs(60);
    /// A held lock or kept-alive lease renews every TTL / RENEW_DIVISOR.
    RENEW_DIVISOR: u32 = 3;
    /// The longest sleep of a blocking iterator between checks.
    POLL_WAIT: duration = Duration::from_secs(1);
    /// Rows in a page of dead letters or of a stream's events.
    PAGE_LIMIT: u32 = 100;
    /// Jobs a claim loop takes at a time.
    CLAIM_BATCH: u32 = 1;
    /// Events a subscription reads at a time.
    SUBSCRIBE_BATCH: u32 = 100;
    /// A subscription commits after this many events.
    COMMIT_EVERY: u32 = 1000;
    /// A subscription commits after this long.
    COMMIT_INTERVAL: duration = Duration::from_secs(1);
    /// Events a group consumer claims at a time.
    GROUP_BATCH: u32 = 10;
    /// A group's deliveries before an event is a dead letter.
    GROUP_MAX_DELIVERIES: u32 = 5;
    /// The lease a group's claim takes when it names none.
    GROUP_LEASE: duration = Duration::from_secs(60);
    /// A group member idle this long, holding nothing, is removed.
    GROUP_MEMBER_IDLE: duration = Duration::from_secs(86_400);
    /// A rate limiter's burst (requests allowed at once).
    RATE_BURST: i64 = 1;
    /// The calls one rate limiter acquire takes.
    RATE_COST: i64 = 1;
    /// Handlers a worker runs at once.
    WORKER_CONCURRENCY: u32 = 10;
    /// How long a stopping worker waits for handlers before cancelling.
    WORKER_GRACE: duration = Duration::from_secs(30);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_the_constants() {
        let names: Vec<&str> = ALL.iter().map(|d| d.name).collect();
        assert_eq!(names.len(), 16);
        assert_eq!(names[0], "LOCK_TTL");
        assert_eq!(ALL[0].value, Value::Duration(LOCK_TTL));
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "a name twice: {names:?}");
        assert!(ALL.iter().all(|d| !d.doc.trim().is_empty()));
    }
}
