//! Ships the SQLite loadable extension (`extension/`, libhonker_ext) inside
//! the Python package, for `honker.load_extension(conn)`.
//!
//! The extension cannot be part of this build: it links SQLite through the
//! host's function table, which must not be unified with the bundled SQLite
//! this crate uses. So it is built by its own cargo invocation (its own
//! workspace and target directory), or taken from `HONKER_EXT` when the
//! caller has built it already (scripts/test.sh does), and copied, without
//! its debug info, into this build script's OUT_DIR: maturin puts it into
//! the wheel from there (`from = "out-dir"` in pyproject.toml). Nothing is
//! written into the source tree.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    let suffix = match env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("macos") => "dylib",
        Ok("windows") => "dll",
        _ => "so",
    };
    println!("cargo:rerun-if-env-changed=HONKER_EXT");
    for dir in [
        "extension/src",
        "extension/sqlite3",
        "extension/Cargo.toml",
        "core/src",
        "core/Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }

    let built = match env::var_os("HONKER_EXT") {
        Some(p) => {
            let p = with_suffix(PathBuf::from(p), suffix);
            println!("cargo:rerun-if-changed={}", p.display());
            p
        }
        None => build_extension(&root, suffix),
    };
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let dest = out.join(format!("libhonker_ext.{suffix}"));
    // Copied without its debug info (the release profile keeps `debug = 1`
    // for backtraces during development; the wheel does not need it). Where
    // there is no `strip`, or the wheel is for another machine (this
    // machine's strip may not know its format: scripts/release.sh passes
    // extensions it stripped with llvm-strip), it is copied as it is.
    let native = env::var("TARGET").ok() == env::var("HOST").ok();
    let stripped = native
        && Command::new("strip")
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
    let ext = root.join("extension");
    if !ext.join("Cargo.toml").is_file() {
        panic!(
            "honker: the SQL extension's sources ({}) are missing, so libhonker_ext cannot be \
             built into the package. Build from a complete source distribution or checkout, or \
             set HONKER_EXT to a libhonker_ext built already (the release download \
             honker-ext-<version>-linux-x64.tar.gz has one).",
            ext.display()
        );
    }
    // OUT_DIR is <target>/<profile>/build/<pkg>/out: build next to it, in a
    // target directory of its own (the outer build holds its own lock).
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let target = out
        .ancestors()
        .nth(4)
        .map(|t| t.join("honker-ext"))
        .unwrap_or_else(|| out.join("honker-ext"));
    // bindgen (in libsqlite3-sys) reads SQLite's API with libclang, loaded at
    // run time. Looked for here the same way (clang-sys, which bindgen uses),
    // so that a machine without it gets this message at once instead of a
    // panic deep in another crate's build script.
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");
    if let Err(e) = clang_sys::load() {
        panic!(
            "honker: building the SQL extension (libhonker_ext) needs libclang, which bindgen \
             loads to read SQLite's API from extension/sqlite3/, and it was not found ({e}). \
             Install it (Debian/Ubuntu: apt install libclang-dev; Fedora: dnf install \
             clang-devel; Alpine: apk add clang-dev; macOS: xcode-select --install) or point \
             LIBCLANG_PATH at the directory that holds libclang; or set HONKER_EXT to a \
             libhonker_ext built already (the release download \
             honker-ext-<version>-linux-x64.tar.gz has one). Nothing else is missing: SQLite's \
             headers come with these sources."
        );
    }
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // SQLite's API comes from the headers in extension/sqlite3/ (see
    // .cargo/config.toml, which a source distribution does not carry).
    let headers = ext.join("sqlite3");
    let output = Command::new(cargo)
        .args(["build", "--release", "--locked", "--manifest-path"])
        .arg(ext.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .env("SQLITE3_INCLUDE_DIR", &headers)
        .env("SQLITE3_LIB_DIR", &headers)
        // Not this build's flags and features: the extension is its own
        // workspace.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo to build the SQL extension");
    if !output.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        panic!(
            "honker: building the SQL extension (libhonker_ext) failed: cargo's messages are above"
        );
    }
    target.join(format!("release/libhonker_ext.{suffix}"))
}
