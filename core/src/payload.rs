//! [`Payload`]: what a job (or a result) carries. JSON text by default,
//! validated before it is written; raw bytes where the caller has them.
//!
//! Stored as SQLite TEXT (JSON) or BLOB (bytes), so any SQLite driver reads it
//! back with the right type.

#[cfg(feature = "rusqlite")]
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};
#[cfg(feature = "rusqlite")]
use rusqlite::ToSql;
use serde::de::IgnoredAny;
use serde::{de::DeserializeOwned, Serialize};

use crate::error::{Error, Result};

/// A job payload or result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// JSON text. Validated as JSON when written.
    Json(String),
    /// Opaque bytes.
    Bytes(Vec<u8>),
}

impl Payload {
    /// JSON text, checked to be valid JSON.
    pub fn json_text(text: impl Into<String>) -> Result<Payload> {
        let p = Payload::Json(text.into());
        p.validate(usize::MAX)?;
        Ok(p)
    }

    /// Serialises `value` to JSON.
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Payload> {
        serde_json::to_string(value)
            .map(Payload::Json)
            .map_err(|e| Error::invalid(format!("payload cannot be serialised to JSON: {e}")))
    }

    /// Checks size and (for JSON) syntax. Error messages never quote the
    /// payload itself.
    pub(crate) fn validate(&self, max_bytes: usize) -> Result<()> {
        let len = self.len();
        if len > max_bytes {
            return Err(Error::invalid(format!(
                "payload is {len} bytes, over the limit of {max_bytes} bytes \
                 (store large objects in files and enqueue their path)"
            )));
        }
        if let Payload::Json(text) = self {
            serde_json::from_str::<IgnoredAny>(text).map_err(|e| {
                Error::invalid(format!(
                    "payload is not valid JSON (line {}, column {}: {})",
                    e.line(),
                    e.column(),
                    classify(&e)
                ))
            })?;
        }
        Ok(())
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Json(s) => s.len(),
            Payload::Bytes(b) => b.len(),
        }
    }

    /// Whether the payload is zero bytes long.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The JSON text, if this is JSON.
    pub fn as_json_text(&self) -> Option<&str> {
        match self {
            Payload::Json(s) => Some(s),
            Payload::Bytes(_) => None,
        }
    }

    /// Parses the JSON into a `serde_json::Value`.
    pub fn as_json(&self) -> Result<serde_json::Value> {
        self.deserialize()
    }

    /// Deserialises the JSON into `T`.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T> {
        match self {
            Payload::Json(s) => serde_json::from_str(s).map_err(|e| {
                Error::invalid(format!("payload does not match the requested type: {e}"))
            }),
            Payload::Bytes(_) => Err(Error::invalid("payload is bytes, not JSON")),
        }
    }

    /// The raw bytes (UTF-8 text for JSON).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Payload::Json(s) => s.as_bytes(),
            Payload::Bytes(b) => b,
        }
    }
}

fn classify(e: &serde_json::Error) -> &'static str {
    use serde_json::error::Category;
    match e.classify() {
        Category::Eof => "unexpected end",
        Category::Syntax => "syntax error",
        Category::Data => "invalid data",
        Category::Io => "read error",
    }
}

impl From<serde_json::Value> for Payload {
    fn from(v: serde_json::Value) -> Payload {
        Payload::Json(v.to_string())
    }
}

impl From<&serde_json::Value> for Payload {
    fn from(v: &serde_json::Value) -> Payload {
        Payload::Json(v.to_string())
    }
}

impl From<Vec<u8>> for Payload {
    fn from(b: Vec<u8>) -> Payload {
        Payload::Bytes(b)
    }
}

impl From<&[u8]> for Payload {
    fn from(b: &[u8]) -> Payload {
        Payload::Bytes(b.to_vec())
    }
}

#[cfg(feature = "rusqlite")]
impl ToSql for Payload {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Payload::Json(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Payload::Bytes(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

#[cfg(feature = "rusqlite")]
impl FromSql for Payload {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Payload> {
        match value {
            ValueRef::Text(t) => std::str::from_utf8(t)
                .map(|s| Payload::Json(s.to_owned()))
                .map_err(|e| FromSqlError::Other(Box::new(e))),
            ValueRef::Blob(b) => Ok(Payload::Bytes(b.to_vec())),
            // Written by hand through SQL: keep the number as JSON.
            ValueRef::Integer(i) => Ok(Payload::Json(i.to_string())),
            ValueRef::Real(f) => Ok(Payload::Json(f.to_string())),
            ValueRef::Null => Ok(Payload::Json("null".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn json_is_validated_without_quoting_the_payload() {
        let err = Payload::json_text("{\"secret\": ").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(!err.to_string().contains("secret"));
        assert!(Payload::json_text("\"send-email\"").is_ok());
    }

    #[test]
    fn size_limit_applies_to_bytes_too() {
        let p = Payload::Bytes(vec![0; 11]);
        assert_eq!(
            p.validate(10).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert!(p.validate(11).is_ok());
    }
}
