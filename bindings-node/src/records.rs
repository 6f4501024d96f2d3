//! The records of core's `honker::records!` table as napi objects: the
//! emitter below writes each one's struct and its `From` the core type.
//! Names cross as camelCase (`run_at_ms` is `runAtMs`); `u64` counts cross
//! as JS numbers (`i64`: napi has no plain-number `u64`); a payload is JSON
//! text or a Buffer; a job state its code.

use honker::surface::Wire;
use napi::bindgen_prelude::{Buffer, Either, Either4, Float64Array, Null};
use napi_derive::napi;

/// A payload: JSON text or bytes.
pub type PayloadIo = Either<String, Buffer>;

pub(crate) fn payload_in(p: PayloadIo) -> honker::Payload {
    match p {
        Either::A(s) => honker::Payload::Json(s),
        Either::B(b) => honker::Payload::Bytes(b.to_vec()),
    }
}

/// A batch's payloads: a list of JSON texts and Buffers, or, when every one
/// is JSON text, those texts joined by newlines (`convert.js`'s `packed`).
/// napi reads a list element by element: 1,000 payloads took 0.23-0.6 ms
/// on the JS thread as a list, 0.13 ms packed, the join included (W2).
/// `JSON.stringify`'s output never holds a raw newline (it escapes control
/// characters), and core checks each text as JSON.
pub type Payloads = Either<String, Vec<PayloadIo>>;

pub(crate) fn payloads_in(p: Payloads) -> Vec<honker::Payload> {
    match p {
        Either::A(joined) => joined
            .split('\n')
            .map(|text| honker::Payload::Json(text.to_owned()))
            .collect(),
        Either::B(list) => list.into_iter().map(payload_in).collect(),
    }
}

/// Integers of a batch (ids, offsets) as one `Float64Array`: a JS array is
/// built element by element, a typed array in one copy. Exact up to 2^53,
/// as any JS number.
pub(crate) fn numbers(v: impl IntoIterator<Item = i64>) -> Float64Array {
    Float64Array::new(v.into_iter().map(|n| n as f64).collect())
}

/// What `enqueueMany` resolves to: the jobs' ids in order, the indexes of
/// those whose dedupe key was held (`existing`) and the mode that acted on
/// each of those (`unique`), so that 1,000 records cross as one typed array
/// (`convert.js`'s `enqueuedBatch`).
#[napi(object)]
pub struct EnqueuedBatch {
    pub ids: Float64Array,
    pub existing: Vec<u32>,
    pub unique: Vec<String>,
}

impl EnqueuedBatch {
    pub(crate) fn new(done: Vec<honker::Enqueued>) -> EnqueuedBatch {
        let (mut existing, mut unique) = (Vec::new(), Vec::new());
        for (i, e) in done.iter().enumerate() {
            if let Some(mode) = e.unique {
                existing.push(i as u32);
                unique.push(mode.as_str().to_owned());
            }
        }
        EnqueuedBatch {
            ids: numbers(done.iter().map(|e| e.id)),
            existing,
            unique,
        }
    }
}

pub(crate) fn payload_out(p: honker::Payload) -> PayloadIo {
    match p {
        honker::Payload::Json(s) => Either::A(s),
        honker::Payload::Bytes(b) => Either::B(b.into()),
    }
}

/// Expands each record of the table, one field at a time (napi's type
/// definitions read the struct before any macro in it is expanded, so
/// `u64` is rewritten to `i64`, and `Payload` to `PayloadIo`, here rather
/// than through a type macro).
macro_rules! emit {
    ($(
        $(#[doc = $rdoc:literal])*
        $name:ident from $core:path { $($fields:tt)* }
    )*) => {$(
        emit!(@fields v [$(#[doc = $rdoc])*] $name $core [] [] $($fields)*);
    )*};
    (@fields $v:ident [$($rdoc:tt)*] $name:ident $core:path [$($decl:tt)*] [$($conv:tt)*]) => {
        $($rdoc)*
        #[napi(object)]
        pub struct $name { $($decl)* }

        impl From<$core> for $name {
            fn from($v: $core) -> Self {
                $name { $($conv)* }
            }
        }
    };
    (@fields $v:ident $rdoc:tt $name:ident $core:path [$($decl:tt)*] [$($conv:tt)*]
        $(#[doc = $fdoc:literal])* $field:ident : [u64] = $($src:ident).+ , $($rest:tt)*) => {
        emit!(@fields $v $rdoc $name $core
            [$($decl)* $(#[doc = $fdoc])* pub $field: i64,]
            [$($conv)* $field: Wire::wire($v.$($src).+),]
            $($rest)*);
    };
    (@fields $v:ident $rdoc:tt $name:ident $core:path [$($decl:tt)*] [$($conv:tt)*]
        $(#[doc = $fdoc:literal])* $field:ident : [Payload] = $($src:ident).+ , $($rest:tt)*) => {
        emit!(@fields $v $rdoc $name $core
            [$($decl)* $(#[doc = $fdoc])* pub $field: PayloadIo,]
            [$($conv)* $field: payload_out($v.$($src).+),]
            $($rest)*);
    };
    (@fields $v:ident $rdoc:tt $name:ident $core:path [$($decl:tt)*] [$($conv:tt)*]
        $(#[doc = $fdoc:literal])* $field:ident : [$($ty:tt)*] = $($src:ident).+ , $($rest:tt)*) => {
        emit!(@fields $v $rdoc $name $core
            [$($decl)* $(#[doc = $fdoc])* pub $field: $($ty)*,]
            [$($conv)* $field: Wire::wire($v.$($src).+),]
            $($rest)*);
    };
}

honker::records!(emit);

/// One field of a claimed job, for `ClaimedJob::cells`.
pub type Cell = Either4<i64, String, Buffer, Null>;

impl ClaimedJob {
    /// The fields in the record table's order (index.js's generated
    /// `claimedJobAt` reads them back): a claim returns its jobs as one flat
    /// array, because napi builds an object property by property at about
    /// 1.8k instructions each, and an array element by element for a tenth of
    /// that (ADR 29).
    pub fn cells(self, out: &mut Vec<Cell>) {
        let payload = match self.payload {
            Either::A(s) => Either4::B(s),
            Either::B(b) => Either4::C(b),
        };
        out.extend([
            Either4::A(self.id),
            payload,
            Either4::A(self.attempts.into()),
            Either4::A(self.max_attempts.into()),
            Either4::A(self.priority.into()),
            Either4::A(self.run_at_ms),
            Either4::A(self.created_at_ms),
            Either4::A(self.lease_expires_at_ms),
            Either4::B(self.token),
            self.trace_context.map_or(Either4::D(Null), Either4::B),
        ]);
    }
}

// The input records of core's options table (`EnqueueArgs`, `PublishArgs`,
// ...), as napi objects: each field optional, `to_core` the core options
// (durations and times in ms).
macro_rules! option_records {
    ($($table:tt)*) => {
        honker::option_structs! { [#[napi(object)] #[derive(Default)]] [] ms $($table)* }
    };
}
honker::options!(option_records);
