//! Prints the language-neutral facts every surface mirrors, as JSON, for
//! `scripts/facts.py` (which writes them into each binding's tables and
//! checks them in CI): the stable error codes and the job states, in core's
//! order, and the records of `honker::records!` (name, docs, and each
//! field's name, wire type and docs, in declaration order).

macro_rules! describe {
    ($(
        $(#[doc = $rdoc:literal])*
        $name:ident from $core:path {
            $( $(#[doc = $fdoc:literal])* $field:ident : [$($ty:tt)*] = $($src:ident).+ ),* $(,)?
        }
    )*) => {
        vec![$(
            serde_json::json!({
                "name": stringify!($name),
                "doc": ([$($rdoc),*] as [&str; _]).join("\n"),
                "fields": [$(
                    {
                        "name": stringify!($field),
                        "type": (stringify!($($ty)*).replace(' ', "")),
                        "doc": ([$($fdoc),*] as [&str; _]).join("\n"),
                    }
                ),*],
            })
        ),*]
    };
}

fn main() {
    let codes: Vec<&str> = honker::ErrorKind::ALL.iter().map(|k| k.code()).collect();
    let states: Vec<&str> = honker::JobState::ALL.iter().map(|s| s.as_str()).collect();
    let records: Vec<serde_json::Value> = honker::records!(describe);
    println!(
        "{}",
        serde_json::json!({ "error_codes": codes, "job_states": states, "records": records })
    );
}
