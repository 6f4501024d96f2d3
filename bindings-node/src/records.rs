//! The records of core's `honker::records!` table as napi objects: the
//! emitter below writes each one's struct and its `From` the core type.
//! Names cross as camelCase (`run_at_ms` is `runAtMs`); `u64` counts cross
//! as JS numbers (`i64`: napi has no plain-number `u64`); a payload is JSON
//! text or a Buffer; a job state its code.

use honker::surface::Wire;
use napi::bindgen_prelude::{Buffer, Either};
use napi_derive::napi;

/// A payload: JSON text or bytes.
pub type PayloadIo = Either<String, Buffer>;

pub(crate) fn payload_in(p: PayloadIo) -> honker::Payload {
    match p {
        Either::A(s) => honker::Payload::Json(s),
        Either::B(b) => honker::Payload::Bytes(b.to_vec()),
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
