//! Prints the language-neutral facts every surface mirrors, as JSON, for
//! `scripts/facts.py` (which writes them into each binding's tables and
//! checks them in CI): the stable error codes and the job states, in core's
//! order, the records of `honker::records!` (name, docs, and each
//! field's name, wire type and docs, in declaration order), the verbs'
//! options of `honker::options!` (the same, with the verb's arguments,
//! return type and flags), and the
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

macro_rules! describe_options {
    ($(
        $(#[doc = $vdoc:literal])*
        $noun:ident . $verb:ident ($($arg:ident),*) -> [$($ret:tt)*] with $name:ident into $core:path [$($flag:ident)*] {
            $( $(#[doc = $fdoc:literal])* $field:ident : [$($ty:tt)*] = $src:ident ),* $(,)?
        }
    )*) => {
        vec![$(
            serde_json::json!({
                "noun": stringify!($noun),
                "verb": stringify!($verb),
                "args": ([$(stringify!($arg)),*] as [&str; _]),
                "returns": (stringify!($($ret)*).replace(' ', "")),
                "record": stringify!($name),
                "flags": ([$(stringify!($flag)),*] as [&str; _]),
                "doc": ([$($vdoc),*] as [&str; _]).join("\n"),
                "fields": [$(
                    {
                        "name": stringify!($field),
                        "type": (stringify!($($ty)*).replace(' ', "")),
                        "doc": ([$($fdoc),*] as [&str; _]).join("\n"),
                        // Core's default, as Rust's Debug writes it: None, 0, "text".
                        "default": format!("{:?}", <$core>::default().$src),
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
    let options: Vec<serde_json::Value> = honker::options!(describe_options);
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
            "options": options,
            "defaults": defaults,
        })
    );
}
