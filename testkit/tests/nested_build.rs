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
