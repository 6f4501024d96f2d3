//! uniffi-bindgen at exactly the workspace's uniffi version, so the
//! generated Swift always matches the scaffolding compiled into
//! libhonker_swift (scripts/swift-bindgen.sh runs it).
fn main() {
    uniffi::uniffi_bindgen_main()
}
