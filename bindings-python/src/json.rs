//! Python values to payloads, encoded in Rust.
//!
//! A payload is bytes-like (`bytes`, `bytearray`, `memoryview`: stored as a
//! BLOB) or anything `json.dumps` takes. The JSON types (dict with str keys,
//! list, tuple, str, int, float, bool, None, and their subclasses where
//! `json` treats them as the base type) are written here, which is several
//! times faster than calling `json.dumps` per payload (the W1/W2
//! benchmarks). Anything else — other dict key types, big ints, nesting
//! deeper than [`MAX_DEPTH`], objects `json` rejects — goes to the `json`
//! module itself, so its results and its errors are exactly `json.dumps`'s.
//!
//! The text is compact (`separators=(",", ":")`, `ensure_ascii=False`). A
//! float that JSON cannot represent (nan, inf) is an `InvalidArgument`
//! either way: here directly, through `json` by core's JSON check.

use std::fmt::Write;

use honker::Payload;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple,
};

use crate::errors::invalid;

/// Deeper values go to `json`, which also detects cycles.
const MAX_DEPTH: usize = 64;

/// `obj` as a payload.
pub(crate) fn payload_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Payload> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Payload::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Payload::Bytes(b.to_vec()));
    }
    if obj.is_instance_of::<PyMemoryView>() {
        let b = obj.call_method0("tobytes")?;
        return Ok(Payload::Bytes(b.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    let mut out = String::with_capacity(64);
    if write(obj, &mut out, 0)? {
        Ok(Payload::Json(out))
    } else {
        with_json_module(obj).map(Payload::Json)
    }
}

/// `json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode(obj)`.
fn with_json_module(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    static ENCODE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = obj.py();
    let encode = ENCODE.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("separators", (",", ":"))?;
        kwargs.set_item("ensure_ascii", false)?;
        kwargs.set_item("allow_nan", false)?;
        let encoder = py
            .import("json")?
            .getattr("JSONEncoder")?
            .call((), Some(&kwargs))?;
        Ok(encoder.getattr("encode")?.unbind())
    })?;
    // What JSON cannot hold is InvalidArgument, as everywhere: a type json
    // cannot encode (a set, an object: json's TypeError, which it was until
    // issue 53), a float JSON cannot hold deep down or a cycle (its
    // ValueError), a value nested past the interpreter's recursion limit.
    match encode.bind(py).call1((obj,)) {
        Ok(text) => text.extract(),
        Err(e)
            if e.is_instance_of::<PyValueError>(py)
                || e.is_instance_of::<pyo3::exceptions::PyTypeError>(py)
                || e.is_instance_of::<pyo3::exceptions::PyRecursionError>(py) =>
        {
            Err(invalid(format!("payload cannot be JSON: {}", e.value(py))))
        }
        Err(e) => Err(e),
    }
}

/// Appends `obj` as JSON; `Ok(false)` (with `out` in any state) when `obj`
/// holds something this writer leaves to the `json` module.
fn write(obj: &Bound<'_, PyAny>, out: &mut String, depth: usize) -> PyResult<bool> {
    if depth > MAX_DEPTH {
        return Ok(false);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        write_str(&s.to_cow()?, out);
    } else if obj.is_none() {
        out.push_str("null");
    } else if let Ok(b) = obj.cast::<PyBool>() {
        out.push_str(if b.is_true() { "true" } else { "false" });
    } else if let Ok(i) = obj.cast::<PyInt>() {
        match i.extract::<i64>() {
            Ok(v) => {
                let _ = write!(out, "{v}");
            }
            Err(_) => return Ok(false),
        }
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        let v = f.value();
        if !v.is_finite() {
            return Err(invalid(format!(
                "payload holds the float {v}, which JSON cannot represent"
            )));
        }
        // Rust's shortest round-trip form, like Python's repr ("1e16"
        // where Python writes "1e+16": the same number).
        let _ = write!(out, "{v:?}");
    } else if let Ok(d) = obj.cast::<PyDict>() {
        out.push('{');
        for (i, (k, v)) in d.iter().enumerate() {
            let Ok(k) = k.cast::<PyString>() else {
                return Ok(false);
            };
            if i > 0 {
                out.push(',');
            }
            write_str(&k.to_cow()?, out);
            out.push(':');
            if !write(&v, out, depth + 1)? {
                return Ok(false);
            }
        }
        out.push('}');
    } else if let Ok(l) = obj.cast::<PyList>() {
        return write_array(l.iter(), out, depth);
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        return write_array(t.iter(), out, depth);
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// A list or tuple as a JSON array; see [`write`].
fn write_array<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    out: &mut String,
    depth: usize,
) -> PyResult<bool> {
    out.push('[');
    for (i, v) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        if !write(&v, out, depth + 1)? {
            return Ok(false);
        }
    }
    out.push(']');
    Ok(true)
}

/// A JSON string: quotes, backslashes and control characters escaped as
/// `json` escapes them; everything else as is.
fn write_str(s: &str, out: &mut String) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}
