//! The one place core errors become Swift's `HonkerError` enum (one case
//! per stable code), plus the unit conversions every export shares.

use std::time::Duration;

/// Every error, by stable code (`LEASE_LOST` is `LeaseLost`, ...).
#[derive(Debug, uniffi::Error)]
pub enum HonkerError {
    Busy { message: String },
    LeaseLost { message: String },
    NotFound { message: String },
    InvalidArgument { message: String },
    SchemaTooNew { message: String },
    Closed { message: String },
    Timeout { message: String },
    RateLimited { message: String },
    Sqlite { message: String },
    Internal { message: String },
    Unsafe { message: String },
    RolledBack { message: String },
}

impl std::fmt::Display for HonkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (code, message) = self.parts();
        write!(f, "{code}: {message}")
    }
}

impl std::error::Error for HonkerError {}

impl HonkerError {
    fn parts(&self) -> (&'static str, &str) {
        use HonkerError as E;
        match self {
            E::Busy { message } => ("BUSY", message),
            E::LeaseLost { message } => ("LEASE_LOST", message),
            E::NotFound { message } => ("NOT_FOUND", message),
            E::InvalidArgument { message } => ("INVALID_ARGUMENT", message),
            E::SchemaTooNew { message } => ("SCHEMA_TOO_NEW", message),
            E::Closed { message } => ("CLOSED", message),
            E::Timeout { message } => ("TIMEOUT", message),
            E::RateLimited { message } => ("RATE_LIMITED", message),
            E::Sqlite { message } => ("SQLITE", message),
            E::Internal { message } => ("INTERNAL", message),
            E::Unsafe { message } => ("UNSAFE", message),
            E::RolledBack { message } => ("ROLLED_BACK", message),
        }
    }
}

impl From<honker::Error> for HonkerError {
    fn from(e: honker::Error) -> HonkerError {
        use honker::ErrorKind as K;
        let message = e.message().to_owned();
        match e.kind() {
            K::Busy => HonkerError::Busy { message },
            K::LeaseLost => HonkerError::LeaseLost { message },
            K::NotFound => HonkerError::NotFound { message },
            K::InvalidArgument => HonkerError::InvalidArgument { message },
            K::SchemaTooNew => HonkerError::SchemaTooNew { message },
            K::Closed => HonkerError::Closed { message },
            K::Timeout => HonkerError::Timeout { message },
            K::RateLimited => HonkerError::RateLimited { message },
            K::Sqlite => HonkerError::Sqlite { message },
            K::Unsafe => HonkerError::Unsafe { message },
            K::RolledBack => HonkerError::RolledBack { message },
            _ => HonkerError::Internal { message },
        }
    }
}

pub(crate) type R<T> = Result<T, HonkerError>;

/// The stable code of an error (`"LEASE_LOST"`, ...).
#[uniffi::export]
pub fn error_code(error: &HonkerError) -> String {
    error.parts().0.to_owned()
}

/// Every stable error code, in core's order.
#[uniffi::export]
pub fn error_codes() -> Vec<String> {
    honker::ErrorKind::ALL
        .iter()
        .map(|k| k.code().to_owned())
        .collect()
}

/// The library version.
#[uniffi::export]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

pub(crate) fn ms(what: &str, v: u64) -> R<Duration> {
    Ok(honker::validate::seconds(what, v as f64 / 1000.0)?)
}

pub(crate) fn opt_ms(what: &str, v: Option<u64>) -> R<Option<Duration>> {
    v.map(|v| ms(what, v)).transpose()
}
