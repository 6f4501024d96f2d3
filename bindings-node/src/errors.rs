//! Errors cross as data: a call that fails resolves to a `Failure` object
//! (`{ honkerError: true, code, message }`) instead of rejecting, so the JS
//! layer (index.js, the one place that maps errors) can raise the right
//! class from the stable code without reading message text. (napi-rs gives a
//! rejected promise only a fixed set of status codes.)

use std::time::Duration;

use napi::bindgen_prelude::Either;
use napi_derive::napi;

/// A failed call.
#[napi(object)]
pub struct Failure {
    /// Always true: tells a failure from a result.
    pub honker_error: bool,
    /// The stable error code (`LEASE_LOST`, ...).
    pub code: String,
    pub message: String,
}

/// A call's value or its failure.
pub type Out<T> = Either<T, Failure>;

pub(crate) fn failure(e: &honker::Error) -> Failure {
    Failure {
        honker_error: true,
        code: e.code().to_owned(),
        message: e.message().to_owned(),
    }
}

pub(crate) fn out<T>(r: honker::Result<T>) -> Out<T> {
    match r {
        Ok(v) => Either::A(v),
        Err(e) => Either::B(failure(&e)),
    }
}

/// The marker code of a fast-path call that would have had to wait.
pub(crate) const WOULD_WAIT: &str = "WOULD_WAIT";

/// Runs a short core call right here on the JS thread, but only if it needs
/// no waiting (`honker::without_waiting`): where it would wait it changes
/// nothing and reports `WOULD_WAIT`, and the JS layer runs the async form.
/// Uncontended calls so skip two thread hops (measured: bench/node).
pub(crate) fn now<T>(op: impl FnOnce() -> honker::Result<T>) -> Out<T> {
    match honker::without_waiting(op) {
        Err(e) if e.kind() == honker::ErrorKind::Busy => Either::B(Failure {
            honker_error: true,
            code: WOULD_WAIT.to_owned(),
            message: e.message().to_owned(),
        }),
        r => out(r),
    }
}

/// Runs a blocking core call on tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> honker::Result<T> + Send + 'static,
) -> napi::Result<Out<T>> {
    napi::tokio::task::spawn_blocking(f)
        .await
        .map(out)
        .map_err(|e| napi::Error::from_reason(format!("INTERNAL: a honker call panicked: {e}")))
}

pub(crate) fn invalid(message: impl Into<String>) -> honker::Error {
    honker::Error::new(honker::ErrorKind::InvalidArgument, message)
}

/// Milliseconds from JS as a `Duration`: finite, not negative, and within
/// core's limit (checked by core's validator, as every binding does).
pub(crate) fn ms(what: &str, v: f64) -> honker::Result<Duration> {
    honker::validate::millis(what, v)
}

pub(crate) fn opt_ms(what: &str, v: Option<f64>) -> honker::Result<Option<Duration>> {
    v.map(|v| ms(what, v)).transpose()
}
