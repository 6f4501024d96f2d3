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

/// `v` written compactly with object keys sorted and whole numbers without
/// a fraction: one text per JSON value.
pub fn canonical_json(v: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, k).expect("a string writes to a Vec");
                out.push(b':');
                canonical_json(&m[k], out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(x, out);
            }
            out.push(b']');
        }
        Value::Number(n) => match n.as_f64() {
            // 2^53: every whole f64 below it is an exact integer.
            Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 9.007e15 => {
                out.extend_from_slice((f as i64).to_string().as_bytes());
            }
            _ => out.extend_from_slice(n.to_string().as_bytes()),
        },
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

impl Payload {
    /// One text per value: the kind's tag (`j` JSON, `b` bytes) and the
    /// canonical JSON of its value ([`canonical_json`]: keys in any order,
    /// any spacing, `10` and `10.0` alike) or its bytes. `None` for JSON
    /// text that does not parse (no write stores one: each validates it).
    /// What the digests of stream idempotency and payload keys are of.
    pub fn canonical(&self) -> Option<(u8, std::borrow::Cow<'_, [u8]>)> {
        match self {
            Payload::Json(t) => {
                let v = serde_json::from_str::<serde_json::Value>(t).ok()?;
                let mut canonical = Vec::with_capacity(t.len());
                canonical_json(&v, &mut canonical);
                Some((b'j', canonical.into()))
            }
            Payload::Bytes(b) => Some((b'b', b.as_slice().into())),
        }
    }

    /// A digest of the payload's value, the same in every process, language
    /// and version: of its [`canonical`](Self::canonical) form (of its text
    /// for JSON that does not parse); 32 hex digits of FNV-1a over 128
    /// bits. It tells payloads apart; it is not made to resist one crafted
    /// to collide.
    pub fn fingerprint(&self) -> String {
        const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
        let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
        let (tag, bytes) = match (self.canonical(), self) {
            (Some(c), _) => c,
            (None, Payload::Json(t)) => (b't', t.as_bytes().into()),
            (None, Payload::Bytes(b)) => (b'b', b.as_slice().into()),
        };
        for &b in std::iter::once(&tag).chain(bytes.iter()) {
            h ^= u128::from(b);
            h = h.wrapping_mul(PRIME);
        }
        format!("{h:032x}")
    }
}

impl Payload {
    /// JSON text, checked to be valid JSON.
    pub fn json_text(text: impl Into<String>) -> Result<Payload> {
        let p = Payload::Json(text.into());
        p.validate(usize::MAX)?;
        Ok(p)
    }

    /// Serialises `value` to JSON. A float that JSON cannot hold (NaN,
    /// ±infinity) anywhere in it is refused with `INVALID_ARGUMENT`, where
    /// `serde_json` alone would write `null`. (A `serde_json::Value` cannot
    /// hold one: `json!(f64::NAN)` is already `null` when it is built.)
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Payload> {
        value
            .serialize(FiniteFloats)
            .map_err(|e| Error::invalid(e.0))?;
        serde_json::to_string(value)
            .map(Payload::Json)
            .map_err(|e| Error::invalid(format!("payload cannot be serialised to JSON: {e}")))
    }

    /// Checks size and (for JSON) syntax. Error messages never quote the
    /// payload itself.
    pub fn validate(&self, max_bytes: usize) -> Result<()> {
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

/// A serializer that writes nothing and fails at the first float JSON cannot
/// hold (see [`Payload::from_serialize`]).
struct FiniteFloats;

#[derive(Debug)]
struct NotFinite(String);

impl std::fmt::Display for NotFinite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFinite {}

impl serde::ser::Error for NotFinite {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        NotFinite(format!("payload cannot be serialised to JSON: {msg}"))
    }
}

fn finite(v: f64) -> std::result::Result<(), NotFinite> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(NotFinite(format!(
            "payload holds the float {v}, which JSON cannot represent"
        )))
    }
}

macro_rules! finite_ok {
    ($($name:ident: $t:ty),*) => {
        $(fn $name(self, _: $t) -> std::result::Result<(), NotFinite> { Ok(()) })*
    };
}

impl serde::Serializer for FiniteFloats {
    type Ok = ();
    type Error = NotFinite;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    finite_ok!(serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16,
        serialize_u32: u32, serialize_u64: u64, serialize_u128: u128, serialize_char: char,
        serialize_str: &str, serialize_bytes: &[u8], serialize_unit_struct: &'static str);

    fn serialize_f32(self, v: f32) -> std::result::Result<(), NotFinite> {
        finite(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> std::result::Result<(), NotFinite> {
        finite(v)
    }
    fn serialize_none(self) -> std::result::Result<(), NotFinite> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> std::result::Result<(), NotFinite> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> std::result::Result<(), NotFinite> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> std::result::Result<(), NotFinite> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> std::result::Result<(), NotFinite> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        v: &T,
    ) -> std::result::Result<(), NotFinite> {
        v.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> std::result::Result<Self, NotFinite> {
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> std::result::Result<Self, NotFinite> {
        Ok(self)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<Self, NotFinite> {
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<Self, NotFinite> {
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> std::result::Result<Self, NotFinite> {
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> std::result::Result<Self, NotFinite> {
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<Self, NotFinite> {
        Ok(self)
    }
}

macro_rules! finite_compound {
    ($($tr:ident :: $m:ident),*) => {$(
        impl serde::ser::$tr for FiniteFloats {
            type Ok = ();
            type Error = NotFinite;
            fn $m<T: Serialize + ?Sized>(&mut self, v: &T) -> std::result::Result<(), NotFinite> {
                v.serialize(FiniteFloats)
            }
            fn end(self) -> std::result::Result<(), NotFinite> {
                Ok(())
            }
        }
    )*};
}

finite_compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl serde::ser::SerializeMap for FiniteFloats {
    type Ok = ();
    type Error = NotFinite;
    fn serialize_key<T: Serialize + ?Sized>(
        &mut self,
        k: &T,
    ) -> std::result::Result<(), NotFinite> {
        k.serialize(FiniteFloats)
    }
    fn serialize_value<T: Serialize + ?Sized>(
        &mut self,
        v: &T,
    ) -> std::result::Result<(), NotFinite> {
        v.serialize(FiniteFloats)
    }
    fn end(self) -> std::result::Result<(), NotFinite> {
        Ok(())
    }
}

macro_rules! finite_fields {
    ($($tr:ident),*) => {$(
        impl serde::ser::$tr for FiniteFloats {
            type Ok = ();
            type Error = NotFinite;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                _: &'static str,
                v: &T,
            ) -> std::result::Result<(), NotFinite> {
                v.serialize(FiniteFloats)
            }
            fn end(self) -> std::result::Result<(), NotFinite> {
                Ok(())
            }
        }
    )*};
}

finite_fields!(SerializeStruct, SerializeStructVariant);

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

    /// A payload key must stay the same across versions and languages:
    /// these digests were computed apart from this code (FNV-1a 128 over
    /// the tag and the canonical text, in Python).
    #[test]
    fn fingerprints_are_fnv_128_of_the_canonical_form() {
        let json = Payload::Json(r#"{ "b": [1, 2.0], "a": 1.0 }"#.into());
        assert_eq!(json.fingerprint(), "a7f0098d3929bcaab2ee1885dc1f3aee");
        let bytes = Payload::Bytes(vec![1, 2, 3]);
        assert_eq!(bytes.fingerprint(), "69877f44ce757277b806e97dd3517633");
        assert_eq!(
            json.canonical().unwrap(),
            (b'j', br#"{"a":1,"b":[1,2]}"#.as_slice().into())
        );
        assert_eq!(Payload::Json("{".into()).canonical(), None);
    }

    #[test]
    fn from_serialize_refuses_floats_json_cannot_hold() {
        #[derive(serde::Serialize)]
        struct Order {
            id: u32,
            totals: Vec<(String, f64)>,
            discount: Option<f32>,
        }
        let ok = Order {
            id: 1,
            totals: vec![("eur".into(), 9.5)],
            discount: None,
        };
        assert_eq!(
            Payload::from_serialize(&ok).unwrap(),
            Payload::Json(r#"{"id":1,"totals":[["eur",9.5]],"discount":null}"#.into())
        );
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let order = Order {
                id: 1,
                totals: vec![("eur".into(), bad)],
                discount: None,
            };
            let err = Payload::from_serialize(&order).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
            assert!(
                err.to_string().contains("which JSON cannot represent"),
                "{err}"
            );
        }
        let order = Order {
            id: 1,
            totals: vec![],
            discount: Some(f32::NAN),
        };
        assert!(Payload::from_serialize(&order).is_err());
        let map: std::collections::BTreeMap<&str, f64> = [("x", f64::NAN)].into();
        assert!(Payload::from_serialize(&map).is_err());
    }

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
