//! Options given as a JSON object: the traits the options table implements
//! for each verb's core options (`surface.rs`), here below the primitives so
//! that their SQL functions can read their `options` argument by it.

/// Options given as a JSON object (a SQL function's `options` argument, an
/// interop step's): each verb's core options read by the same table, so an
/// option added there is taken here too. Unknown names, and values of the
/// wrong type, are `INVALID_ARGUMENT`, naming `what` and the option.
pub trait FromJsonOptions: Sized {
    /// The options of the JSON object text `text`.
    fn from_json_options(what: &str, text: &str) -> crate::Result<Self>;
}

/// One option's value from JSON, by its wire type.
pub trait JsonOption: Sized {
    /// `v` as this type, or `None` when it is not one.
    fn from_json(v: &serde_json::Value) -> Option<Self>;
    /// What a value must be ("text", "an integer of 32 bits").
    const MUST_BE: &'static str;
}

impl JsonOption for String {
    fn from_json(v: &serde_json::Value) -> Option<Self> {
        v.as_str().map(str::to_owned)
    }
    const MUST_BE: &'static str = "text";
}

impl JsonOption for i32 {
    fn from_json(v: &serde_json::Value) -> Option<Self> {
        v.as_i64().and_then(|n| i32::try_from(n).ok())
    }
    const MUST_BE: &'static str = "an integer of 32 bits";
}

impl JsonOption for u32 {
    fn from_json(v: &serde_json::Value) -> Option<Self> {
        v.as_u64().and_then(|n| u32::try_from(n).ok())
    }
    const MUST_BE: &'static str = "a non-negative integer of 32 bits";
}

impl JsonOption for i64 {
    fn from_json(v: &serde_json::Value) -> Option<Self> {
        v.as_i64()
    }
    const MUST_BE: &'static str = "an integer";
}
