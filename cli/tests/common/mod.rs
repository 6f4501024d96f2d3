//! What the CLI's test files share: running the binary, reading a file's
//! bytes, and checking a `--json` output against its schema in
//! cli/schemas/ (a checker for the subset the schemas use: type, enum,
//! properties, required, additionalProperties, items).

#![allow(dead_code)] // each test file uses its own part

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value as Json};

pub fn honker(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_honker"))
        .args(args)
        .output()
        .expect("run honker")
}

pub fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

pub fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Every way `v` breaks `schema`, each with where (`$.a[0].b`).
pub fn schema_errors(schema: &Json, v: &Json, at: &str, out: &mut Vec<String>) {
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Json::String(s) => vec![s.as_str()],
            Json::Array(a) => a.iter().filter_map(Json::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            out.push(format!("{at}: {v} is not {types:?}"));
            return;
        }
    }
    if let Some(Json::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(v) {
            out.push(format!("{at}: {v} is not one of {allowed:?}"));
        }
    }
    if let (Some(Json::Object(props)), Json::Object(obj)) = (schema.get("properties"), v) {
        for r in schema["required"].as_array().into_iter().flatten() {
            let key = r.as_str().unwrap();
            if !obj.contains_key(key) {
                out.push(format!("{at}: missing {key}"));
            }
        }
        for (k, x) in obj {
            match props.get(k) {
                Some(s) => schema_errors(s, x, &format!("{at}.{k}"), out),
                None if schema["additionalProperties"] == json!(false) => {
                    out.push(format!("{at}: {k} is not in the schema"))
                }
                None => {}
            }
        }
    }
    if let (Some(items), Json::Array(list)) = (schema.get("items"), v) {
        for (i, x) in list.iter().enumerate() {
            schema_errors(items, x, &format!("{at}[{i}]"), out);
        }
    }
}

/// `v` against cli/schemas/NAME.schema.json; panics with every error.
pub fn conforms(name: &str, v: &Json) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schemas/{name}.schema.json"));
    let schema: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut errors = Vec::new();
    schema_errors(&schema, v, "$", &mut errors);
    assert!(errors.is_empty(), "{name}: {errors:#?}\n{v:#}");
}
