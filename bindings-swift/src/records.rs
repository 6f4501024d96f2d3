//! The records of core's `honker::records!` table as UniFFI records: the
//! emitter below writes each one's struct and its `From` the core type.
//! Names cross as camelCase (`run_at_ms` is `runAtMs`); a payload is the
//! `Payload` enum (database.rs); a job state its code.

use honker::surface::Wire;

use crate::database::Payload;

impl Wire<Payload> for honker::Payload {
    fn wire(self) -> Payload {
        self.into()
    }
}

macro_rules! emit {
    ($(
        $(#[doc = $rdoc:literal])*
        $name:ident from $core:path {
            $( $(#[doc = $fdoc:literal])* $field:ident : [$($ty:tt)*] = $($src:ident).+ ),* $(,)?
        }
    )*) => {$(
        $(#[doc = $rdoc])*
        #[derive(Debug, uniffi::Record)]
        pub struct $name { $( $(#[doc = $fdoc])* pub $field: $($ty)*, )* }

        impl From<$core> for $name {
            fn from(v: $core) -> Self {
                $name { $( $field: Wire::wire(v.$($src).+), )* }
            }
        }
    )*};
}

honker::records!(emit);
