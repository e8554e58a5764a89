//! The ELF surface: exported doors with their ROCm version nodes (for ROCm 5, 6 and 7 builds),
//! version-bound references in programs linked against the simulator, and the PLT-bound
//! internal hipMalloc call.

use hip_sys::{version_chain, RocmAbi, DOORS};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use testkit::Fixture;

/// name -> version node of the defined (`defined = true`) or undefined dynamic symbols.
fn dynamic_symbols(file: &Path, defined: bool) -> BTreeMap<String, String> {
    let text = testkit::tool_output("objdump", &[OsStr::new("-T"), file.as_os_str()]).unwrap();
    let mut symbols = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 || !(line.contains(" DF ") || line.contains(" DO ")) {
            continue;
        }
        let is_undefined = line.contains("*UND*");
        if is_undefined == defined {
            continue;
        }
        let name = fields[fields.len() - 1].to_string();
        let version = fields[fields.len() - 2]
            .trim_matches(|c| c == '(' || c == ')')
            .to_string();
        symbols.insert(name, version);
    }
    symbols
}

fn check_exports(lib: &Path, abi: RocmAbi) {
    let exported = dynamic_symbols(lib, true);
    for door in DOORS {
        match door.node(abi) {
            Some(node) => assert_eq!(
                exported.get(door.name).map(String::as_str),
                Some(node),
                "{}: {} must be exported at {node} for ROCm {}",
                lib.display(),
                door.name,
                abi.major()
            ),
            None => assert!(
                !exported.contains_key(door.name),
                "{}: {} must not exist in ROCm {}",
                lib.display(),
                door.name,
                abi.major()
            ),
        }
    }
    for (name, version) in &exported {
        let is_door = DOORS.iter().any(|d| d.name == name);
        assert!(
            is_door || name.starts_with("hipsim"),
            "unexpected export {name}@{version}"
        );
        if !is_door {
            assert_eq!(
                version, "Base",
                "{name} is not a HIP symbol and carries no HIP node"
            );
        }
    }
    // The version definitions reproduce the real chain of nodes.
    let text = testkit::tool_output("readelf", &[OsStr::new("-V"), lib.as_os_str()]).unwrap();
    let definitions = text.split("Version needs section").next().unwrap();
    for node in version_chain(abi) {
        assert!(
            definitions.contains(&format!("Name: {node}")),
            "{node} not defined in {}",
            lib.display()
        );
    }
}

#[test]
fn default_build_exports_the_rocm6_doors() {
    let libs = testkit::libs();
    check_exports(&libs.hipsim, RocmAbi::Rocm6);
}

/// Per ABI: a probe that uses a door only that ABI has in that form.
fn abi_probe(abi: RocmAbi) -> &'static str {
    match abi {
        // ROCm 5 programs call the plain hipGetDeviceProperties with the legacy layout.
        RocmAbi::Rocm5 => {
            r#"#define FIXTURE_ROCM5_PROPS
               #include "fixture.h"
               int main(void) {
                   hipDeviceProp_tR0000 p;
                   CHECK_HIP(hipGetDeviceProperties(&p, 0));
                   CHECK_EQ_U64(p.totalGlobalMem, (size_t)64 << 30);
                   CHECK(strcmp(p.gcnArchName, "gfx942") == 0);
                   int v = 0;
                   CHECK_HIP(hipDriverGetVersion(&v));
                   CHECK(v >= 50000000 && v < 60000000);
                   printf("%d\n", hipsimGetAbiMajor());
                   return 0;
               }"#
        }
        // ROCm 7.1 added hipGetDriverEntryPoint.
        _ => {
            r#"#define _GNU_SOURCE
               #include <dlfcn.h>
               #include "fixture.h"
               int main(void) {
                   void *fn = NULL;
                   hipDriverEntryPointQueryResult st = (hipDriverEntryPointQueryResult)-1;
                   CHECK_HIP(hipGetDriverEntryPoint("hipMalloc", &fn, 0, &st));
                   CHECK_EQ_U64(st, hipDriverEntryPointSuccess);
                   CHECK(fn == dlvsym(RTLD_DEFAULT, "hipMalloc", "hip_4.2"));
                   CHECK_HIP_EQ(hipGetDriverEntryPoint("hipNope", &fn, 0, &st), hipErrorInvalidValue);
                   CHECK_EQ_U64(st, hipDriverEntryPointSymbolNotFound);
                   void *p;
                   CHECK_HIP(hipMalloc(&p, 1));
                   printf("%d\n", hipsimGetAbiMajor());
                   return 0;
               }"#
        }
    }
}

#[test]
fn rocm5_and_rocm7_layouts_can_be_built() {
    for abi in [RocmAbi::Rocm5, RocmAbi::Rocm7] {
        let dir = testkit::hipsim_for_abi(abi);
        check_exports(&dir.join("libamdhip64.so"), abi);
        let probe = Fixture::from_source(&format!("abi{}_probe", abi.major()), abi_probe(abi))
            .hip_dir(&dir)
            .link_flag("-ldl")
            .compile()
            .unwrap();
        let out = probe.run().output();
        out.assert_success();
        assert_eq!(out.stdout.trim(), abi.major().to_string());
    }
}

#[test]
fn programs_bind_to_versioned_doors() {
    let fixture = Fixture::from_path(format!(
        "{}/tests/fixtures/linear.c",
        env!("CARGO_MANIFEST_DIR")
    ))
    .link_flag("-pthread")
    .link_flag("-ldl")
    .compile()
    .unwrap();
    let needed = dynamic_symbols(&fixture.exe, false);
    let mut checked = 0;
    for (name, version) in &needed {
        if let Some(door) = DOORS.iter().find(|d| d.name == name) {
            assert_eq!(Some(version.as_str()), door.node(RocmAbi::Rocm6), "{name}");
            checked += 1;
        }
    }
    assert!(
        needed.get("hipMalloc").is_some_and(|v| v == "hip_4.2"),
        "{needed:?}"
    );
    assert!(
        checked >= 8,
        "the fixture should reference many doors: {needed:?}"
    );
}

#[test]
fn the_runtime_calls_its_own_hipmalloc_through_the_plt() {
    let libs = testkit::libs();
    let relocs =
        testkit::tool_output("readelf", &[OsStr::new("-rW"), libs.hipsim.as_os_str()]).unwrap();
    assert!(
        relocs
            .lines()
            .any(|l| l.contains("R_X86_64_JUMP_SLOT") && l.contains("hipMalloc@@hip_4.2")),
        "no JUMP_SLOT relocation against hipMalloc@@hip_4.2 in {}",
        libs.hipsim.display()
    );
    // Lazily bound, like ROCm's libamdhip64 (no BIND_NOW): the hook tests cover lazy PLT slots.
    let dynamic =
        testkit::tool_output("readelf", &[OsStr::new("-d"), libs.hipsim.as_os_str()]).unwrap();
    let binds_now = dynamic
        .lines()
        .any(|l| l.contains("BIND_NOW") || (l.contains("(FLAGS_1)") && l.contains(" NOW")));
    assert!(!binds_now, "{dynamic}");
}
