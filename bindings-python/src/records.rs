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

/// The input records of core's `honker::options!` table: each verb's
/// options cross as one tuple in the table's field order (the package's
/// generated signatures build it, after checking each value), `None` for a
/// field not given.
macro_rules! option_records {
    (@extract $(
        $(#[doc = $vdoc:literal])*
        $noun:ident . $verb:ident ($($arg:ident),*) -> [$($ret:tt)*] with $name:ident into $core:path [$($flag:ident)*] {
            $($body:tt)*
        }
    )*) => {$(
        option_records!(@extract_one $name { $($body)* });
    )*};
    // An entry that takes an earlier entry's record: extracted once.
    (@extract_one $name:ident {}) => {};
    (@extract_one $name:ident {
        $( $(#[doc = $fdoc:literal])* $field:ident : [$($ty:tt)*] = $src:ident ),* $(,)?
    }) => {
        impl<'a, 'py> FromPyObject<'a, 'py> for $name {
            type Error = PyErr;

            fn extract(ob: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
                const N: usize = [$(stringify!($field)),*].len();
                let t = ob.cast::<PyTuple>()?;
                if t.len() != N {
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "{} takes a tuple of {N} options, got {}",
                        stringify!($name),
                        t.len()
                    )));
                }
                #[allow(unused_mut, unused_variables)]
                let mut items = t.iter();
                Ok($name {
                    $( $field: items.next().expect("length checked").extract()?, )*
                })
            }
        }
    };
    ($($table:tt)*) => {
        honker::option_structs! { [#[derive(Debug)]] [] seconds $($table)* }
        option_records!(@extract $($table)*);
    };
}

honker::options!(option_records);
