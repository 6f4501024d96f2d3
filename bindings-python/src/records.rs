//! The records of core's `honker::records!` table as Python tuples, in the
//! table's field order (tuples: a claimed batch costs no dicts). The
//! package's wrappers (`Job`, `JobInfo`, `QueueStats`, ...) unpack them in
//! blocks that `scripts/facts.py` writes from the same table. A payload is
//! JSON text (`str`) or `bytes`; a job state its code.

use honker::surface::Wire;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::IntoPyObjectExt as _;

/// A payload as Python sees it: `str` (JSON text) or `bytes`.
#[derive(Debug, IntoPyObject)]
pub enum Payload {
    Json(String),
    Bytes(Vec<u8>),
}

impl From<honker::Payload> for Payload {
    fn from(p: honker::Payload) -> Payload {
        match p {
            honker::Payload::Json(s) => Payload::Json(s),
            honker::Payload::Bytes(b) => Payload::Bytes(b),
        }
    }
}

impl Wire<Payload> for honker::Payload {
    fn wire(self) -> Payload {
        self.into()
    }
}

macro_rules! emit {
    ($($table:tt)*) => {
        honker::record_structs! { [#[derive(Debug)]] $($table)* }
    };
}

/// Each record into Python as the tuple of its fields, in table order.
macro_rules! tuples {
    ($(
        $(#[doc = $rdoc:literal])*
        $name:ident from $core:path {
            $( $(#[doc = $fdoc:literal])* $field:ident : [$($ty:tt)*] = $($src:ident).+ ),* $(,)?
        }
    )*) => {$(
        impl<'py> IntoPyObject<'py> for $name {
            type Target = PyTuple;
            type Output = Bound<'py, PyTuple>;
            type Error = PyErr;

            fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                PyTuple::new(py, [$( self.$field.into_bound_py_any(py)? ),*])
            }
        }
    )*};
}

honker::records!(emit);
honker::records!(tuples);
