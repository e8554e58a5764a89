//! `testkit::libs()` runs `cargo build -p hipsim` from inside `cargo test`. This checks that
//! it does not deadlock on cargo's build lock (it would hit the 900 s deadline and panic) and that
//! the library it returns is at least as new as every simulator source file.

use std::path::Path;
use std::time::SystemTime;

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let time = if path.is_dir() {
            newest_source(&path)
        } else {
            path.metadata().unwrap().modified().unwrap()
        };
        newest = newest.max(time);
    }
    newest
}

#[test]
fn nested_cargo_build_yields_a_fresh_simulator() {
    let libs = testkit::libs();
    let built = libs.hipsim.metadata().unwrap().modified().unwrap();
    let root = testkit::workspace_root();
    for dir in ["hipsim/src", "hipsim/c", "hip-sys/src"] {
        let newest = newest_source(&root.join(dir));
        assert!(
            built >= newest,
            "{} is older than {dir}",
            libs.hipsim.display()
        );
    }
}

#[test]
fn fixtures_compile_run_and_report_failed_checks() {
    let ok = testkit::Fixture::from_source(
        "testkit_ok",
        r#"#include "fixture.h"
           int main(int argc, char **argv) {
               int n = 0;
               CHECK_HIP(hipGetDeviceCount(&n));
               printf("devices=%d arg=%s env=%s\n", n, argc > 1 ? argv[1] : "", getenv("HIPSIM_DEVICES"));
               return 0;
           }"#,
    )
    .compile()
    .unwrap();
    let out = ok.run().env("HIPSIM_DEVICES", "3").arg("hello").output();
    out.assert_success();
    assert_eq!(out.stdout, "devices=3 arg=hello env=3\n");

    let failing = testkit::Fixture::from_source(
        "testkit_fail",
        r#"#include "fixture.h"
           int main(void) { void *p; CHECK_HIP(hipMalloc(&p, (size_t)2 << 30)); return 0; }"#,
    )
    .compile()
    .unwrap();
    let out = failing.run().env("HIPSIM_VRAM", "1g").output();
    out.assert_code(1);
    assert!(
        out.stderr.contains(
            "hipMalloc(&p, (size_t)2 << 30) returned 2 (hipErrorOutOfMemory), expected 0"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn a_hanging_fixture_is_killed_at_its_timeout() {
    let hang = testkit::Fixture::from_source(
        "testkit_hang",
        "#define FIXTURE_NO_HIP\n#include \"fixture.h\"\n#include <unistd.h>\nint main(void) { puts(\"up\"); fflush(stdout); pause(); return 0; }",
    )
    .without_hip()
    .compile()
    .unwrap();
    let out = hang
        .run()
        .timeout(std::time::Duration::from_millis(500))
        .output();
    assert!(out.timed_out, "{}", out.describe("expected a timeout"));
    assert_eq!(out.stdout, "up\n");
}

#[test]
fn compile_errors_name_the_fixture_and_show_the_compiler_output() {
    let err = testkit::Fixture::from_source("testkit_broken", "int main(void) { return missing; }")
        .compile()
        .unwrap_err();
    assert!(
        err.contains("testkit_broken") && err.contains("missing"),
        "{err}"
    );
}

#[test]
fn extra_flags_reach_the_compiler_and_linker() {
    // -fno-plt and -z now: the program reaches hipMalloc through a GOT entry bound at load time
    // (the case an audit hook must patch itself); it must still run against the simulator.
    let src = r#"#include "fixture.h"
                 int main(void) { void *p; CHECK_HIP(hipMalloc(&p, 1)); CHECK_HIP(hipFree(p)); puts("ok"); return 0; }"#;
    let got_only = testkit::Fixture::from_source("testkit_noplt", src)
        .cflag("-fno-plt")
        .link_flag("-Wl,-z,now")
        .compile()
        .unwrap();
    let lazy = testkit::Fixture::from_source("testkit_noplt", src)
        .compile()
        .unwrap();
    assert_ne!(got_only.exe, lazy.exe, "flags are part of the cache key");
    let relocs = |exe: &std::path::Path| {
        testkit::tool_output("readelf", &[std::ffi::OsStr::new("-rW"), exe.as_os_str()]).unwrap()
    };
    let hip_malloc = |text: &str, kind: &str| {
        text.lines()
            .any(|l| l.contains(kind) && l.contains(" hipMalloc@hip_4.2"))
    };
    let got_text = relocs(&got_only.exe);
    assert!(
        hip_malloc(&got_text, "GLOB_DAT") && !hip_malloc(&got_text, "JUMP_SLO"),
        "{got_text}"
    );
    let lazy_text = relocs(&lazy.exe);
    assert!(hip_malloc(&lazy_text, "JUMP_SLO"), "{lazy_text}");
    let dynamic = testkit::tool_output(
        "readelf",
        &[std::ffi::OsStr::new("-d"), got_only.exe.as_os_str()],
    )
    .unwrap();
    assert!(dynamic.contains("NOW"), "{dynamic}");
    assert_eq!(got_only.run().output().assert_success().stdout, "ok\n");
}
