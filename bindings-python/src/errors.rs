//! The one place where core errors become Python exceptions. The classes
//! live in `honker/errors.py` (so `InvalidArgument` can also be a
//! `ValueError`); each is looked up by the error's stable code.

use pyo3::prelude::*;

/// The exception for `err`: `honker.errors.<Class>(code, message)`.
pub(crate) fn to_py(err: honker::Error) -> PyErr {
    Python::attach(|py| {
        let class = py
            .import("honker.errors")
            .and_then(|m| m.getattr("class_for_code"))
            .and_then(|f| f.call1((err.code(),)));
        let exc = class.and_then(|c| c.call1((err.code(), err.message())));
        let exc = match (exc, err.missed()) {
            (Ok(e), Some(n)) => e.setattr("missed", n).map(|()| e),
            (exc, _) => exc,
        };
        match exc {
            Ok(exc) => PyErr::from_value(exc),
            Err(e) => e,
        }
    })
}

/// `Result<T, honker::Error>` → `PyResult<T>`.
pub(crate) trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for honker::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// An `InvalidArgument` raised by the binding itself (a value Python types
/// cannot rule out, checked before anything is written).
pub(crate) fn invalid(message: impl Into<String>) -> PyErr {
    to_py(honker::Error::new(
        honker::ErrorKind::InvalidArgument,
        message,
    ))
}
