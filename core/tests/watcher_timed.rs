//! watcher_idle.rs's cases on the timed path that platforms without
//! inotify take (`HONKER_WATCHER=portable`: Apple's fallback, forced here),
//! where other connections' commits are seen by a slow timed check.

#![cfg(target_os = "linux")]

#[path = "common/watcher.rs"]
mod watcher;

const FORCE_TIMED_PATH: bool = true;

include!("common/watcher_cases.rs");
