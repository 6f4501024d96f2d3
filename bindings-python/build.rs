//! Ships the SQLite loadable extension (`extension/`, libhonker_ext) inside
//! the Python package, for `honker.load_extension(conn)`.
//!
//! The extension cannot be part of this build: it links SQLite through the
//! host's function table, which must not be unified with the bundled SQLite
//! this crate uses. So it is built by its own cargo invocation (its own
//! workspace and target directory), or taken from `HONKER_EXT` when the
//! caller has built it already (scripts/test.sh does), and copied next to
//! the Python sources, where maturin puts it into the wheel.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    let suffix = if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        "dylib"
    } else {
        "so"
    };
    println!("cargo:rerun-if-env-changed=HONKER_EXT");
    for dir in [
        "extension/src",
        "extension/Cargo.toml",
        "core/src",
        "core/Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }

    let built = match env::var_os("HONKER_EXT") {
        Some(p) => with_suffix(PathBuf::from(p), suffix),
        None => build_extension(&root, suffix),
    };
    let dest = manifest.join(format!("python/honker/libhonker_ext.{suffix}"));
    // Copied without its debug info (the release profile keeps `debug = 1`
    // for backtraces during development; the wheel does not need it). Where
    // there is no `strip`, it is copied as it is.
    let stripped = Command::new("strip")
        .arg("--strip-unneeded")
        .arg("-o")
        .arg(&dest)
        .arg(&built)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        std::fs::copy(&built, &dest).unwrap_or_else(|e| {
            panic!(
                "copying the extension {} to {}: {e}",
                built.display(),
                dest.display()
            )
        });
    }
}

fn with_suffix(p: PathBuf, suffix: &str) -> PathBuf {
    if p.exists() {
        p
    } else {
        p.with_extension(suffix)
    }
}

fn build_extension(root: &Path, suffix: &str) -> PathBuf {
    // OUT_DIR is <target>/<profile>/build/<pkg>/out: build next to it, in a
    // target directory of its own (the outer build holds its own lock).
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let target = out
        .ancestors()
        .nth(4)
        .map(|t| t.join("honker-ext"))
        .unwrap_or_else(|| out.join("honker-ext"));
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--locked", "--manifest-path"])
        .arg(root.join("extension/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        // Not this build's flags and features: the extension is its own
        // workspace.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .status()
        .expect("run cargo to build the SQLite extension");
    assert!(
        status.success(),
        "building the SQLite extension failed (it needs libclang-dev and libsqlite3-dev)"
    );
    target.join(format!("release/libhonker_ext.{suffix}"))
}
