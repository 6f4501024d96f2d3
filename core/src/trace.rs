//! W3C trace context (<https://www.w3.org/TR/trace-context/>) carried by a
//! job or a stream event from its producer to its handler (ADR 28).
//!
//! The producer's context is stored in the row's own `trace_context` column,
//! never inside the payload, as the JSON object the W3C headers make:
//! `{"traceparent": "00-…", "tracestate": "…"}` (`tracestate` only when there
//! is one). That is the carrier OpenTelemetry's propagators read and write,
//! so any SQL reader can pass it on too.
//!
//! Python's and Node's bindings capture it at enqueue and publish from the
//! active OpenTelemetry span (when the OpenTelemetry API is installed) and the
//! worker runtimes restore it around the handler. Rust and Swift callers give
//! it explicitly ([`EnqueueOptions::trace_context`](crate::EnqueueOptions)).
//!
//! A value given by a caller is checked (`INVALID_ARGUMENT`); a stored value
//! that is not a valid context (a row written by hand) reads as none rather
//! than failing the claim that meets it: tracing is advice, the job is not.

use crate::error::{Error, Result};
use crate::raw::{FromSql, ValueRef};

/// The longest `tracestate` accepted, in bytes. W3C asks platforms to pass
/// on at least 512 characters and lets them drop list members beyond that;
/// honker keeps up to its 32 members of the longest allowed form.
pub const MAX_TRACESTATE: usize = 8192;

/// A W3C trace context: the `traceparent` header and, optionally, the
/// `tracestate` header.
///
/// ```
/// let tc = honker::TraceContext::new(
///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
///     Some("congo=t61rcWkgMzE"),
/// )?;
/// assert_eq!(tc.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert_eq!(tc.span_id(), "00f067aa0ba902b7");
/// assert!(tc.sampled());
/// # Ok::<(), honker::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
}

impl TraceContext {
    /// Checks and wraps a `traceparent` (version `00`, or a later version's
    /// first four fields as W3C asks) and an optional `tracestate` (printable
    /// ASCII, up to [`MAX_TRACESTATE`] bytes; an empty one counts as none).
    /// Anything else is `INVALID_ARGUMENT`.
    pub fn new(traceparent: &str, tracestate: Option<&str>) -> Result<TraceContext> {
        check_traceparent(traceparent)?;
        let tracestate = match tracestate {
            Some(s) if !s.trim().is_empty() => {
                check_tracestate(s)?;
                Some(s.to_owned())
            }
            _ => None,
        };
        Ok(TraceContext {
            traceparent: traceparent.to_owned(),
            tracestate,
        })
    }

    /// From the headers a caller may or may not have: none without a
    /// `traceparent`; a `tracestate` alone is `INVALID_ARGUMENT`.
    pub fn from_headers(
        traceparent: Option<&str>,
        tracestate: Option<&str>,
    ) -> Result<Option<TraceContext>> {
        match (traceparent, tracestate) {
            (Some(p), s) => TraceContext::new(p, s).map(Some),
            (None, Some(_)) => Err(Error::invalid("tracestate was given without a traceparent")),
            (None, None) => Ok(None),
        }
    }

    /// The `traceparent` header.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace id: 32 lower-case hex digits.
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The producer's span id (W3C's parent id): 16 lower-case hex digits.
    pub fn span_id(&self) -> &str {
        &self.traceparent[36..52]
    }

    /// Whether the producer sampled the trace (flag bit 0).
    pub fn sampled(&self) -> bool {
        u8::from_str_radix(&self.traceparent[53..55], 16).is_ok_and(|f| f & 1 == 1)
    }

    /// The JSON object of the W3C headers (`tracestate` only when there is
    /// one): what the SQL functions' JSON holds.
    pub fn to_value(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("traceparent".into(), self.traceparent.clone().into());
        if let Some(s) = &self.tracestate {
            m.insert("tracestate".into(), s.clone().into());
        }
        serde_json::Value::Object(m)
    }

    /// The stored form: [`to_value`](Self::to_value) as text.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// Reads the stored form; `None` for anything that is not a valid
    /// context.
    pub fn from_json(s: &str) -> Option<TraceContext> {
        let v: serde_json::Value = serde_json::from_str(s).ok()?;
        let parent = v.get("traceparent")?.as_str()?;
        let state = match v.get("tracestate") {
            None | Some(serde_json::Value::Null) => None,
            Some(s) => Some(s.as_str()?),
        };
        TraceContext::new(parent, state).ok()
    }
}

fn lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn bad(what: &str) -> Error {
    Error::invalid(format!(
        "traceparent must be W3C's version-traceid-parentid-flags \
         (\"00-\" then 32 and 16 lower-case hex digits, not all zero, and \"-01\" or \
         \"-00\"): {what}"
    ))
}

fn check_traceparent(s: &str) -> Result<()> {
    let b = s.as_bytes();
    if b.len() < 55 {
        return Err(bad(&format!("{} bytes, fewer than 55", b.len())));
    }
    if !b[..55].is_ascii() {
        return Err(bad("it is not ASCII"));
    }
    if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
        return Err(bad("a field separator is missing"));
    }
    let (version, trace, parent, flags) = (&s[0..2], &s[3..35], &s[36..52], &s[53..55]);
    if !(lower_hex(version) && lower_hex(trace) && lower_hex(parent) && lower_hex(flags)) {
        return Err(bad("a field is not lower-case hex"));
    }
    if version == "ff" {
        return Err(bad("version ff is invalid"));
    }
    if version == "00" && b.len() != 55 {
        return Err(bad("version 00 has exactly 55 bytes"));
    }
    if b.len() > 55 && (b[55] != b'-' || b.len() > 512 || !s.is_ascii()) {
        return Err(bad("a later version's extra fields are malformed"));
    }
    if trace.bytes().all(|c| c == b'0') {
        return Err(bad("the trace id is all zeros"));
    }
    if parent.bytes().all(|c| c == b'0') {
        return Err(bad("the parent id is all zeros"));
    }
    Ok(())
}

fn check_tracestate(s: &str) -> Result<()> {
    if s.len() > MAX_TRACESTATE {
        return Err(Error::invalid(format!(
            "tracestate is {} bytes, over the limit of {MAX_TRACESTATE}",
            s.len()
        )));
    }
    if !s.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(Error::invalid(
            "tracestate must be printable ASCII (W3C's list-members)",
        ));
    }
    Ok(())
}

/// A stored `trace_context` column, read leniently: NULL, or anything that
/// is not a valid context, is none.
#[derive(Debug, Default)]
pub(crate) struct Stored(pub Option<TraceContext>);

impl FromSql for Stored {
    fn from_sql(v: ValueRef<'_>) -> std::result::Result<Stored, &'static str> {
        Ok(Stored(match v {
            ValueRef::Text(t) => std::str::from_utf8(t)
                .ok()
                .and_then(TraceContext::from_json),
            _ => None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::TraceContext;
    use crate::ErrorKind;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn accepts_w3c_examples_and_round_trips() {
        let tc = TraceContext::new(GOOD, Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")).unwrap();
        assert_eq!(TraceContext::from_json(&tc.to_json()), Some(tc.clone()));
        let none = TraceContext::new(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            Some(""),
        )
        .unwrap();
        assert!(!none.sampled());
        assert_eq!(none.tracestate(), None);
        assert_eq!(
            none.to_json(),
            r#"{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}"#
        );
        // A later version: its first four fields are kept.
        let later = format!("cc{}-what-the-future-holds", &GOOD[2..]);
        assert_eq!(
            TraceContext::new(&later, None).unwrap().trace_id(),
            &GOOD[3..35]
        );
    }

    #[test]
    fn refuses_what_w3c_refuses() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é",
        ] {
            let e = TraceContext::new(bad, None).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
        for state in ["a=b\n", &"x".repeat(super::MAX_TRACESTATE + 1)] {
            let e = TraceContext::new(GOOD, Some(state)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        }
        for stored in [
            "",
            "{}",
            "[1]",
            r#"{"traceparent":1}"#,
            r#"{"traceparent":"00-x"}"#,
        ] {
            assert_eq!(TraceContext::from_json(stored), None, "{stored}");
        }
    }
}
