//! The pod's settings as the program and the runtime see them (issue 5): one snapshot per
//! process from the initial environment, the config file and the ancestors; `getenv` answered
//! for the pod's names (restored when missing, pinned against the process's own changes);
//! `HIP_OVERSUBSCRIBE`, `AMD_TASK_PRIORITY`; CU-mask checks.
//!
//! Every run uses `envprobe.c` (one output line per step) under `LD_AUDIT`, with its own ledger
//! file, so runs never share accounting.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use testkit::{Compiled, Fixture, Output, Run, TempDir};

const MIB: u64 = 1 << 20;

fn probe() -> &'static Compiled {
    static PROBE: OnceLock<Compiled> = OnceLock::new();
    PROBE.get_or_init(|| compile_probe(&[]))
}

/// The same probe compiled with `-fno-plt`: its `getenv` calls go through a GLOB_DAT GOT slot,
/// never a PLT stub.
fn probe_no_plt() -> &'static Compiled {
    static PROBE: OnceLock<Compiled> = OnceLock::new();
    PROBE.get_or_init(|| compile_probe(&["-fno-plt"]))
}

fn compile_probe(cflags: &[&str]) -> Compiled {
    let mut fixture = Fixture::from_path(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/env_fixtures/envprobe.c"),
    );
    for flag in cflags {
        fixture = fixture.cflag(flag);
    }
    fixture
        .link_flag("-ldl")
        .compile()
        .unwrap_or_else(|e| panic!("envprobe compiles with {cflags:?}: {e}"))
}

/// `target/<profile>/libhsa_runtime64.so`, built on first use like testkit builds hipsim.
fn hsasim() -> &'static Path {
    static HSA: OnceLock<PathBuf> = OnceLock::new();
    HSA.get_or_init(|| {
        let layout = testkit::target_layout().expect("test runs from a cargo target dir");
        let lib = layout.profile_dir.join("libhsa_runtime64.so");
        if std::env::var_os("TESTKIT_NO_BUILD").is_none() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut cmd = std::process::Command::new(cargo);
            cmd.args(["build", "--quiet", "-p", "hsasim", "--manifest-path"])
                .arg(testkit::workspace_root().join("Cargo.toml"))
                .env("CARGO_TARGET_DIR", &layout.root);
            match layout.profile.as_str() {
                "debug" => {}
                "release" => {
                    cmd.arg("--release");
                }
                other => {
                    cmd.args(["--profile", other]);
                }
            }
            if let Some(triple) = &layout.triple {
                cmd.args(["--target", triple]);
            }
            let status = cmd.status().expect("cargo runs");
            assert!(status.success(), "cargo build -p hsasim failed");
        }
        assert!(
            lib.exists(),
            "{} missing: cargo build -p hsasim",
            lib.display()
        );
        lib
    })
}

/// A hooked run with a private ledger.
fn run(dir: &TempDir, steps: &[&str]) -> Run {
    probe()
        .run()
        .audit()
        .env("HIP_DEVICE_MEMORY_SHARED_CACHE", dir.path().join("ledger"))
        .args(steps)
}

fn lines(out: &Output) -> Vec<String> {
    out.stdout.lines().map(str::to_string).collect()
}

fn stderr(out: &Output) -> String {
    out.stderr.clone()
}

fn expect(out: &Output, expected: &[&str]) {
    assert!(out.success(), "{}", out.describe("success"));
    assert_eq!(lines(out), expected, "stderr:\n{}", stderr(out));
}

#[test]
fn a_clean_environment_child_keeps_the_pods_limit_and_settings() {
    let dir = testkit::temp_dir();
    let child = [
        "get:HSA_CU_MASK",
        "sget:HSA_CU_MASK",
        "rt:HSA_CU_MASK",
        "get:ROCR_VISIBLE_DEVICES",
        "rt:ROCR_VISIBLE_DEVICES",
        "get:HIP_DEVICE_MEMORY_LIMIT",
        "malloc:6291456",
        "malloc:4194304",
    ]
    .join("+");
    let spawn = format!("spawn-clean:{child}");
    let out = run(&dir, &["malloc:4096", "freelast", &spawn])
        .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
        .env("HSA_CU_MASK", "0:0-7")
        .env("ROCR_VISIBLE_DEVICES", "0")
        .output();
    expect(
        &out,
        &[
            "malloc 0",
            "free 0",
            "get HSA_CU_MASK=0:0-7",
            "sget HSA_CU_MASK=0:0-7",
            "rt HSA_CU_MASK=0:0-7",
            "get ROCR_VISIBLE_DEVICES=0",
            "rt ROCR_VISIBLE_DEVICES=0",
            "get HIP_DEVICE_MEMORY_LIMIT=8m",
            "malloc 0",
            "malloc 2",
            "child 0",
        ],
    );
}

#[test]
fn without_a_pod_setting_anywhere_the_child_is_not_limited() {
    // The control for the test above: the same clean child under a parent without a limit
    // allocates freely, so the refusal above came from the inherited limit.
    let dir = testkit::temp_dir();
    let out = run(
        &dir,
        &["spawn-clean:get:HSA_CU_MASK+malloc:6291456+malloc:4194304"],
    )
    .output();
    expect(
        &out,
        &["get HSA_CU_MASK=(null)", "malloc 0", "malloc 0", "child 0"],
    );
}

#[test]
fn a_child_whose_environment_has_the_pods_limit_takes_nothing_from_its_ancestors() {
    // The normal case, and the cheap one: a process whose own environment carries the pod's
    // policy (here its limit and ledger) is not a stripped child, so no ancestor is read and a
    // setting its environment left out (the parent's CU mask and devices) stays unset.
    let dir = testkit::temp_dir();
    let child = [
        "get:HSA_CU_MASK",
        "rt:HSA_CU_MASK",
        "get:ROCR_VISIBLE_DEVICES",
        "get:HIP_DEVICE_MEMORY_LIMIT",
        "malloc:6291456",
        "malloc:4194304",
    ]
    .join("+");
    let spawn = format!(
        "spawn-env:HIP_DEVICE_MEMORY_LIMIT,HIP_DEVICE_MEMORY_SHARED_CACHE,LIBHIP_LOG_LEVEL=4:{child}"
    );
    let out = run(&dir, &[&spawn])
        .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
        .env("HSA_CU_MASK", "0:0-7")
        .env("ROCR_VISIBLE_DEVICES", "0")
        .output();
    expect(
        &out,
        &[
            "get HSA_CU_MASK=(null)",
            "rt HSA_CU_MASK=(null)",
            "get ROCR_VISIBLE_DEVICES=(null)",
            "get HIP_DEVICE_MEMORY_LIMIT=8m",
            "malloc 0",
            "malloc 2",
            "child 0",
        ],
    );
    let err = stderr(&out);
    assert!(
        err.contains("the pod's settings come from this process's own sources"),
        "{err}"
    );
    assert!(!err.contains("ancestor"), "{err}");
}

#[test]
fn a_child_given_only_its_gpu_and_log_level_still_gets_the_pods_limit() {
    // Visible devices and the log level are what a launcher or a user sets for a child itself;
    // they do not carry the pod's policy, so such a child is still a stripped one and gets the
    // pod's settings from its parent (its own values win).
    let dir = testkit::temp_dir();
    let child = [
        "get:ROCR_VISIBLE_DEVICES",
        "get:HSA_CU_MASK",
        "get:HIP_DEVICE_MEMORY_LIMIT",
        "malloc:6291456",
        "malloc:4194304",
    ]
    .join("+");
    let spawn = format!("spawn-env:ROCR_VISIBLE_DEVICES=1,LIBHIP_LOG_LEVEL=4:{child}");
    let out = run(&dir, &[&spawn])
        .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
        .env("HSA_CU_MASK", "0:0-7")
        .env("ROCR_VISIBLE_DEVICES", "0")
        .output();
    expect(
        &out,
        &[
            "get ROCR_VISIBLE_DEVICES=1",
            "get HSA_CU_MASK=0:0-7",
            "get HIP_DEVICE_MEMORY_LIMIT=8m",
            "malloc 0",
            "malloc 2",
            "child 0",
        ],
    );
    let err = stderr(&out);
    assert!(
        err.contains("pod setting(s) inherited; the walk ends there"),
        "{err}"
    );
}

#[test]
fn a_stripped_child_takes_the_pods_settings_from_the_nearest_ancestor_that_has_them_only() {
    // top (limit 8m, CU mask) -> middle (only ROC_GLOBAL_CU_MASK: a policy setting, no limit)
    // -> clean grandchildren. Each grandchild takes the middle's settings and stops there: it
    // runs as its parent does (no limit), not with a mix of the middle's and the top's.
    let dir = testkit::temp_dir();
    let middle = [
        "spawn-clean:get:ROC_GLOBAL_CU_MASK",
        "spawn-clean:get:HSA_CU_MASK",
        "spawn-clean:get:HIP_DEVICE_MEMORY_LIMIT",
        "spawn-clean:malloc:10485760",
    ]
    .join("+");
    let spawn = format!("spawn-env:ROC_GLOBAL_CU_MASK=0xff:{middle}");
    let out = run(&dir, &[&spawn])
        .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
        .env("HSA_CU_MASK", "0:0-7")
        .output();
    expect(
        &out,
        &[
            "get ROC_GLOBAL_CU_MASK=0xff",
            "child 0",
            "get HSA_CU_MASK=(null)",
            "child 0",
            "get HIP_DEVICE_MEMORY_LIMIT=(null)",
            "child 0",
            "malloc 0",
            "child 0",
            "child 0",
        ],
    );
}

#[test]
fn setenv_before_the_first_hip_call_changes_nothing_enforced() {
    let dir = testkit::temp_dir();
    let out = run(
        &dir,
        &[
            // In-place replacements of variables the process started with.
            "set:HIP_DEVICE_MEMORY_LIMIT=100g",
            "set:HSA_CU_MASK=0:0-303",
            // New variables: the environment array grows (and moves).
            "set:HIP_DEVICE_MEMORY_LIMIT_0=100g",
            "set:HIP_OVERSUBSCRIBE=true",
            "set:ROC_GLOBAL_CU_MASK=0xffffffff",
            "get:HSA_CU_MASK",
            "rt:HSA_CU_MASK",
            "get:HIP_DEVICE_MEMORY_LIMIT",
            "get:HIP_DEVICE_MEMORY_LIMIT_0",
            "malloc:6291456",
            "malloc:4194304",
            "managed",
            // A name the pod did not set keeps the process's own value.
            "get:ROC_GLOBAL_CU_MASK",
        ],
    )
    .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
    .env("HSA_CU_MASK", "0:0-7")
    .output();
    expect(
        &out,
        &[
            "set HIP_DEVICE_MEMORY_LIMIT",
            "set HSA_CU_MASK",
            "set HIP_DEVICE_MEMORY_LIMIT_0",
            "set HIP_OVERSUBSCRIBE",
            "set ROC_GLOBAL_CU_MASK",
            "get HSA_CU_MASK=0:0-7",
            "rt HSA_CU_MASK=0:0-7",
            "get HIP_DEVICE_MEMORY_LIMIT=8m",
            "get HIP_DEVICE_MEMORY_LIMIT_0=100g",
            "malloc 0",
            "malloc 2",
            "managed 0 0",
            "get ROC_GLOBAL_CU_MASK=0xffffffff",
        ],
    );
}

#[test]
fn restored_names_keep_the_processs_own_value_when_it_has_one() {
    let dir = testkit::temp_dir();
    let out = run(
        &dir,
        &[
            "set:ROCR_VISIBLE_DEVICES=1",
            "get:ROCR_VISIBLE_DEVICES",
            "rt:ROCR_VISIBLE_DEVICES",
        ],
    )
    .env("ROCR_VISIBLE_DEVICES", "0")
    .output();
    expect(
        &out,
        &[
            "set ROCR_VISIBLE_DEVICES",
            "get ROCR_VISIBLE_DEVICES=1",
            "rt ROCR_VISIBLE_DEVICES=1",
        ],
    );
}

#[test]
fn the_config_file_fills_what_the_environment_lacks() {
    let dir = testkit::temp_dir();
    let file = dir.path().join("env");
    std::fs::write(
        &file,
        "# written by the device plugin\nHIP_DEVICE_MEMORY_LIMIT=8m\nHSA_CU_MASK=0:8-15\n\
         ROCR_VISIBLE_DEVICES=0\nnot a setting\n",
    )
    .unwrap();
    let out = run(
        &dir,
        &[
            "get:HSA_CU_MASK",
            "rt:ROCR_VISIBLE_DEVICES",
            "malloc:6291456",
            "malloc:4194304",
        ],
    )
    .env("AMVGPU_CONFIG_FILE", &file)
    // The process's own value wins over the file's.
    .env("HSA_CU_MASK", "0:0-7")
    .output();
    expect(
        &out,
        &[
            "get HSA_CU_MASK=0:0-7",
            "rt ROCR_VISIBLE_DEVICES=0",
            "malloc 0",
            "malloc 2",
        ],
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "config file {}: line 5 is not KEY=VALUE",
            file.display()
        )),
        "{err}"
    );
}

#[test]
fn an_unreadable_config_file_is_skipped_with_a_debug_line() {
    let dir = testkit::temp_dir();
    let missing = dir.path().join("absent");
    let out = run(&dir, &["get:HSA_CU_MASK", "malloc:6291456"])
        .env("AMVGPU_CONFIG_FILE", &missing)
        .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
        .env("LIBHIP_LOG_LEVEL", "4")
        .output();
    expect(&out, &["get HSA_CU_MASK=(null)", "malloc 0"]);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("config file {}: No such file", missing.display())),
        "{err}"
    );
}

#[test]
fn oversubscription_serves_hipmalloc_from_managed_memory_and_still_counts() {
    let dir = testkit::temp_dir();
    let out = run(
        &dir,
        &[
            "malloc:6291456",
            "managed",
            "live",
            "malloc:4194304",
            "freelast",
            "managed",
            "malloc:4194304",
        ],
    )
    .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
    .env("HIP_OVERSUBSCRIBE", "TRUE")
    .output();
    expect(
        &out,
        &[
            "malloc 0",
            &format!("managed 1 {}", 6 * MIB),
            // Managed memory is not device memory in the simulator: nothing on the device.
            "live 0",
            // Still held to the limit.
            "malloc 2",
            "free 0",
            "managed 0 0",
            "malloc 0",
        ],
    );
}

#[test]
fn oversubscription_is_off_for_other_values() {
    let dir = testkit::temp_dir();
    for value in ["false", "yes", "0"] {
        let out = run(&dir, &["malloc:4096", "managed"])
            .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
            .env("HIP_OVERSUBSCRIBE", value)
            .output();
        expect(&out, &["malloc 0", "managed 0 0"]);
    }
    let out = run(&dir, &["malloc:4096", "managed"])
        .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
        .env("HIP_OVERSUBSCRIBE", "1")
        .output();
    expect(&out, &["malloc 0", "managed 1 4096"]);
}

fn stream_priority(priority: Option<&str>) -> (String, String) {
    let dir = testkit::temp_dir();
    let mut r = run(&dir, &["stream"]).env("HIPSIM_HSA", hsasim());
    if let Some(p) = priority {
        r = r.env("AMD_TASK_PRIORITY", p);
    }
    let out = r.output();
    assert!(out.success(), "{}", out.describe("success"));
    (lines(&out).join("\n"), stderr(&out))
}

#[test]
fn task_priority_reaches_every_hsa_queue_the_runtime_creates() {
    // HSA_AMD_QUEUE_PRIORITY_HIGH = 2 for 0, LOW = 0 for a positive integer, NORMAL = 1 (the
    // runtime's default) otherwise.
    assert_eq!(stream_priority(Some("0")).0, "stream 0 prio 2");
    assert_eq!(stream_priority(Some("5")).0, "stream 0 prio 0");
    assert_eq!(stream_priority(None).0, "stream 0 prio 1");
    let (out, err) = stream_priority(Some("high"));
    assert_eq!(out, "stream 0 prio 1");
    assert!(err.contains("AMD_TASK_PRIORITY=\"high\""), "{err}");
}

/// Runs one HIP call with `HSA_CU_MASK=mask` on a simulated `arch` with `cus` CUs; stderr.
fn mask_report(arch: &str, cus: &str, mask: &str) -> String {
    let dir = testkit::temp_dir();
    let out = run(&dir, &["malloc:4096"])
        .env("HIPSIM_ARCH", arch)
        .env("HIPSIM_CUS", cus)
        .env("HSA_CU_MASK", mask)
        .output();
    expect(&out, &["malloc 0"]);
    stderr(&out)
}

#[test]
fn a_mask_rocr_would_ignore_or_that_fails_open_is_reported_with_the_reason() {
    let err = mask_report("gfx942", "304", "0:5-3");
    assert!(
        err.contains("ERROR: HSA_CU_MASK=\"0:5-3\"") && err.contains("runs the GPUs"),
        "{err}"
    );
    let err = mask_report("gfx942", "304", "0:0-3");
    assert!(
        err.contains("HSA_CU_MASK=\"0:0-3\": GPU 0 (304 CUs): XCD 4 of 8 gets no CU"),
        "{err}"
    );
    let err = mask_report("gfx1100", "96", "0:0-2");
    assert!(
        err.contains("HSA_CU_MASK=\"0:0-2\": GPU 0 (96 CUs): WGP 1 is split"),
        "{err}"
    );
    // A GPU the machine does not have (1 simulated device).
    let err = mask_report("gfx942", "304", "0:0-7;1:0-7");
    assert!(err.contains("GPU 1 does not exist"), "{err}");
    // Safe masks say nothing.
    for (arch, cus, mask) in [("gfx942", "304", "0:0-15"), ("gfx1100", "96", "0:0-3")] {
        let err = mask_report(arch, cus, mask);
        assert!(!err.contains("HSA_CU_MASK"), "{arch} {mask}: {err}");
    }
}

#[test]
fn stream_cu_masks_are_narrowed_to_the_pods_slice() {
    let dir = testkit::temp_dir();
    let out = run(
        &dir,
        &[
            "cumask:0xffffffff,0xffffffff",
            "cumask:0xffff0000",
            // 0-3 alone misses XCDs 4..7 of a gfx942: the pod's own CUs instead.
            "cumask:0xf",
        ],
    )
    .env("HIPSIM_ARCH", "gfx942")
    .env("HSA_CU_MASK", "0:0-15")
    .output();
    expect(&out, &["cumask 0 0xffff 0", "cumask 1", "cumask 0 0xffff"]);
    // Without a pod mask the request reaches the runtime unchanged.
    let out = run(&dir, &["cumask:0xf"])
        .env("HIPSIM_ARCH", "gfx942")
        .output();
    expect(&out, &["cumask 0 0xf"]);
}

#[test]
fn the_ancestor_walk_stops_at_a_process_of_another_user() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: starting a child as another user needs root");
        return;
    }
    // The same clean child as in the first test, but running as `nobody` under a root parent:
    // it must not pick up the parent's settings. (The kernel would also refuse `nobody` the
    // root parent's environ; the hook stops the walk there before asking.)
    let dir = testkit::temp_dir();
    let out = run(
        &dir,
        &["spawn-clean-as:65534:get:HSA_CU_MASK+malloc:6291456+malloc:4194304"],
    )
    .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
    .env("HSA_CU_MASK", "0:0-7")
    .output();
    expect(
        &out,
        &["get HSA_CU_MASK=(null)", "malloc 0", "malloc 0", "child 0"],
    );
}

/// A program whose `getenv` is a GOT-only binding (`-fno-plt`) is answered by the hook too:
/// libc's definition itself is redirected, so the slot the loader fills at start-up holds the
/// wrapper. (While the hook relied on `la_symbind64`, this was a documented gap.)
#[test]
fn getenv_through_a_got_only_binding_is_answered_too() {
    let relocs = std::process::Command::new("readelf")
        .args(["-rW"])
        .arg(&probe_no_plt().exe)
        .output()
        .expect("readelf runs");
    let relocs = String::from_utf8_lossy(&relocs.stdout);
    let getenv: Vec<&str> = relocs
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w.starts_with("getenv@")))
        .collect();
    assert!(
        !getenv.is_empty() && getenv.iter().all(|l| l.contains("R_X86_64_GLOB_DAT")),
        "expected getenv through GLOB_DAT only:\n{relocs}"
    );
    let dir = testkit::temp_dir();
    let out = probe_no_plt()
        .run()
        .audit()
        .env("HIP_DEVICE_MEMORY_SHARED_CACHE", dir.path().join("ledger"))
        .args([
            "set:HSA_CU_MASK=0:0-303",
            "get:HSA_CU_MASK",
            "set:HIP_DEVICE_MEMORY_LIMIT=100g",
            "get:HIP_DEVICE_MEMORY_LIMIT",
        ])
        .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
        .env("HSA_CU_MASK", "0:0-7")
        .output();
    expect(
        &out,
        &[
            "set HSA_CU_MASK",
            "get HSA_CU_MASK=0:0-7",
            "set HIP_DEVICE_MEMORY_LIMIT",
            "get HIP_DEVICE_MEMORY_LIMIT=8m",
        ],
    );
}
