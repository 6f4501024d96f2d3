//! The queue's part of retention: one bounded batch of finished records or
//! results past their lifetime. `maintenance` decides when and how many
//! batches (each in its own short write transaction); this decides what.

use super::statements::{PRUNE_FINISHED, PRUNE_RESULTS};
use crate::error::Result;
use crate::raw::{params, Conn};

/// The finished states retention prunes, with their retention setting.
pub(crate) const FINISHED: [&str; 4] = ["dead", "cancelled", "expired", "completed"];

/// Deletes up to `batch` finished records in `state` that finished before
/// `before` (ms); returns how many.
pub(crate) fn prune_finished(
    conn: Conn<'_>,
    state: &str,
    before: i64,
    batch: usize,
) -> Result<usize> {
    conn.prepare_cached(PRUNE_FINISHED)?
        .execute(params![state, before, batch as i64])
}

/// Deletes up to `batch` saved results older than `before` (ms), and up to
/// `batch` expired at `now`; returns how many.
pub(crate) fn prune_results(conn: Conn<'_>, before: i64, now: i64, batch: usize) -> Result<usize> {
    conn.prepare_cached(PRUNE_RESULTS)?
        .execute(params![before, batch as i64, now])
}
