//! Gives the simulated runtime the real library's DT_SONAME, so that loaders and audit modules
//! recognise it as `libhsa-runtime64` whatever file name it is opened under.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhsa-runtime64.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
