//! Generates, for the ROCm ABI chosen by `HIPSIM_ABI` (5, 6 or 7; default 6):
//! - `trampolines.S`: one exported, versioned entry point per door, jumping to the Rust
//!   `hipsim_impl_<name>` (rustc's own export list cannot carry version nodes);
//! - `hipsim.map`: the linker version script (the real chain of `hip_*` nodes);
//! - `exports.rs`: the table hipGetProcAddress serves from.
//!
//! and compiles them with `c/shim.c` (the PLT-bound internal hipMalloc call).

use hip_sys::{version_chain, RocmAbi, DOORS};
use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=HIPSIM_ABI");
    println!("cargo:rerun-if-changed=c/shim.c");
    println!("cargo:rerun-if-changed=build.rs");
    let abi = match std::env::var("HIPSIM_ABI") {
        Err(_) => RocmAbi::Rocm6,
        Ok(v) => RocmAbi::from_major(&v)
            .unwrap_or_else(|| panic!("HIPSIM_ABI={v:?}: expected 5, 6 or 7 (the ROCm major)")),
    };
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let exported: Vec<(&str, &str)> = DOORS
        .iter()
        .filter_map(|d| d.node(abi).map(|node| (d.name, node)))
        .collect();

    let mut asm = String::from("    .text\n");
    for (name, _) in &exported {
        writeln!(
            asm,
            "    .globl {name}\n    .type {name},@function\n    .p2align 4\n{name}:\n    jmp hipsim_impl_{name}@PLT\n    .size {name}, .-{name}\n"
        )
        .unwrap();
    }
    asm.push_str("    .section .note.GNU-stack,\"\",@progbits\n");
    std::fs::write(out.join("trampolines.S"), asm).unwrap();

    let mut map = String::new();
    let mut previous: Option<&str> = None;
    for node in version_chain(abi) {
        let names: Vec<&str> = exported
            .iter()
            .filter(|(_, n)| n == node)
            .map(|(name, _)| *name)
            .collect();
        writeln!(map, "{node} {{").unwrap();
        if !names.is_empty() {
            map.push_str("global:\n");
            for name in names {
                writeln!(map, "    {name};").unwrap();
            }
        }
        map.push_str("local:\n    *;\n");
        match previous {
            None => map.push_str("};\n\n"),
            Some(p) => writeln!(map, "}} {p};\n").unwrap(),
        }
        previous = Some(node);
    }
    let map_path = out.join("hipsim.map");
    std::fs::write(&map_path, map).unwrap();

    let mut table = String::from("extern \"C\" {\n");
    for (name, _) in &exported {
        writeln!(table, "    fn {name}();").unwrap();
    }
    table.push_str(
        "}\n\n/// (name, version node, exported address) of every door this build exports.\n",
    );
    table.push_str("pub static EXPORTS: &[(&str, &str, unsafe extern \"C\" fn())] = &[\n");
    for (name, node) in &exported {
        writeln!(table, "    (\"{name}\", \"{node}\", {name}),").unwrap();
    }
    table.push_str("];\n");
    writeln!(
        table,
        "\n/// The ROCm major this build imitates.\npub const ABI_MAJOR: i32 = {};",
        abi.major()
    )
    .unwrap();
    std::fs::write(out.join("exports.rs"), table).unwrap();

    cc::Build::new()
        .file("c/shim.c")
        .file(out.join("trampolines.S"))
        .pic(true)
        .flag_if_supported("-fplt")
        .link_lib_modifier("+whole-archive")
        .compile("hipsimshim");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map_path.display()
    );
    // The loader must be able to bind every door lazily (the lazy-PLT shapes of the hook tests).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,lazy");
}
