//! Errors cross as data: a call that fails resolves to a `Failure` object
//! (`{ honkerError: true, code, message }`) instead of rejecting, so the JS
//! layer (index.js, the one place that maps errors) can raise the right
//! class from the stable code without reading message text. (napi-rs gives a
//! rejected promise only a fixed set of status codes.)

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use napi::bindgen_prelude::{AsyncBlock, AsyncBlockBuilder, Either, ToNapiValue};
use napi::Env;
use napi_derive::napi;

/// A failed call.
#[napi(object)]
pub struct Failure {
    /// Always true: tells a failure from a result.
    pub honker_error: bool,
    /// The stable error code (`LEASE_LOST`, ...).
    pub code: String,
    pub message: String,
    /// `TRIMMED`: how many events or notifications the reader missed.
    pub missed: Option<i64>,
}

/// A call's value or its failure.
pub type Out<T> = Either<T, Failure>;

pub(crate) fn failure(e: &honker::Error) -> Failure {
    Failure {
        honker_error: true,
        code: e.code().to_owned(),
        message: e.message().to_owned(),
        missed: e.missed().map(|n| n as i64),
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
            missed: None,
        }),
        r => out(r),
    }
}

fn panicked(e: napi::tokio::task::JoinError) -> napi::Error {
    napi::Error::from_reason(format!("INTERNAL: a honker call panicked: {e}"))
}

/// Runs `op` on tokio's blocking pool and returns its Promise, as an
/// `async fn` awaiting `spawn_blocking(op)` would, without a future type of
/// the method's own: napi's and tokio's generic code (a tokio task,
/// its harness, the deferred's resolver) is instantiated once per result
/// type instead of once per method, about 10 KB each (Cargo.toml's note on
/// the addon's size).
pub(crate) fn pending<T: Send + 'static>(env: &Env, op: Op<T>) -> napi::Result<AsyncBlock<Out<T>>>
where
    Out<T>: ToNapiValue,
{
    AsyncBlockBuilder::new(OnPool::Start(Some(op))).build(env)
}

/// A blocking call's future: spawned on the blocking pool when first polled
/// (inside napi's tokio runtime; the JS thread that builds it has none).
enum OnPool<T> {
    Start(Option<Op<T>>),
    Running(napi::tokio::task::JoinHandle<honker::Result<T>>),
}

impl<T: Send + 'static> Future for OnPool<T> {
    type Output = napi::Result<Out<T>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Never pinned in place: the join handle is Unpin, the op a Box.
        let this = &mut *self;
        if let OnPool::Start(op) = this {
            let op = op.take().expect("polled after it started");
            *this = OnPool::Running(napi::tokio::task::spawn_blocking(op));
        }
        let OnPool::Running(handle) = this else {
            unreachable!("started above")
        };
        Pin::new(handle)
            .poll(cx)
            .map(|r| r.map(out).map_err(panicked))
    }
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

/// A blocking core call with its arguments, ready to run on any thread.
pub(crate) type Op<T> = Box<dyn FnOnce() -> honker::Result<T> + Send>;

/// Exports each verb of `impl Type` twice from its one `*_op` (declared
/// once, in the table): `verb` runs it on tokio's blocking pool and returns
/// a Promise (`pending`); `tryVerb` runs it on the JS thread without
/// waiting and reports `WOULD_WAIT` where it would (`now`). index.js picks
/// between them. The caller imports `pending`, `now`, `Out` and napi's
/// `AsyncBlock` and `Env`.
// Docs are `#[doc = "..."]` literals in the table: napi's type definitions
// misread doc comments passed through a macro.
macro_rules! verbs {
    (impl $type:ident; $(
        $(#[$doc:meta])*
        $verb:ident / $try_verb:ident ($($arg:ident: $ty:ty),*) -> $out:ty = $op:ident;
    )*) => {
        #[napi]
        impl $type {
            $(
                $(#[$doc])*
                #[napi]
                pub fn $verb(&self, env: Env, $($arg: $ty),*) -> napi::Result<AsyncBlock<Out<$out>>> {
                    pending(&env, self.$op($($arg),*))
                }

                #[napi]
                pub fn $try_verb(&self, $($arg: $ty),*) -> Out<$out> {
                    now(self.$op($($arg),*))
                }
            )*
        }
    };
}
pub(crate) use verbs;
