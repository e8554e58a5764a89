// `[lints] workspace = true` cannot be combined with a crate-local
// `[lints.rust.unexpected_cfgs]` table, so the `cfg(loom)` used by the model
// checked build is declared here instead.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}
