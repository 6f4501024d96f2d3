//! One way to wait for something another process may commit (issue 55,
//! stage 4).
//!
//! Every waiting call of honker (a claim with a wait, a subscription's or a
//! listener's next, a group claim, a lock's acquire, a rate limiter's
//! acquire, a job's result) is the same loop: look without waiting (one
//! read), take when the look says now (a short call), else sleep until a
//! commit of any process, the time the look named or the re-check interval,
//! whichever comes first, and end at the deadline. What differs is only the
//! look and the take: a [`Source`]. The rules of the loop are [`Pace`]'s,
//! sans I/O, so that the hosts' waits that hold no thread (an asyncio loop's
//! descriptor, tokio's reactor) run the very same steps as
//! [`Database::wait_for`](crate::Database::wait_for), which blocks this thread on the file's signal.

use std::time::{Duration, Instant};

use crate::error::Result;

/// What a waiting call takes, seen by the loop as a look and a take.
pub trait Source {
    /// What a take gets.
    type Item;

    /// When [`take`](Self::take) may get something, found without waiting
    /// and without writing: `Some(ZERO)` now, `Some(d)` in `d` (only time
    /// brings it: a job's due time, a holder's TTL, a rate's refill),
    /// `None` when only a commit can.
    fn look(&self) -> Result<Option<Duration>>;

    /// Takes what there is, a short call: `None` for nothing (another was
    /// first, or the look only guessed).
    fn take(&self) -> Result<Option<Self::Item>>;

    /// After a take that got nothing: when to look again (`None`: at the
    /// next commit; a rate limiter's refusal names its time).
    fn retry_in(&self) -> Option<Duration> {
        None
    }

    /// Whether the wait ends at once, with nothing, when the next chance
    /// lies beyond its deadline: for a source that only time frees, so
    /// that a caller who cannot get it in time hears so now (a rate
    /// limiter's acquire), not at the deadline.
    fn ends_early(&self) -> bool {
        false
    }
}

/// A source whose every look says "now": each take reads (a
/// subscription's or a listener's next, a result's wait).
pub struct Reads<K>(pub K);

impl<K> std::fmt::Debug for Reads<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reads")
    }
}

impl<T, K: Fn() -> Result<Option<T>>> Source for Reads<K> {
    type Item = T;

    fn look(&self) -> Result<Option<Duration>> {
        Ok(Some(Duration::ZERO))
    }

    fn take(&self) -> Result<Option<T>> {
        (self.0)()
    }
}

/// A source made of a look and a take (a lock's acquire with its owner
/// bound, in a host's wait).
pub struct Parts<L, K> {
    /// See [`Source::look`].
    pub look: L,
    /// See [`Source::take`].
    pub take: K,
}

impl<L, K> std::fmt::Debug for Parts<L, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Parts")
    }
}

impl<T, L, K> Source for Parts<L, K>
where
    L: Fn() -> Result<Option<Duration>>,
    K: Fn() -> Result<Option<T>>,
{
    type Item = T;

    fn look(&self) -> Result<Option<Duration>> {
        (self.look)()
    }

    fn take(&self) -> Result<Option<T>> {
        (self.take)()
    }
}

/// A wait's rules, sans I/O: from a look's answer and the time, how long
/// to sleep before looking again, or that the wait is over.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// `None`: a wait too long to have one (it ends by other means).
    deadline: Option<Instant>,
    recheck: Duration,
    ends_early: bool,
}

impl Pace {
    /// A wait of `wait` from now that re-checks on its own at least every
    /// `recheck` (the safety net under the watcher's wake-ups).
    pub fn new(wait: Duration, recheck: Duration, ends_early: bool) -> Pace {
        Pace::starting(Instant::now(), wait, recheck, ends_early)
    }

    /// [`new`](Self::new) as of `start`.
    pub fn starting(start: Instant, wait: Duration, recheck: Duration, ends_early: bool) -> Pace {
        Pace {
            deadline: start.checked_add(wait),
            recheck,
            ends_early,
        }
    }

    /// How long to sleep before looking again when the next chance comes
    /// in `due` (`None`: at a commit): until the first of the deadline,
    /// `due` and the re-check interval. `None` when the wait is over: the
    /// deadline has passed, or (for a source that ends early) `due` lies
    /// beyond it. A loop takes when its look says now (`Some(ZERO)`) before
    /// asking; after a take that got nothing it asks with the source's
    /// [`retry_in`](Source::retry_in), so that the deadline ends even a
    /// source that keeps saying "now".
    pub fn nap(&self, due: Option<Duration>, now: Instant) -> Option<Duration> {
        let left = match self.deadline {
            Some(d) if now >= d => return None,
            Some(d) => Some(d - now),
            None => None,
        };
        if let (true, Some(due), Some(left)) = (self.ends_early, due, left) {
            if due > left {
                return None;
            }
        }
        let mut nap = self.recheck;
        for bound in [left, due].into_iter().flatten() {
            nap = nap.min(bound);
        }
        Some(nap)
    }
}

#[cfg(feature = "rusqlite")]
impl crate::Database {
    /// Up to `wait` for what `source` takes, blocking this thread between
    /// looks on the file's signal (any process's commit wakes it); `None`
    /// when the wait ran out, ended early (see [`Source::ends_early`]) or
    /// `stop` said so (asked at each wake-up: set it from another thread,
    /// then [`poke`](Self::poke)). A zero wait is one take. `what` names the
    /// call in the refusal inside [`without_waiting`](crate::without_waiting).
    pub fn wait_for<S: Source + ?Sized>(
        &self,
        source: &S,
        wait: Duration,
        stop: &dyn Fn() -> bool,
        what: &str,
    ) -> Result<Option<S::Item>> {
        if wait.is_zero() {
            return if stop() { Ok(None) } else { source.take() };
        }
        crate::connection::refuse_waiting(what)?;
        let pace = Pace::new(wait, self.recheck_interval(), source.ends_early());
        let signal = self.wait_signal()?;
        loop {
            let seen = signal.generation();
            if stop() {
                return Ok(None);
            }
            let mut due = source.look()?;
            if due == Some(Duration::ZERO) {
                if let Some(got) = source.take()? {
                    return Ok(Some(got));
                }
                due = source.retry_in();
            }
            let now = Instant::now();
            let Some(nap) = pace.nap(due, now) else {
                return Ok(None);
            };
            signal.wait_past(seen, now + nap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn sleeps_until_the_first_of_deadline_due_and_recheck() {
        let t = Instant::now();
        let p = Pace::starting(t, 10 * S, 3 * S, false);
        assert_eq!(p.nap(None, t), Some(3 * S));
        assert_eq!(p.nap(Some(2 * S), t), Some(2 * S));
        assert_eq!(p.nap(None, t + 8 * S), Some(2 * S));
        assert_eq!(p.nap(Some(20 * S), t + 9 * S), Some(S));
        assert_eq!(p.nap(None, t + 10 * S), None);
        assert_eq!(p.nap(Some(S), t + 11 * S), None);
    }

    #[test]
    fn a_source_that_ends_early_ends_when_its_time_is_beyond_the_deadline() {
        let t = Instant::now();
        let p = Pace::starting(t, 5 * S, 30 * S, true);
        assert_eq!(p.nap(Some(6 * S), t), None);
        assert_eq!(p.nap(Some(5 * S), t), Some(5 * S));
        assert_eq!(p.nap(Some(2 * S), t + 4 * S), None);
        // Only a commit can bring it: no time to compare, so it sleeps.
        assert_eq!(p.nap(None, t), Some(5 * S));
    }

    #[test]
    fn a_wait_too_long_for_a_deadline_never_ends_by_time() {
        let t = Instant::now();
        let p = Pace::starting(t, Duration::MAX, 2 * S, true);
        assert_eq!(p.nap(None, t + 1000 * S), Some(2 * S));
        assert_eq!(p.nap(Some(S), t), Some(S));
    }

    #[test]
    fn now_is_no_sleep_and_the_deadline_still_ends_it() {
        let t = Instant::now();
        let p = Pace::starting(t, 10 * S, 3 * S, false);
        assert_eq!(p.nap(Some(Duration::ZERO), t), Some(Duration::ZERO));
        assert_eq!(p.nap(None, t + 9 * S), Some(S));
        assert_eq!(p.nap(Some(Duration::ZERO), t + 10 * S), None);
    }
}
