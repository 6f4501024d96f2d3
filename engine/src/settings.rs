//! The settings every process must see (ADR 15 rule 6): rows of
//! `_honker_settings (scope, name, key, value)`, e.g. a stream's retention.
//! A missing row means "the documented default"; a NULL value means "no
//! limit".

use crate::error::Result;
use crate::raw::{params, Conn};

const GET: &str = "
SELECT value FROM _honker_settings WHERE scope = ?1 AND name = ?2 AND key = ?3";

const SET: &str = "
INSERT INTO _honker_settings (scope, name, key, value, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (scope, name, key) DO UPDATE
SET value = excluded.value, updated_at = excluded.updated_at";

/// An integer setting: `None` when unset (use the default), `Some(None)`
/// when set to "no limit".
pub fn get_int(conn: Conn<'_>, scope: &str, name: &str, key: &str) -> Result<Option<Option<i64>>> {
    conn.prepare_cached(GET)?
        .query_row(params![scope, name, key], |r| r.get::<Option<i64>>(0))
}

/// Sets an integer setting (`None`: no limit).
pub fn set_int(
    conn: Conn<'_>,
    scope: &str,
    name: &str,
    key: &str,
    value: Option<i64>,
    now: i64,
) -> Result<()> {
    conn.prepare_cached(SET)?
        .execute(params![scope, name, key, value, now])?;
    Ok(())
}

const ALL: &str = "
SELECT key, value FROM _honker_settings WHERE scope = ?1 AND name = ?2";

const CLEAR: &str = "
DELETE FROM _honker_settings WHERE scope = ?1 AND name = ?2";

/// Every integer setting of (`scope`, `name`), by key.
pub fn get_all(conn: Conn<'_>, scope: &str, name: &str) -> Result<Vec<(String, Option<i64>)>> {
    conn.prepare_cached(ALL)?
        .query_map(params![scope, name], |r| Ok((r.get(0)?, r.get(1)?)))
}

/// Removes every setting of (`scope`, `name`): the defaults again.
pub fn clear(conn: Conn<'_>, scope: &str, name: &str) -> Result<()> {
    conn.prepare_cached(CLEAR)?.execute(params![scope, name])?;
    Ok(())
}
