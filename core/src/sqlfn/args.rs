//! Argument access for the SQL functions, with coded errors naming the
//! function and the argument.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::payload::Payload;
use crate::raw::ValueRef;
use crate::validate;

/// Argument access with coded errors naming the function and argument.
pub(crate) struct Args<'a> {
    pub(crate) args: &'a [ValueRef<'a>],
    pub(crate) name: &'a str,
}

impl Args<'_> {
    pub(crate) fn len(&self) -> usize {
        self.args.len()
    }

    pub(crate) fn count(&self, min: usize, max: usize) -> Result<()> {
        let n = self.len();
        if n < min || n > max {
            return Err(Error::invalid(format!(
                "{} takes {min} to {max} arguments, got {n}",
                self.name
            )));
        }
        Ok(())
    }

    pub(crate) fn raw(&self, i: usize) -> ValueRef<'_> {
        self.args.get(i).copied().unwrap_or(ValueRef::Null)
    }

    pub(crate) fn text(&self, i: usize, what: &str) -> Result<&str> {
        self.opt_text(i, what)?
            .ok_or_else(|| Error::invalid(format!("{}: {what} must not be NULL", self.name)))
    }

    pub(crate) fn opt_text(&self, i: usize, what: &str) -> Result<Option<&str>> {
        match self.raw(i) {
            ValueRef::Null => Ok(None),
            ValueRef::Text(t) => std::str::from_utf8(t)
                .map(Some)
                .map_err(|_| Error::invalid(format!("{}: {what} is not UTF-8", self.name))),
            _ => Err(Error::invalid(format!(
                "{}: {what} must be text",
                self.name
            ))),
        }
    }

    pub(crate) fn name(&self, i: usize) -> Result<&str> {
        let q = self.text(i, "queue")?;
        validate::name("queue", q)?;
        Ok(q)
    }

    pub(crate) fn payload(&self, i: usize) -> Result<Payload> {
        match self.raw(i) {
            ValueRef::Text(t) => std::str::from_utf8(t)
                .map(|s| Payload::Json(s.to_owned()))
                .map_err(|_| Error::invalid("payload is not UTF-8")),
            ValueRef::Blob(b) => Ok(Payload::Bytes(b.to_vec())),
            ValueRef::Null => Err(Error::invalid(format!(
                "{}: payload must not be NULL",
                self.name
            ))),
            _ => Err(Error::invalid(format!(
                "{}: payload must be JSON text or a BLOB",
                self.name
            ))),
        }
    }

    pub(crate) fn opt_int(&self, i: usize, what: &str) -> Result<Option<i64>> {
        match self.raw(i) {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(n) => Ok(Some(n)),
            _ => Err(Error::invalid(format!(
                "{}: {what} must be an integer",
                self.name
            ))),
        }
    }

    /// An integer, or a REAL holding a whole number (better-sqlite3 and
    /// other JavaScript drivers bind every number as REAL): Honker's forms
    /// accept both.
    pub(crate) fn opt_whole(&self, i: usize, what: &str) -> Result<Option<i64>> {
        match self.raw(i) {
            ValueRef::Real(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
            _ => self.opt_int(i, what),
        }
    }

    pub(crate) fn whole(&self, i: usize, what: &str) -> Result<i64> {
        self.opt_whole(i, what)?
            .ok_or_else(|| Error::invalid(format!("{}: {what} must not be NULL", self.name)))
    }

    /// A finite number (integer or REAL), of any sign.
    pub(crate) fn opt_number(&self, i: usize, what: &str) -> Result<Option<f64>> {
        match self.raw(i) {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(n) => Ok(Some(n as f64)),
            ValueRef::Real(f) if f.is_finite() => Ok(Some(f)),
            _ => Err(Error::invalid(format!(
                "{}: {what} must be a finite number",
                self.name
            ))),
        }
    }

    /// An optional argument: NULL when absent.
    pub(crate) fn has(&self, i: usize) -> bool {
        i < self.len()
    }

    /// A duration in milliseconds (our forms), integer or REAL.
    pub(crate) fn opt_ms(&self, i: usize, what: &str) -> Result<Option<Duration>> {
        let ms = match self.raw(i) {
            ValueRef::Null => return Ok(None),
            ValueRef::Integer(n) => n as f64,
            ValueRef::Real(f) => f,
            _ => {
                return Err(Error::invalid(format!(
                    "{}: {what} must be a number of milliseconds",
                    self.name
                )))
            }
        };
        validate::millis(what, ms).map(Some)
    }

    pub(crate) fn int(&self, i: usize, what: &str) -> Result<i64> {
        self.opt_int(i, what)?
            .ok_or_else(|| Error::invalid(format!("{}: {what} must not be NULL", self.name)))
    }

    pub(crate) fn opt_seconds(&self, i: usize, what: &str) -> Result<Option<f64>> {
        let s = match self.raw(i) {
            ValueRef::Null => return Ok(None),
            ValueRef::Integer(n) => n as f64,
            ValueRef::Real(f) => f,
            _ => {
                return Err(Error::invalid(format!(
                    "{}: {what} must be a number of seconds",
                    self.name
                )))
            }
        };
        validate::seconds(what, s)?;
        Ok(Some(s))
    }
}
