//! napi-rs link setup (Node's symbols are resolved when the addon loads).
fn main() {
    napi_build::setup();
}
