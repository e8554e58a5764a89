//! Link flags for the audit module (cdylib only; the rlib and test harnesses are unaffected).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    // Exactly the la_* entry points are exported (see exports.map and symbols.txt).
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/exports.map");
    // Resolve every import at load time: lazy PLT resolution inside an audit module while the
    // loader holds its lock can deadlock (DOMAIN.md §2).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
    // No libpthread.so.0: before glibc 2.34 std's pthread key functions live there, but the
    // module's references to them are weak, with an in-module fallback (src/glibc_compat.rs),
    // because making it NEEDED costs 0.1-0.17 ms of every hooked process start on 2.34+.
    println!("cargo:rerun-if-changed=exports.map");
}
