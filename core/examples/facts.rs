//! Prints the language-neutral facts every surface mirrors, as JSON, for
//! `scripts/facts.py` (which writes them into each binding's tables and
//! checks them in CI): the stable error codes and the job states, in core's
//! order, the records of `honker::records!` (name, docs, and each
//! field's name, wire type and docs, in declaration order), and the
//! defaults of `honker::defaults` (a duration's value in ms).

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
    let defaults: Vec<serde_json::Value> = honker::defaults::ALL
        .iter()
        .map(|d| {
            let (kind, value) = match d.value {
                honker::defaults::Value::Duration(v) => ("duration", v.as_millis() as i64),
                honker::defaults::Value::U32(n) => ("u32", i64::from(n)),
                honker::defaults::Value::I64(n) => ("i64", n),
            };
            serde_json::json!({ "name": d.name, "kind": kind, "value": value, "doc": d.doc.trim().trim_end_matches('.') })
        })
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "error_codes": codes,
            "job_states": states,
            "records": records,
            "defaults": defaults,
        })
    );
}
