//! The real ROCm 5.2 runtime (Debian's libamdhip64-5) on this GPU-less machine, and the
//! simulator without devices, answer the same probe the same way.

use std::path::Path;
use testkit::Fixture;

const REAL_LIB: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
const REAL_HEADER: &str = "/usr/include/hip/hip_runtime_api.h";

/// What ROCm 5.2 answers without a GPU (measured on this machine).
const EXPECTED: &str = "hipGetDeviceCount=100 count=0\n\
                        hipMalloc=101 untouched=1\n\
                        hipMemGetInfo=101 untouched=1\n\
                        hipErrorNoDevice hipErrorInvalidDevice\n";

fn probe() -> Fixture {
    Fixture::from_path(format!(
        "{}/tests/fixtures/real_probe.c",
        env!("CARGO_MANIFEST_DIR")
    ))
}

#[test]
fn real_runtime_reports_no_device_and_exits_cleanly() {
    if !Path::new(REAL_LIB).exists() || !Path::new(REAL_HEADER).exists() {
        println!("SKIP: {REAL_LIB} or {REAL_HEADER} is missing (install libamdhip64-5 and libamdhip64-dev)");
        return;
    }
    let real = probe()
        .without_hip()
        .link_flag("-L/usr/lib/x86_64-linux-gnu")
        .link_flag("-l:libamdhip64.so.5")
        .compile()
        .unwrap();
    let deps = testkit::tool_output("ldd", &[real.exe.as_os_str()]).unwrap();
    // /lib and /usr/lib are one directory on Debian 12 (merged /usr).
    let resolved = deps
        .lines()
        .find_map(|l| l.trim().strip_prefix("libamdhip64.so.5 => "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("not linked against libamdhip64.so.5: {deps}"));
    assert_eq!(
        std::fs::canonicalize(resolved).unwrap(),
        std::fs::canonicalize(REAL_LIB).unwrap(),
        "{deps}"
    );
    let out = real.run().no_state().output();
    out.assert_success();
    assert_eq!(out.stdout, EXPECTED);
}

#[test]
fn simulator_without_devices_matches_the_real_runtime() {
    if !Path::new(REAL_HEADER).exists() {
        println!("SKIP: {REAL_HEADER} is missing (install libamdhip64-dev)");
        return;
    }
    let sim = probe().compile().unwrap();
    let out = sim.run().env("HIPSIM_DEVICES", "0").output();
    out.assert_success();
    assert_eq!(out.stdout, EXPECTED);
}
