//! Input checks shared by the Rust API, the bindings and the SQL functions, so
//! that one bad call gets one error code on every surface. Each returns
//! `INVALID_ARGUMENT` with a message naming the argument, never its content
//! beyond its size.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::options::limits;

/// A queue (or other object) name: 1 to 128 bytes, no control characters.
pub fn name(kind: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(format!("{kind} name must not be empty")));
    }
    if name.len() > limits::MAX_QUEUE_NAME {
        return Err(Error::invalid(format!(
            "{kind} name is {} bytes, over the limit of {}",
            name.len(),
            limits::MAX_QUEUE_NAME
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "{kind} name must not contain control characters"
        )));
    }
    Ok(())
}

/// A worker id or dedupe key: 1 to 512 bytes.
pub fn key(what: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(format!("{what} must not be empty")));
    }
    key_or_empty(what, value)
}

/// A rate limit's key: up to 512 bytes, empty being the limiter's own.
pub fn key_or_empty(what: &str, value: &str) -> Result<()> {
    if value.len() > limits::MAX_KEY {
        return Err(Error::invalid(format!(
            "{what} is {} bytes, over the limit of {}",
            value.len(),
            limits::MAX_KEY
        )));
    }
    Ok(())
}

/// A batch size from a language whose integers may be negative.
pub fn batch(n: i64) -> Result<usize> {
    batch_named("batch size", n)
}

/// A count with a batch's bounds (1 to the batch limit), named in the
/// error: a worker's `concurrency` (told as "batch size" until issue 53).
pub fn batch_named(what: &str, n: i64) -> Result<usize> {
    let max = limits::MAX_BATCH as i64;
    if n <= 0 || n > max {
        return Err(Error::invalid(format!(
            "{what} must be between 1 and {max}, got {n}"
        )));
    }
    Ok(n as usize)
}

/// A batch size already unsigned.
pub(crate) fn batch_usize(n: usize) -> Result<usize> {
    batch_named_usize("batch size", n)
}

/// [`batch_named`] for a count already unsigned.
pub(crate) fn batch_named_usize(what: &str, n: usize) -> Result<usize> {
    batch_named(what, i64::try_from(n).unwrap_or(i64::MAX))
}

/// A duration given in (possibly fractional) seconds: finite, not negative,
/// at most 100 years.
pub fn seconds(what: &str, secs: f64) -> Result<Duration> {
    duration(what, secs, "seconds", "s", 1.0)
}

/// A duration given in (possibly fractional) milliseconds, the unit of the
/// Node and Swift surfaces: the same rules as [`seconds`], told in ms.
pub fn millis(what: &str, ms: f64) -> Result<Duration> {
    duration(what, ms, "milliseconds", "ms", 1000.0)
}

fn duration(what: &str, v: f64, unit: &str, abbr: &str, per_sec: f64) -> Result<Duration> {
    if !v.is_finite() || v < 0.0 {
        return Err(Error::invalid(format!(
            "{what} must be a finite, non-negative number of {unit}, got {v}"
        )));
    }
    let max = limits::MAX_DELAY.as_secs_f64() * per_sec;
    if v > max {
        return Err(Error::invalid(format!(
            "{what} of {v} {abbr} is over the limit of {max} {abbr}"
        )));
    }
    Ok(Duration::from_secs_f64(v / per_sec))
}

/// A timestamp in ms since the Unix epoch: not negative.
pub fn timestamp_ms(what: &str, ms: i64) -> Result<i64> {
    if ms < 0 {
        return Err(Error::invalid(format!(
            "{what} must be a time after 1970 (ms since the Unix epoch), got {ms}"
        )));
    }
    Ok(ms)
}

/// A count (a retention's `max_count`) from a language whose integers may
/// be negative: not negative (its own range is checked where it is used).
pub fn count(what: &str, n: i64) -> Result<u64> {
    u64::try_from(n).map_err(|_| Error::invalid(format!("{what} must not be negative, got {n}")))
}

/// A job id: positive.
pub fn job_id(id: i64) -> Result<i64> {
    if id <= 0 {
        return Err(Error::invalid(format!("job id must be positive, got {id}")));
    }
    Ok(id)
}

/// A delay as a Duration: at most 100 years.
pub(crate) fn delay(what: &str, d: Duration) -> Result<i64> {
    if d > limits::MAX_DELAY {
        return Err(Error::invalid(format!(
            "{what} of {} is over the limit of {} s",
            crate::options::human(d),
            limits::MAX_DELAY.as_secs()
        )));
    }
    Ok(crate::clock::duration_ms(d))
}

/// A lease length: 1 ms to 24 hours.
pub(crate) fn lease(d: Duration) -> Result<i64> {
    crate::options::in_range("lease", d, Duration::from_millis(1), limits::MAX_LEASE)?;
    Ok(crate::clock::duration_ms(d))
}

/// Cuts an error message to at most 4 KiB, at a character boundary.
pub(crate) fn clip_error(s: &str) -> &str {
    if s.len() <= limits::MAX_ERROR {
        return s;
    }
    let mut end = limits::MAX_ERROR;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn rejects_bad_numbers() {
        for n in [0, -1, i64::MIN, 10_001] {
            assert_eq!(batch(n).unwrap_err().kind(), ErrorKind::InvalidArgument);
        }
        assert_eq!(batch(32).unwrap(), 32);
        for s in [f64::NAN, -0.5, f64::INFINITY, 1e12] {
            assert_eq!(
                seconds("delay", s).unwrap_err().kind(),
                ErrorKind::InvalidArgument
            );
        }
        assert_eq!(seconds("delay", 1.5).unwrap(), Duration::from_millis(1500));
        assert!(timestamp_ms("run_at", -1).is_err());
        assert!(job_id(0).is_err());
    }

    #[test]
    fn names_and_keys() {
        assert!(name("queue", "").is_err());
        assert!(name("queue", &"x".repeat(129)).is_err());
        assert!(name("queue", "a\nb").is_err());
        assert!(name("queue", "emails").is_ok());
        assert!(key("worker id", "").is_err());
        assert!(key("worker id", &"w".repeat(513)).is_err());
    }

    #[test]
    fn clip_keeps_char_boundaries() {
        let s = "é".repeat(3000);
        let c = clip_error(&s);
        assert!(c.len() <= limits::MAX_ERROR);
        assert!(c.chars().all(|ch| ch == 'é'));
    }
}
