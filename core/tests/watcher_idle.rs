//! The watcher sleeps while nobody waits: no wake-ups (on inotify, not even
//! for commits) until a waiter comes, and then it notices a commit made
//! meanwhile at once. The same on the timed path: watcher_timed.rs.

#![cfg(target_os = "linux")]

#[path = "common/watcher.rs"]
mod watcher;

const FORCE_TIMED_PATH: bool = false;

include!("common/watcher_cases.rs");
