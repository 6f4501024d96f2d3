//! The records of core's `honker::records!` table as UniFFI records, written
//! by core's `record_structs!` (each struct and its `From` the core type).
//! Names cross as camelCase (`run_at_ms` is `runAtMs`); a payload is the
//! `Payload` enum (database.rs); a job state its code. The input records of
//! `honker::options!` follow.

use honker::surface::Wire;

use crate::database::Payload;

impl Wire<Payload> for honker::Payload {
    fn wire(self) -> Payload {
        self.into()
    }
}

macro_rules! emit {
    ($($table:tt)*) => {
        honker::record_structs! { [#[derive(Debug, uniffi::Record)]] $($table)* }
    };
}

honker::records!(emit);

/// The input records of core's `honker::options!` table (each verb's
/// options, every field optional), which the package's generated overloads
/// build.
macro_rules! option_records {
    ($($table:tt)*) => {
        honker::option_structs! { [#[derive(Debug, uniffi::Record)]] [] seconds $($table)* }
    };
}

honker::options!(option_records);
