//! Compatibility: every way a program can reach `hipMalloc` is held to the limit.
//!
//! Each test builds one shape of `compat_fixtures/shape.c` (the shape is chosen at compile
//! time, so the binary holds exactly that kind of relocation, which the test checks with
//! `readelf` where it matters), runs it under `LD_AUDIT` with `HIP_DEVICE_MEMORY_LIMIT=8m` on
//! the simulated runtime, and asserts: 6 MiB succeeds, 4 MiB more gets `hipErrorOutOfMemory`
//! (2), `hipMemGetInfo` reports 2 MiB free of 8 MiB, and the simulator's own peak never passed
//! the limit. The same binary run without the hook gets its 4 MiB, which shows that the limit
//! came from the hook and not from the simulator.
//!
//! How they are held: `la_objopen` redirects the runtime's definitions of the wrapped names
//! to the wrappers before anything binds to them (`src/redirect.rs`), so every shape below
//! resolves to a wrapper through the loader's own symbol lookup.
//!
//! `old_glibc_root` repeats the start-up-bound shapes on glibc 2.31, whose loader audits
//! bindings differently from 2.35+ (a reason the hook no longer relies on binding callbacks).
//! It needs a prepared Debian bullseye root: run `ci/old-glibc.sh`, which prepares one and runs
//! this test with `AMVGPU_OLD_GLIBC_ROOT` set.
//!
//! The real ROCm 5.2 runtime is covered by `exports.rs` (`real_rocm_runtime_*`).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::{Compiled, Fixture, Output, RocmAbi, TempDir};

const MIB: i64 = 1 << 20;
const LIMIT: i64 = 8 * MIB;
const HIP_SUCCESS: i64 = 0;
const HIP_OUT_OF_MEMORY: i64 = 2;

fn compat_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat_fixtures")
}

fn shape_source() -> String {
    let path = compat_dir().join("shape.c");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// How a build meets the runtime.
enum Hip<'a> {
    /// Linked against the default simulator.
    Linked,
    /// Linked against the simulator in this directory (another ROCm symbol-version layout).
    LinkedFrom(&'a Path),
    /// Not linked: the program finds the runtime with dlopen.
    NotLinked,
}

/// Compiles `shape.c` with `-DSHAPE_<shape>` plus `cflags` and `links`.
fn build(shape: &str, hip: Hip, cflags: &[&str], links: &[&str]) -> Compiled {
    let tag = format!("shape_{}", shape.to_ascii_lowercase());
    let mut f = Fixture::from_source(&tag, &shape_source()).cflag(&format!("-DSHAPE_{shape}"));
    match hip {
        Hip::Linked => {}
        Hip::LinkedFrom(dir) => f = f.hip_dir(dir),
        Hip::NotLinked => f = f.without_hip(),
    }
    for c in cflags {
        f = f.cflag(c);
    }
    for l in links.iter().chain(&["-pthread", "-ldl"]) {
        f = f.link_flag(l);
    }
    f.compile().unwrap_or_else(|e| panic!("{e}"))
}

/// A shared library built from `shape.c` (`-shared -fPIC`), linked against the simulator.
fn build_library(shape: &str, cflags: &[&str]) -> PathBuf {
    let mut all = vec!["-shared", "-fPIC"];
    all.extend_from_slice(cflags);
    build(shape, Hip::Linked, &all, &[]).exe
}

/// Where one test keeps its ledger file.
struct Scratch {
    dir: TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: testkit::temp_dir(),
        }
    }

    /// A run of `exe` with one simulated 4 GiB device, the limit `limit` and this test's own
    /// ledger, not yet started.
    fn prepare(&self, exe: &Compiled, limit: &str) -> testkit::Run {
        exe.run()
            .env("HIP_DEVICE_MEMORY_LIMIT", limit)
            .env(
                "HIP_DEVICE_MEMORY_SHARED_CACHE",
                self.dir.path().join("ledger"),
            )
            .env("HIPSIM_DEVICES", "1")
            .env("HIPSIM_VRAM", "4g")
    }

    /// A hooked run of `exe` with `limit` and extra environment.
    fn run_with(&self, exe: &Compiled, limit: &str, env: &[(&str, &str)]) -> Output {
        let mut run = self.prepare(exe, limit);
        for (k, v) in env {
            run = run.env(k, v);
        }
        run.audit().output()
    }

    /// A run of `exe` with one simulated 4 GiB device, under the hook if `hooked`, with the
    /// limit `limit` and this test's own ledger.
    fn run(&self, exe: &Compiled, limit: &str, hooked: bool, args: &[&str]) -> Output {
        let mut run = self.prepare(exe, limit).args(args);
        if hooked {
            run = run.audit();
        }
        let out = run.output();
        if hooked {
            assert!(
                !out.stderr.contains("cannot be loaded as audit interface"),
                "{}",
                out.describe("the loader must accept libamvgpu.so")
            );
        }
        out
    }
}

/// `<key> <number>...` lines of a run's stdout.
fn results(out: &Output) -> BTreeMap<String, Vec<i64>> {
    out.stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split_ascii_whitespace();
            let key = words.next()?.to_string();
            let vals = words
                .map(|w| w.parse().ok())
                .collect::<Option<Vec<i64>>>()?;
            Some((key, vals))
        })
        .collect()
}

#[track_caller]
fn get<'a>(r: &'a BTreeMap<String, Vec<i64>>, key: &str, out: &Output) -> &'a [i64] {
    r.get(key)
        .unwrap_or_else(|| panic!("{}", out.describe(&format!("expected a `{key}` line"))))
}

/// The standard workload was held to 8 MiB.
#[track_caller]
fn assert_held(out: &Output) {
    assert!(out.success(), "{}", out.describe("expected a clean exit"));
    let r = results(out);
    let why = |what: &str| out.describe(what);
    assert_eq!(
        get(&r, "first", out),
        [HIP_SUCCESS],
        "{}",
        why("6 MiB fits")
    );
    assert_eq!(
        get(&r, "second", out),
        [HIP_OUT_OF_MEMORY],
        "{}",
        why("4 MiB more must be hipErrorOutOfMemory")
    );
    assert_eq!(
        get(&r, "meminfo", out),
        [HIP_SUCCESS, 2 * MIB, LIMIT],
        "{}",
        why("hipMemGetInfo must report the 8 MiB slice")
    );
    let usage = get(&r, "usage", out);
    assert_eq!(usage[0], HIP_SUCCESS, "{}", why("hipsimGetUsage"));
    assert_eq!(usage[1], 6 * MIB, "{}", why("live bytes on the device"));
    assert!(
        usage[2] <= LIMIT,
        "{}",
        why("peak must stay within the limit")
    );
}

/// The same workload without the hook: the simulator alone grants the 4 MiB (so a pass of
/// [`assert_held`] is the hook's doing).
#[track_caller]
fn assert_unheld(out: &Output) {
    assert!(out.success(), "{}", out.describe("expected a clean exit"));
    let r = results(out);
    assert_eq!(
        get(&r, "second", out),
        [HIP_SUCCESS],
        "{}",
        out.describe("without the hook the simulator grants 4 MiB")
    );
}

/// Runs `exe` hooked (must be held) and unhooked (must not be).
fn check_shape(exe: &Compiled, args: &[&str], extra_env: &[(&str, &str)]) {
    let scratch = Scratch::new();
    for hooked in [true, false] {
        let mut run = exe
            .run()
            .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
            .env(
                "HIP_DEVICE_MEMORY_SHARED_CACHE",
                scratch.dir.path().join("ledger"),
            )
            .env("HIPSIM_DEVICES", "1")
            .env("HIPSIM_VRAM", "4g")
            .args(args);
        for (k, v) in extra_env {
            run = run.env(k, v);
        }
        if hooked {
            let out = run.audit().output();
            assert!(
                !out.stderr.contains("cannot be loaded as audit interface"),
                "{}",
                out.describe("the loader must accept libamvgpu.so")
            );
            assert_held(&out);
        } else {
            assert_unheld(&run.output());
        }
    }
}

fn tool(program: &str, args: &[&str], file: &Path) -> String {
    let mut all: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    all.push(file.as_os_str());
    testkit::tool_output(program, &all).unwrap_or_else(|e| panic!("{e}"))
}

/// Relocation types (`R_X86_64_GLOB_DAT`, ...) of `file` whose symbol is exactly `symbol`.
fn relocations(file: &Path, symbol: &str) -> Vec<String> {
    tool("readelf", &["-rW"], file)
        .lines()
        .filter(|l| {
            l.split_ascii_whitespace()
                .nth(4)
                .is_some_and(|s| s.split('@').next() == Some(symbol))
        })
        .filter_map(|l| l.split_ascii_whitespace().nth(2).map(str::to_string))
        .collect()
}

#[track_caller]
fn assert_relocations(file: &Path, symbol: &str, expected: &[&str]) {
    let mut got = relocations(file, symbol);
    got.sort();
    let mut want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(
        got,
        want,
        "{}: relocations against {symbol} (the build does not have the shape under test)",
        file.display()
    );
}

fn is_bind_now(file: &Path) -> bool {
    let dynamic = tool("readelf", &["-dW"], file);
    dynamic.contains("(BIND_NOW)")
        || dynamic
            .lines()
            .any(|l| l.contains("(FLAGS)") && l.contains("NOW"))
}

// ---------------------------------------------------------------------------------------------
// Program shapes (glibc of this machine)
// ---------------------------------------------------------------------------------------------

#[test]
fn plt_call() {
    let exe = build("DIRECT", Hip::Linked, &[], &[]);
    assert_relocations(&exe.exe, "hipMalloc", &["R_X86_64_JUMP_SLOT"]);
    assert!(!is_bind_now(&exe.exe));
    check_shape(&exe, &[], &[]);
}

#[test]
fn linked_with_z_now() {
    let exe = build("DIRECT", Hip::Linked, &[], &["-Wl,-z,now"]);
    assert!(is_bind_now(&exe.exe), "{}: not bind-now", exe.exe.display());
    check_shape(&exe, &[], &[]);
}

#[test]
fn ld_bind_now_environment() {
    let exe = build("DIRECT", Hip::Linked, &[], &[]);
    check_shape(&exe, &[], &[("LD_BIND_NOW", "1")]);
}

#[test]
fn compiled_with_fno_plt() {
    let exe = build("DIRECT", Hip::Linked, &["-fno-plt"], &[]);
    assert_relocations(&exe.exe, "hipMalloc", &["R_X86_64_GLOB_DAT"]);
    check_shape(&exe, &[], &[]);
}

#[test]
fn compiled_with_fno_plt_and_bound_now() {
    let exe = build("DIRECT", Hip::Linked, &["-fno-plt"], &["-Wl,-z,now"]);
    check_shape(&exe, &[], &[]);
}

/// `fp = hipMalloc` in PIE code (a GLOB_DAT slot) and an initialised table of function
/// pointers in the program (an absolute R_X86_64_64 data relocation).
#[test]
fn address_taken_pointer_and_table_in_the_program() {
    let exe = build("POINTER", Hip::Linked, &[], &[]);
    assert_relocations(&exe.exe, "hipMalloc", &["R_X86_64_GLOB_DAT", "R_X86_64_64"]);
    check_shape(&exe, &[], &[]);
    check_shape(&exe, &["table"], &[]);
}

/// A static const dispatch table of HIP function pointers in a shared library the program
/// links (RELRO data the loader fills at start-up and protects afterwards).
#[test]
fn dispatch_table_in_a_shared_library() {
    let lib = build_library("TABLE_LIB", &[]);
    assert_relocations(&lib, "hipMalloc", &["R_X86_64_64"]);
    let lib_arg = lib.display().to_string();
    let exe = build("TABLE_USER", Hip::Linked, &[], &[&lib_arg]);
    check_shape(&exe, &[], &[]);
}

/// Python's ctypes: dlopen the runtime after start-up, RTLD_NOW | RTLD_LOCAL, then dlsym.
#[test]
fn dlopen_and_dlsym_of_the_runtime() {
    let exe = build("DLOPEN", Hip::NotLinked, &[], &[]);
    assert!(relocations(&exe.exe, "hipMalloc").is_empty());
    check_shape(&exe, &["libamdhip64.so"], &[]);
}

fn dlopened_user_library(lib_cflags: &[&str]) {
    let lib = build_library("USER_LIB", lib_cflags);
    let exe = build("DLOPEN", Hip::NotLinked, &[], &[]);
    check_shape(&exe, &[&lib.display().to_string(), "user"], &[]);
}

/// A library opened after start-up whose only HIP references are a const table of function
/// pointers (absolute data relocations, no PLT binding to HIP). glibc reports nothing to the
/// audit module after relocating a dlopen, so this is held only because the table's
/// relocations resolve through the runtime's redirected definitions: held right after its
/// dlopen, with no later loader event.
#[test]
fn dlopened_library_with_a_dispatch_table() {
    let lib = build_library("TABLE_LIB", &[]);
    assert_relocations(&lib, "hipMalloc", &["R_X86_64_64"]);
    let exe = build("DLOPEN", Hip::NotLinked, &[], &[]);
    check_shape(&exe, &[&lib.display().to_string(), "table"], &[]);
}

/// `RTLD_DEEPBIND` changes the lookup order, not the audited binding.
#[test]
fn dlopened_with_rtld_deepbind() {
    let lib = build_library("USER_LIB", &[]);
    let exe = build("DLOPEN", Hip::NotLinked, &[], &[]);
    let lib = lib.display().to_string();
    check_shape(&exe, &[&lib, "user"], &[("SHAPE_DEEPBIND", "1")]);
    check_shape(&exe, &["libamdhip64.so"], &[("SHAPE_DEEPBIND", "1")]);
}

/// A library opened after start-up (a Python extension) that calls hipMalloc through its PLT.
#[test]
fn dlopened_library_calling_through_its_plt() {
    dlopened_user_library(&[]);
}

#[test]
fn dlopened_library_linked_with_z_now() {
    dlopened_user_library(&["-Wl,-z,now"]);
}

/// A library opened after start-up whose only HIP bindings are GOT slots (`-fno-plt`),
/// relocated after the loader's last audit callback of that dlopen: held right after its
/// dlopen because the runtime's definitions are redirected (this was a documented gap while
/// the hook relied on `la_symbind64` and GOT patching at loader events).
#[test]
fn dlopened_library_compiled_with_fno_plt() {
    let lib = build_library("USER_LIB", &["-fno-plt"]);
    assert_relocations(&lib, "hipMalloc", &["R_X86_64_GLOB_DAT"]);
    let exe = build("DLOPEN", Hip::NotLinked, &[], &[]);
    check_shape(&exe, &[&lib.display().to_string(), "user"], &[]);
}

/// An `LD_PRELOAD`ed tracer that defines hipMalloc and forwards with `dlsym(RTLD_NEXT)` (as
/// profiling shims do) keeps seeing every call, the runtime's own included, and the container
/// is still charged exactly once: the program's call reaches the tracer, then the redirected
/// definition; the runtime's own hipMalloc (inside hipMallocPitch) is left bound to the tracer,
/// and the re-entrancy guard stays on so its nested call is not counted twice.
#[test]
fn an_ld_preload_interposer_sees_every_call_and_memory_is_counted_once() {
    let interposer = build_library("INTERPOSER", &["-ldl"]);
    let preload = interposer.display().to_string();
    let env = [("LD_PRELOAD", preload.as_str())];
    // The program's own calls: first (6 MiB) and second (4 MiB, refused by the hook).
    let direct = build("DIRECT", Hip::Linked, &[], &[]);
    check_shape(&direct, &[], &env);
    let out = Scratch::new().run_with(&direct, "8m", &env);
    assert!(
        out.stderr.contains("interposer: 2 hipMalloc calls"),
        "{}",
        out.describe("the tracer sees both of the program's calls")
    );
    // The runtime's own call inside hipMallocPitch: the 6 MiB pitched allocation reaches the
    // tracer once (the refused 4 MiB one never reaches the runtime), and is counted once.
    let pitch = build("PITCH", Hip::Linked, &[], &[]);
    check_shape(&pitch, &[], &env);
    let out = Scratch::new().run_with(&pitch, "8m", &env);
    assert!(
        out.stderr.contains("interposer: 1 hipMalloc calls"),
        "{}",
        out.describe("the tracer sees the runtime's own hipMalloc")
    );
}

#[test]
fn hip_get_proc_address() {
    let exe = build("PROCADDR", Hip::Linked, &[], &[]);
    check_shape(&exe, &[], &[]);
}

/// The hook reads its configuration itself: a program that never calls getenv (and so never
/// gives a getenv-wrapping hook a chance to see the variables) is limited all the same.
#[test]
fn program_that_never_calls_getenv() {
    let exe = build("DIRECT", Hip::Linked, &[], &[]);
    let imports = tool("nm", &["-D", "--undefined-only"], &exe.exe);
    assert!(
        !imports.lines().any(|l| l.contains("getenv")),
        "test bug: the fixture imports getenv:\n{imports}"
    );
    check_shape(&exe, &[], &[]);
}

/// Eight threads exist before the first HIP call and race their first allocations (and so
/// the hook's lazy initialisation): together they get exactly the limit, never more.
#[test]
fn threads_started_before_the_first_hip_call() {
    let exe = build("THREADS", Hip::Linked, &[], &[]);
    let scratch = Scratch::new();
    for _ in 0..3 {
        let out = scratch.run(&exe, "64m", true, &[]);
        assert!(out.success(), "{}", out.describe("expected a clean exit"));
        let r = results(&out);
        for i in 0..8 {
            let line = out
                .stdout
                .lines()
                .find(|l| l.starts_with(&format!("thread {i} ")))
                .unwrap_or_else(|| panic!("{}", out.describe("a line per thread")));
            assert!(
                line.ends_with(" 2"),
                "{}",
                out.describe("every thread must stop at hipErrorOutOfMemory")
            );
        }
        assert_eq!(
            get(&r, "blocks", &out),
            [64],
            "{}",
            out.describe("exactly 64 blocks of 1 MiB fit in 64 MiB")
        );
        assert_eq!(get(&r, "meminfo", &out), [HIP_SUCCESS, 0, 64 * MIB]);
        let usage = get(&r, "usage", &out);
        assert!(
            usage[2] <= 64 * MIB,
            "{}",
            out.describe("peak over the limit")
        );
        // Each run is a new process with its own simulator state; its usage is reclaimed
        // from the ledger because the process is gone.
    }
    let unhooked = scratch.run(&exe, "64m", false, &[]);
    let r = results(&unhooked);
    assert_eq!(
        get(&r, "blocks", &unhooked),
        [4096],
        "{}",
        unhooked.describe("4 GiB")
    );
}

/// fork, then exec another HIP program: both are limited and share one ledger.
#[test]
fn fork_then_exec_shares_the_limit() {
    let exe = build("FORK_EXEC", Hip::Linked, &[], &[]);
    let scratch = Scratch::new();
    let out = scratch.run(&exe, "8m", true, &["parent"]);
    assert!(out.success(), "{}", out.describe("expected a clean exit"));
    let r = results(&out);
    let expect = |key: &str, want: &[i64], what: &str| {
        assert_eq!(get(&r, key, &out), want, "{}", out.describe(what));
    };
    expect("parent-first", &[HIP_SUCCESS], "parent takes 5 MiB");
    expect("child-first", &[HIP_SUCCESS], "child takes 3 MiB");
    expect(
        "child-second",
        &[HIP_OUT_OF_MEMORY],
        "the exec'd child sees the parent's 5 MiB",
    );
    expect(
        "child-meminfo",
        &[HIP_SUCCESS, 0, LIMIT],
        "the child's view includes the parent",
    );
    expect("child-exit", &[0], "child exit status");
    expect(
        "parent-second",
        &[HIP_OUT_OF_MEMORY],
        "the parent is still limited",
    );
    let usage = get(&r, "usage", &out);
    assert!(usage[2] <= LIMIT, "{}", out.describe("peak over the limit"));
}

/// A known way around the hook (docs/compatibility.md): a child started without LD_AUDIT is
/// neither limited nor counted.
#[test]
fn a_child_without_ld_audit_is_not_limited() {
    let exe = build("FORK_EXEC", Hip::Linked, &[], &[]);
    let scratch = Scratch::new();
    let out = scratch.run(&exe, "8m", true, &["parent", "strip"]);
    assert!(out.success(), "{}", out.describe("expected a clean exit"));
    let r = results(&out);
    assert_eq!(get(&r, "parent-first", &out), [HIP_SUCCESS]);
    assert_eq!(get(&r, "child-first", &out), [HIP_SUCCESS]);
    assert_eq!(
        get(&r, "child-second", &out),
        [HIP_SUCCESS],
        "{}",
        out.describe("an unhooked child is not limited")
    );
    assert_eq!(
        get(&r, "child-meminfo", &out)[2],
        4 << 30,
        "{}",
        out.describe("an unhooked child sees the whole device")
    );
    assert!(get(&r, "usage", &out)[2] > LIMIT);
}

/// One function reached through two kinds of relocation in two objects (the program's PLT
/// slot and a dispatch-table library's absolute slot) is wrapped once: 6 MiB + 2 MiB fill an
/// 8 MiB limit exactly, lazily bound or with `-z now`.
#[test]
fn a_function_bound_both_ways_is_counted_once() {
    let lib = build_library("TABLE_LIB", &[]);
    assert_relocations(&lib, "hipMalloc", &["R_X86_64_64"]);
    let lib = lib.display().to_string();
    for now in [false, true] {
        let links: Vec<&str> = if now {
            vec![&lib, "-Wl,-z,now"]
        } else {
            vec![&lib]
        };
        let exe = build("MIXED", Hip::Linked, &[], &links);
        assert_relocations(&exe.exe, "hipMalloc", &["R_X86_64_JUMP_SLOT"]);
        let scratch = Scratch::new();
        let out = scratch.run(&exe, "8m", true, &[]);
        check_mixed(&out);
    }
}

#[track_caller]
fn check_mixed(out: &Output) {
    assert!(out.success(), "{}", out.describe("expected a clean exit"));
    let r = results(out);
    assert_eq!(
        get(&r, "call", out),
        [HIP_SUCCESS],
        "{}",
        out.describe("6 MiB")
    );
    assert_eq!(
        get(&r, "pointer", out),
        [HIP_SUCCESS],
        "{}",
        out.describe("2 MiB more fits exactly (6 MiB counted once)")
    );
    assert_eq!(
        get(&r, "third", out),
        [HIP_OUT_OF_MEMORY],
        "{}",
        out.describe("the table's pointer is wrapped")
    );
    assert_eq!(
        get(&r, "meminfo", out),
        [HIP_SUCCESS, 0, LIMIT],
        "{}",
        out.describe("meminfo")
    );
    assert_eq!(
        get(&r, "usage", out)[1],
        LIMIT,
        "{}",
        out.describe("live bytes")
    );
}

/// A known way around the hook: a second copy of the runtime in a new link-map namespace
/// (`dlmopen(LM_ID_NEWLM)`) is not wrapped. Documents the fact; fails if it changes.
#[test]
fn dlmopen_of_a_second_runtime_copy_is_not_limited() {
    let exe = build("DLMOPEN", Hip::Linked, &[], &[]);
    let scratch = Scratch::new();
    let out = scratch.run(&exe, "8m", true, &[]);
    assert!(out.success(), "{}", out.describe("expected a clean exit"));
    let r = results(&out);
    assert_eq!(get(&r, "first", &out), [HIP_SUCCESS]);
    assert_eq!(
        get(&r, "second", &out),
        [HIP_SUCCESS],
        "{}",
        out.describe("the dlmopen'd copy is not wrapped (update docs/compatibility.md)")
    );
}

/// A known way around the hook: a statically linked program has no dynamic loader, so
/// LD_AUDIT loads nothing into it (the dynamically linked build of the same source shows the
/// module mapped). hipsim, like ROCm's runtime, is shared-only, so such a program would have
/// to bring its own runtime (or talk to the driver) - and nothing limits it.
#[test]
fn a_static_program_loads_no_audit_module() {
    let scratch = Scratch::new();
    for (flags, expected) in [(&[][..], 1), (&["-static"][..], 0)] {
        let exe = build("MAPS", Hip::NotLinked, flags, &[]);
        let out = scratch.run(&exe, "8m", true, &[]);
        assert!(out.success(), "{}", out.describe("expected a clean exit"));
        assert_eq!(
            get(&results(&out), "audit-mapped", &out),
            [expected],
            "{}",
            out.describe(&format!("built with {flags:?}"))
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Runtimes
// ---------------------------------------------------------------------------------------------

/// The symbol-version nodes a library's dynamic symbols carry (`hip_4.2`, ...).
fn version_nodes(lib: &Path) -> std::collections::BTreeSet<String> {
    tool("objdump", &["-T"], lib)
        .lines()
        .filter(|l| l.contains(" DF .text"))
        .filter_map(|l| l.split_ascii_whitespace().nth(5).map(str::to_string))
        .filter(|v| v.starts_with("hip_"))
        .collect()
}

/// The simulator's ROCm 5, 6 and 7 symbol-version layouts: the limit holds in each.
#[test]
fn rocm_5_6_and_7_symbol_layouts() {
    let mut layouts = Vec::new();
    for abi in RocmAbi::ALL {
        let dir = testkit::hipsim_for_abi(abi);
        let nodes = version_nodes(&dir.join("libamdhip64.so"));
        assert!(!nodes.is_empty(), "{abi:?}: no hip_* version nodes");
        layouts.push(nodes);
        let exe = build("DIRECT", Hip::LinkedFrom(&dir), &[], &[]);
        check_shape(&exe, &[], &[]);
        let exe = build(
            "DIRECT",
            Hip::LinkedFrom(&dir),
            &["-fno-plt"],
            &["-Wl,-z,now"],
        );
        check_shape(&exe, &[], &[]);
    }
    assert!(
        layouts[0] != layouts[1] && layouts[1] != layouts[2] && layouts[0] != layouts[2],
        "the three builds must differ in symbol versions: {layouts:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// A refused redirect (W^X policies): the GOT-patching fallback
// ---------------------------------------------------------------------------------------------

/// The stand-in runtime (`minihip.c`) linked with `-z noseparate-code`, so that its dynamic
/// symbol table shares an executable segment with its code, as in runtimes linked before
/// binutils 2.31: rewriting it then needs pages both writable and executable. Returns the
/// directory holding `libamdhip64.so`.
fn runtime_with_symbols_in_executable_pages(scratch: &Scratch) -> PathBuf {
    let dir = scratch.dir.path().join("wx-runtime");
    std::fs::create_dir_all(&dir).expect("create the runtime's directory");
    let lib = dir.join("libamdhip64.so");
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_string()))
        .args(["-O1", "-shared", "-fPIC", "-Wl,-z,noseparate-code"])
        .args(["-Wl,-soname,libamdhip64.so", "-o"])
        .arg(&lib)
        .arg(compat_dir().join("minihip.c"))
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "building the stand-in runtime: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The premise: the segment holding .dynsym is executable.
    let sections = tool("readelf", &["-S", "-W"], &lib);
    let dynsym = sections
        .lines()
        .find(|l| l.contains(" .dynsym "))
        .and_then(|l| l.split_whitespace().skip_while(|w| *w != ".dynsym").nth(2))
        .and_then(|a| u64::from_str_radix(a, 16).ok())
        .expect("the runtime has a .dynsym");
    let segments = tool("readelf", &["-l", "-W"], &lib);
    let executable = segments.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.first() == Some(&"LOAD") && f.len() >= 7 && {
            let vaddr = u64::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap_or(0);
            let size = u64::from_str_radix(f[5].trim_start_matches("0x"), 16).unwrap_or(0);
            (vaddr..vaddr + size).contains(&dynsym) && f[6..].concat().contains('E')
        }
    });
    assert!(
        executable,
        "-z noseparate-code must put .dynsym in an executable segment:\n{segments}"
    );
    dir
}

const REDIRECT_REFUSED: &str = "cannot redirect libamdhip64's HIP functions to the hook";

/// Under a W^X policy the hook cannot rewrite such a runtime's symbol table, says so, and falls
/// back to patching the program's relocation slots, which must still hold every shape bound
/// through them: a lazy PLT call (its slot gets the wrapper before the first call), `-z now`,
/// `-fno-plt` and an address-taken pointer. Without the policy the same runtime is redirected
/// as usual (the control run), so it is the policy that forces the fallback.
#[test]
fn a_refused_redirect_falls_back_to_patching_and_still_holds() {
    let scratch = Scratch::new();
    let runtime = runtime_with_symbols_in_executable_pages(&scratch);
    let wxdeny = Fixture::from_path(compat_dir().join("wxdeny.c"))
        .without_hip()
        .hip_dir(&runtime)
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    // (what, shape, cflags, link flags, arguments)
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
    );
    let shapes: [Case; 5] = [
        ("lazy PLT call", "DIRECT", &[], &[], &[]),
        ("-z now", "DIRECT", &[], &["-Wl,-z,now"], &[]),
        ("-fno-plt", "DIRECT", &["-fno-plt"], &[], &[]),
        ("address-taken pointer", "POINTER", &[], &[], &[]),
        ("pointer table", "POINTER", &[], &[], &["table"]),
    ];
    for (what, shape, cflags, links, args) in shapes {
        let exe = build(shape, Hip::LinkedFrom(&runtime), cflags, links);
        let ledger = scratch.dir.path().join(format!("ledger-{what}"));
        let run = |under_policy: bool| {
            let run = if under_policy {
                wxdeny.run().arg(&exe.exe)
            } else {
                exe.run()
            };
            run.args(args)
                .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
                .env("HIP_DEVICE_MEMORY_SHARED_CACHE", &ledger)
                .audit()
                .output()
        };
        let control = run(false);
        assert!(
            !control.stderr.contains(REDIRECT_REFUSED),
            "{}",
            control.describe(&format!(
                "{what}: without the policy the redirect must work"
            ))
        );
        assert_held(&control);
        let _ = std::fs::remove_file(&ledger);
        let out = run(true);
        assert!(
            out.stderr.contains(REDIRECT_REFUSED) && out.stderr.contains("(os error 13)"),
            "{}",
            out.describe(&format!("{what}: the refused redirect must be logged"))
        );
        assert_held(&out);
    }
}

// ---------------------------------------------------------------------------------------------
// Older glibc (Debian bullseye, glibc 2.31), see ci/old-glibc.sh
// ---------------------------------------------------------------------------------------------

/// Runs `args` inside `root` with exactly `env` (plus PATH). The variables are handed to the
/// root's own `env -i`, never to the host's `chroot` program, whose loader would otherwise try
/// to load the root's LD_AUDIT path on the host.
fn run_in_root(root: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new("chroot");
    cmd.arg(root)
        .args(["/usr/bin/env", "-i", "PATH=/usr/bin:/bin"])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    for (k, v) in env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.args(args)
        .output()
        .unwrap_or_else(|e| panic!("chroot {}: {e}", root.display()))
}

fn checked_in_root(root: &Path, args: &[&str]) -> String {
    let out = run_in_root(root, args, &[]);
    assert!(
        out.status.success(),
        "chroot {} {args:?} failed: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Converts a chroot run into a testkit [`Output`] for the shared assertions.
fn as_output(exe: &str, out: std::process::Output) -> Output {
    Output {
        exe: PathBuf::from(exe),
        status: out.status,
        timed_out: false,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// (name, shape, cflags, link flags, extra environment) of one old-glibc build.
type OldShape<'a> = (
    &'a str,
    &'a str,
    &'a [&'a str],
    &'a [&'a str],
    &'a [(&'a str, &'a str)],
);

/// The start-up-bound shapes on glibc 2.31, compiled and run inside the prepared root with its
/// own loader. Skipped (with instructions) unless `AMVGPU_OLD_GLIBC_ROOT` names the root.
#[test]
fn old_glibc_root() {
    let Some(root) = std::env::var_os("AMVGPU_OLD_GLIBC_ROOT") else {
        println!(
            "skipped: set AMVGPU_OLD_GLIBC_ROOT to a Debian bullseye root prepared by \
             ci/old-glibc.sh (or just run ci/old-glibc.sh, which does both)"
        );
        return;
    };
    let root = PathBuf::from(root);
    let ldd = checked_in_root(&root, &["ldd", "--version"]);
    let version = ldd.lines().next().unwrap_or_default().to_string();
    assert!(
        version.ends_with(" 2.31"),
        "{}: expected glibc 2.31 in the root, `ldd --version` says {version:?}",
        root.display()
    );
    let work = root.join("amvgpu");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("lib")).expect("create <root>/amvgpu/lib");
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testkit/c");
    for (from, to) in [
        (compat_dir().join("shape.c"), "shape.c"),
        (compat_dir().join("minihip.c"), "minihip.c"),
        (include.join("fixture.h"), "fixture.h"),
        (include.join("hip_sim_api.h"), "hip_sim_api.h"),
        (testkit::amvgpu().to_path_buf(), "lib/libamvgpu.so"),
    ] {
        std::fs::copy(&from, work.join(to))
            .unwrap_or_else(|e| panic!("copy {} into the root: {e}", from.display()));
    }
    // hipsim needs GLIBC_2.34; the root's own stand-in runtime is built with its own gcc.
    checked_in_root(
        &root,
        &[
            "gcc",
            "-O1",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libamdhip64.so",
            "-o",
            "/amvgpu/lib/libamdhip64.so",
            "/amvgpu/minihip.c",
        ],
    );
    checked_in_root(
        &root,
        &[
            "gcc",
            "-std=gnu11",
            "-O1",
            "-I/amvgpu",
            "-DSHAPE_TABLE_LIB",
            "-shared",
            "-fPIC",
            "-o",
            "/amvgpu/lib/libtable.so",
            "/amvgpu/shape.c",
            "-L/amvgpu/lib",
            "-lamdhip64",
        ],
    );
    let shapes: [OldShape; 7] = [
        ("plt", "DIRECT", &[], &[], &[]),
        ("znow", "DIRECT", &[], &["-Wl,-z,now"], &[]),
        ("bindnow", "DIRECT", &[], &[], &[("LD_BIND_NOW", "1")]),
        ("noplt", "DIRECT", &["-fno-plt"], &[], &[]),
        ("noplt_znow", "DIRECT", &["-fno-plt"], &["-Wl,-z,now"], &[]),
        ("pointer", "POINTER", &[], &[], &[]),
        (
            "mixed_znow",
            "MIXED",
            &[],
            &["/amvgpu/lib/libtable.so", "-Wl,-z,now"],
            &[],
        ),
    ];
    for (name, shape, cflags, links, env) in shapes {
        let exe = format!("/amvgpu/{name}");
        let define = format!("-DSHAPE_{shape}");
        let mut args = vec!["gcc", "-std=gnu11", "-O1", "-I/amvgpu", &define];
        args.extend_from_slice(cflags);
        args.extend_from_slice(&["-o", &exe, "/amvgpu/shape.c", "-L/amvgpu/lib"]);
        args.extend_from_slice(&["-Wl,-rpath,/amvgpu/lib", "-lamdhip64", "-pthread", "-ldl"]);
        args.extend_from_slice(links);
        checked_in_root(&root, &args);
        let mut run_env = vec![
            ("HIP_DEVICE_MEMORY_LIMIT", "8m"),
            ("HIP_DEVICE_MEMORY_SHARED_CACHE", "/amvgpu/ledger"),
            ("LD_AUDIT", "/amvgpu/lib/libamvgpu.so"),
            ("LIBHIP_LOG_LEVEL", "4"),
        ];
        run_env.extend_from_slice(env);
        let _ = std::fs::remove_file(work.join("ledger"));
        let out = as_output(&exe, run_in_root(&root, &[&exe], &run_env));
        assert!(
            !out.stderr.contains("cannot be loaded as audit interface"),
            "{}",
            out.describe("glibc 2.31 must accept libamvgpu.so")
        );
        if shape == "MIXED" {
            check_mixed(&out);
        } else {
            assert_held(&out);
        }
        // Without the hook the stand-in runtime grants the 4 MiB.
        let plain = as_output(&exe, run_in_root(&root, &[&exe], &run_env[..2]));
        if shape != "MIXED" {
            assert_unheld(&plain);
        }
        println!("glibc 2.31 {name}: held to 8 MiB");
    }
}
