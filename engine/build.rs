// The one C function of honker's lock layer (src/ofd.rs): a variadic fcntl
// trampoline, built only where that layer exists (Linux, with the bundled
// SQLite of the `bundled` feature).
fn main() {
    println!("cargo:rerun-if-changed=csrc/ofd_fcntl.c");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let bundled = std::env::var_os("CARGO_FEATURE_BUNDLED").is_some();
    if linux && bundled {
        cc::Build::new()
            .file("csrc/ofd_fcntl.c")
            .compile("honker_ofd");
    }
}
