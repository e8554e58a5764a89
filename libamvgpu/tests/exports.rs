//! What `libamvgpu.so` shows the outside world: exactly the `la_*` audit entry points, nothing
//! needing a glibc newer than 2.17, and harmlessness over the real ROCm 5.2 runtime.

mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn tool_output(tool: &str, args: &[&str], lib: &Path) -> String {
    let out = Command::new(tool)
        .args(args)
        .arg(lib)
        .output()
        .unwrap_or_else(|e| panic!("run {tool} (binutils): {e}"));
    assert!(
        out.status.success(),
        "{tool} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 tool output")
}

#[test]
fn exported_symbols_are_exactly_the_checked_in_list() {
    let listed: BTreeSet<String> =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("symbols.txt"))
            .expect("libamvgpu/symbols.txt")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(String::from)
            .collect();
    assert!(
        listed.iter().all(|s| s.starts_with("la_")),
        "symbols.txt lists something other than audit entry points: {listed:?}"
    );
    for required in ["la_version", "la_objopen", "la_preinit", "la_objclose"] {
        assert!(listed.contains(required), "symbols.txt lacks {required}");
    }
    // Its mere presence makes glibc 2.35+ audit every lazy binding of every object (a start-up
    // cost of tens of percent for a program with many bindings): it must stay out.
    assert!(
        !listed.contains("la_symbind64") && !listed.contains("la_symbind32"),
        "symbols.txt lists la_symbind*: {listed:?}"
    );
    let nm = tool_output("nm", &["-D", "--defined-only"], &hook_path());
    let exported: BTreeSet<String> = nm
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        // nm prints versioned names as name@@VERSION
        .map(|s| s.split('@').next().unwrap().to_string())
        .collect();
    assert_eq!(
        exported, listed,
        "nm -D --defined-only libamvgpu.so vs symbols.txt:\n{nm}"
    );
}

/// The module defines the unwinder entry points itself (src/glibc_compat.rs), so the loader
/// has no `libgcc_s.so.1` to find and map in every hooked process, and it reaches std's pthread
/// key functions through weak references with an in-module fallback, so it needs no
/// `libpthread.so.0` either (before glibc 2.34 that is where those functions live: a strong
/// reference there would make the loader refuse the module, see docs/compatibility.md). It
/// needs libc and the loader, nothing else.
#[test]
fn links_no_unwinder_and_no_libpthread() {
    let path = hook_path();
    let dynamic = tool_output("readelf", &["-d"], &path);
    let needed: BTreeSet<&str> = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(needed.contains("libc.so.6"), "{dynamic}");
    assert!(!needed.contains("libpthread.so.0"), "{dynamic}");
    assert!(
        !needed.iter().any(|n| n.starts_with("libgcc_s")),
        "{dynamic}"
    );
    assert!(needed.len() <= 2, "unexpected NEEDED entries: {needed:?}");
    let symbols = tool_output("readelf", &["--dyn-syms", "-W"], &path);
    for name in [
        "pthread_key_create",
        "pthread_key_delete",
        "pthread_setspecific",
        "pthread_getspecific",
    ] {
        for line in symbols.lines().filter(|l| l.contains(&format!(" {name}@"))) {
            assert!(
                line.contains(" WEAK ") && line.contains(" UND "),
                "{name} must be a weak import, or glibc < 2.34 refuses the module:\n{line}"
            );
        }
    }
}

#[test]
fn needs_no_glibc_newer_than_2_17() {
    let dump = tool_output("objdump", &["-T"], &hook_path());
    let mut versions = BTreeSet::new();
    for word in dump.split(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        if let Some(v) = word.strip_prefix("GLIBC_") {
            versions.insert(v.to_string());
        }
    }
    assert!(
        !versions.is_empty(),
        "no GLIBC_ versions found: is this objdump -T output?\n{dump}"
    );
    for v in &versions {
        let parts: Option<Vec<u32>> = v.split('.').map(|p| p.parse().ok()).collect();
        let parts =
            parts.unwrap_or_else(|| panic!("needs GLIBC_{v} (not a release version)\n{dump}"));
        assert!(
            parts.as_slice() <= [2u32, 17].as_slice(),
            "libamvgpu.so needs GLIBC_{v}, newer than the 2.17 floor\n{dump}"
        );
    }
}

/// The real runtime (no GPU here) answers errors; the hook must pass them through unchanged,
/// count nothing (repeated refusals stay the runtime's, never become hipErrorOutOfMemory) and
/// not crash. (hipMalloc(SIZE_MAX) is left out: the hook may refuse it itself, as specified.)
#[test]
fn real_rocm_runtime_errors_pass_through() {
    if !Path::new(REAL_RUNTIME).exists() {
        println!("skipped: {REAL_RUNTIME} is absent (install Debian's libamdhip64-5)");
        return;
    }
    let sb = Sandbox::new("realrt", 1).runtime(Runtime::Real).limit("8m");
    let steps = [
        "count",
        "malloc:0:6m",
        "malloc:1:6m",
        "malloc:2:6m",
        "free:0",
        "freeraw:4096",
        "meminfo",
        "meminfo:null",
        "totalmem:0",
        "attr:0",
        "props:0",
        "dev:0",
        "pitch:3:1000:1000",
        "managed:4:6m",
        "dlsym:5:6m",
        "reset",
    ];
    let hooked = sb.run(&steps);
    let plain = sb.unhooked().run(&steps);
    assert!(
        plain.status.success(),
        "the real runtime alone failed: {plain}"
    );
    hooked.expect_clean_exit();
    assert_eq!(
        hooked.stdout, plain.stdout,
        "the hook changed the real runtime's answers\n{hooked}"
    );
    assert_ne!(
        hooked.rc(1),
        HIP_SUCCESS,
        "test bug: a GPU is present; this test needs none"
    );
}

#[test]
fn real_rocm_runtime_bind_now() {
    if !Path::new(REAL_RUNTIME).exists() {
        println!("skipped: {REAL_RUNTIME} is absent (install Debian's libamdhip64-5)");
        return;
    }
    let sb = Sandbox::new("realrt_now", 1)
        .runtime(Runtime::Real)
        .binding(Binding::Now)
        .limit("8m");
    let steps = ["malloc:0:6m", "malloc:1:6m", "meminfo", "props:0"];
    let hooked = sb.run(&steps);
    let plain = sb.unhooked().run(&steps);
    hooked.expect_clean_exit();
    assert_eq!(hooked.stdout, plain.stdout, "{hooked}");
}
