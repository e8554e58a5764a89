//! Link flags for the audit module (cdylib only; the rlib and test harnesses are unaffected).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    // Exactly the la_* entry points are exported (see exports.map and symbols.txt).
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/exports.map");
    // Resolve every import at load time: lazy PLT resolution inside an audit module while the
    // loader holds its lock can deadlock (DOMAIN.md §2).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
    // Before glibc 2.34 the pthread key functions live in libpthread.so.0, not libc.so.6.
    // src/glibc_compat.rs binds std's references to their GLIBC_2.2.5 versions; on an older
    // loader those are only found if libpthread.so.0 is loaded, so it must be NEEDED (on 2.34+
    // it is an empty compatibility stub). `-lpthread` alone would pick the static libpthread.a
    // stub of Debian 12 and add nothing; --no-as-needed keeps the entry although nothing on
    // the build machine resolves to it. (Found and verified on glibc 2.31 by helper "compat".)
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-cdylib-link-arg=-l:libpthread.so.0");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--as-needed");
    println!("cargo:rerun-if-changed=exports.map");
}
