//! Child processes for the multi-process tests: the test binary run again
//! with `HONKER_TEST_CHILD` set, its `child_process_entry` test dispatching
//! on it; children report on stdout with `@@ ` lines.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

pub const CHILD_ENV: &str = "HONKER_TEST_CHILD";

pub fn spawn_child(role: &str, path: &std::path::Path, extra: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_process_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, role)
    .env("HONKER_TEST_DB", path)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child")
}

/// Reads the child's stdout until a line containing `@@ `; returns what
/// follows it.
pub fn read_tagged(child: &mut Child) -> String {
    next_tagged(&mut BufReader::new(child.stdout.as_mut().unwrap()))
}

/// The next tagged line's text from a child's stdout (for a reader kept
/// across calls: a `BufReader` may read ahead past one line).
pub fn next_tagged(reader: &mut impl BufRead) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).unwrap();
        assert!(n > 0, "child exited without reporting");
        // The harness may have printed "test child_process_entry ... " first.
        if let Some(at) = line.find("@@ ") {
            return line[at + 3..].trim().to_string();
        }
    }
}

/// Writes a tagged line straight to the process's stdout (the test
/// harness captures `println!`, even in a child).
pub fn report(msg: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "@@ {msg}").unwrap();
    out.flush().unwrap();
}
