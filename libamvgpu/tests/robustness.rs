//! Edge cases the earlier C hooks got wrong: racing threads, zero and absurd sizes, many live
//! allocations, 2 MiB-aligned pointers, unknown and double frees, frees on other threads and
//! devices, and logging that must never reach stdout.

mod common;
use common::*;

#[test]
fn eight_threads_racing_never_pass_the_limit() {
    let sb = Sandbox::new("race8", 1).limit("64m");
    let mut steps = Vec::new();
    for _ in 0..10 {
        steps.extend_from_slice(&["race:8:1m:64", "usage:0", "racefree", "meminfo"]);
    }
    let r = sb.run(&steps);
    r.expect_clean_exit();
    for round in 0..10 {
        let base = round * 4;
        r.expect_ok(base);
        assert_eq!(
            r.val(base, 0),
            64,
            "round {round}: exactly 64 x 1m fit in 64m\n{r}"
        );
        assert_eq!(
            r.val(base, 1),
            HIP_OUT_OF_MEMORY as u64,
            "round {round}: refusals say OOM\n{r}"
        );
        let (live, peak) = r.usage(base + 1);
        assert_eq!(live, 64 * MIB, "round {round}\n{r}");
        assert!(
            peak <= 64 * MIB,
            "round {round}: device peak {peak} above the limit\n{r}"
        );
        r.expect_ok(base + 2);
        assert_eq!(
            r.meminfo(base + 3),
            (64 * MIB, 64 * MIB),
            "round {round}\n{r}"
        );
    }
}

#[test]
fn eight_threads_racing_small_allocations() {
    let sb = Sandbox::new("race8small", 1).limit("1m");
    let r = sb.run(&["race:8:100:1000", "usage:0", "racefree", "meminfo"]);
    r.expect_clean_exit().expect_ok(0);
    // each 100-byte allocation takes a 4 KiB page
    assert_eq!(r.val(0, 0), 256, "{r}");
    assert!(r.usage(1).1 <= MIB, "{r}");
    r.expect_ok(2);
    assert_eq!(r.meminfo(3), (MIB, MIB), "{r}");
}

#[test]
fn zero_byte_malloc_succeeds() {
    let sb = Sandbox::new("zero", 1).limit("8m");
    let r = sb.run(&[
        "malloc:0:0",
        "meminfo",
        "malloc:1:8m",
        "malloc:2:0",
        "free:2",
        "free:0",
        "meminfo",
    ]);
    r.expect_clean_exit().expect_ok(0);
    assert_eq!(r.meminfo(1), (8 * MIB, 8 * MIB), "{r}");
    r.expect_ok(2);
    r.expect_ok(3); // even with the limit used up
    r.expect_ok(4).expect_ok(5);
    assert_eq!(r.meminfo(6), (0, 8 * MIB), "{r}");
}

#[test]
fn size_max_is_refused_and_changes_nothing() {
    let sb = Sandbox::new("sizemax", 1).limit("8m");
    let r = sb.run(&[
        "malloc:0:max",                  // 0
        "malloc:1:18446744073709547521", // 1: rounds past SIZE_MAX
        "malloc:2:9223372036854775808",  // 2: 2^63
        "pitch:3:max:2",                 // 3
        "m3d:4:4294967296:4294967296:2", // 4: the product overflows
        "extmalloc:5:max:0",             // 5
        "managed:6:max",                 // 6
        "meminfo",                       // 7
        "malloc:7:8m",                   // 8: the whole limit is still there
        "usage:0",                       // 9
    ]);
    r.expect_clean_exit();
    for i in 0..7 {
        r.expect_oom(i);
    }
    assert_eq!(r.meminfo(7), (8 * MIB, 8 * MIB), "{r}");
    r.expect_ok(8);
    assert_eq!(r.usage(9), (8 * MIB, 8 * MIB), "{r}");
}

#[test]
fn size_max_without_a_limit_gets_the_runtimes_answer() {
    let sb = Sandbox::new("sizemax_nolimit", 1);
    let steps = ["malloc:0:max", "malloc:1:1m", "meminfo"];
    let r = sb.run(&steps);
    let plain = sb.unhooked().run(&steps);
    r.expect_clean_exit();
    assert_eq!(r.stdout, plain.stdout, "{r}");
}

#[test]
fn a_hundred_thousand_live_allocations() {
    let sb = Sandbox::new("many", 1).limit("1g");
    let r = sb.run(&[
        "loop:100000:256",
        "meminfo",
        "usage:0",
        "freeloop",
        "meminfo",
        "malloc:0:1g",
    ]);
    r.expect_clean_exit();
    r.expect_ok(0);
    assert_eq!(r.val(0, 0), 100_000, "every allocation fits in 1g\n{r}");
    let charged = 100_000 * 4 * KIB;
    assert_eq!(r.meminfo(1), (GIB - charged, GIB), "{r}");
    assert_eq!(r.usage(2).0, charged, "{r}");
    r.expect_ok(3);
    assert_eq!(r.val(3, 0), 100_000, "{r}");
    assert_eq!(r.meminfo(4), (GIB, GIB), "usage back to 0\n{r}");
    r.expect_ok(5);
}

/// 2 MiB allocations get 2 MiB-aligned addresses: their low bits are all equal, which broke a
/// tracker that hashed them.
#[test]
fn thousands_of_2mib_aligned_allocations() {
    let sb = Sandbox::new("aligned", 1).vram(16 * GIB).limit("8g");
    let r = sb.run(&[
        "loop:4000:2m",
        "meminfo",
        "freeloop",
        "meminfo",
        "malloc:0:8g",
    ]);
    r.expect_clean_exit().expect_ok(0);
    assert_eq!(r.val(0, 0), 4000, "{r}");
    assert_eq!(r.meminfo(1).0, 8 * GIB - 4000 * 2 * MIB, "{r}");
    r.expect_ok(2);
    assert_eq!(r.meminfo(3), (8 * GIB, 8 * GIB), "{r}");
    r.expect_ok(4);
}

#[test]
fn freeing_an_unknown_pointer_passes_through_and_releases_nothing() {
    let sb = Sandbox::new("unknown", 1).limit("8m");
    let steps = [
        "malloc:0:6m",
        "freeraw:4096",
        "freeraw:140737488351232",
        "malloc:1:4m",
        "meminfo",
    ];
    let r = sb.run(&steps);
    let plain = sb.unhooked().run(&steps);
    r.expect_clean_exit();
    r.expect_ok(0);
    assert_eq!(
        r.rc(1),
        plain.rc(1),
        "hipFree of an unknown pointer: the runtime's answer\n{r}"
    );
    assert_eq!(r.rc(2), plain.rc(2), "{r}");
    assert_ne!(
        plain.rc(1),
        HIP_SUCCESS,
        "test bug: the runtime accepts a made-up pointer"
    );
    r.expect_oom(3);
    assert_eq!(r.meminfo(4), (2 * MIB, 8 * MIB), "{r}");
}

#[test]
fn free_null_is_success_and_releases_nothing() {
    let sb = Sandbox::new("freenull", 1).limit("8m");
    let r = sb.run(&["malloc:0:6m", "freeraw:0", "meminfo"]);
    r.expect_clean_exit().expect_ok(0).expect_ok(1);
    assert_eq!(r.meminfo(2), (2 * MIB, 8 * MIB), "{r}");
}

#[test]
fn double_free_releases_once() {
    let sb = Sandbox::new("doublefree", 1).limit("8m");
    let steps = [
        "malloc:0:6m",
        "malloc:1:2m",
        "free:0",
        "free:0",
        "malloc:2:6m",
        "malloc:3:4k",
        "meminfo",
    ];
    let r = sb.run(&steps);
    let plain = sb.unhooked().run(&steps);
    r.expect_clean_exit();
    r.expect_ok(0).expect_ok(1).expect_ok(2);
    assert_eq!(
        r.rc(3),
        plain.rc(3),
        "the second hipFree gets the runtime's answer\n{r}"
    );
    r.expect_ok(4).expect_oom(5);
    assert_eq!(r.meminfo(6), (0, 8 * MIB), "{r}");
}

#[test]
fn free_on_another_thread_and_device_releases_the_right_device() {
    let sb = Sandbox::new("xfree", 2).limit("8m").device_limit(1, "4m");
    let r = sb.run(&[
        "dev:1",       // 0
        "malloc:0:3m", // 1: device 1
        "dev:0",       // 2
        "malloc:1:8m", // 3: device 0 full
        "tfree:0:0",   // 4: a thread on device 0 frees the device-1 pointer
        "meminfo",     // 5: device 0 still full
        "dev:1",       // 6
        "meminfo",     // 7: device 1 empty again
        "malloc:2:4m", // 8
        "tfree:1:1",   // 9: a thread on device 1 frees the device-0 pointer
        "meminfo",     // 10: device 1 still full
        "dev:0",       // 11
        "meminfo",     // 12: device 0 empty again
    ]);
    r.expect_clean_exit();
    for i in [0, 1, 2, 3, 4] {
        r.expect_ok(i);
    }
    assert_eq!(r.meminfo(5), (0, 8 * MIB), "{r}");
    assert_eq!(r.meminfo(7), (4 * MIB, 4 * MIB), "{r}");
    r.expect_ok(8).expect_ok(9);
    assert_eq!(r.meminfo(10), (0, 4 * MIB), "{r}");
    assert_eq!(r.meminfo(12), (8 * MIB, 8 * MIB), "{r}");
}

/// At the most verbose level the program's stdout is exactly its own, and every hook line on
/// stderr carries the `[amvgpu pid N]` prefix with the process's pid.
#[test]
fn logging_never_touches_stdout() {
    for level in ["4", "3", "2", "1", "0"] {
        let sb = Sandbox::new("stdout", 1)
            .limit("8m")
            .env("LIBHIP_LOG_LEVEL", level);
        let r = sb.run(&[
            "echo:alpha",
            "malloc:0:1m",
            "malloc:1:9m",
            "free:0",
            "meminfo",
            "echo:omega",
        ]);
        r.expect_clean_exit();
        assert_eq!(
            r.stdout,
            "alpha\n1 malloc 0 1\n2 malloc 2 0\n3 free 0\n4 meminfo 0 8388608 8388608\nomega\n",
            "LIBHIP_LOG_LEVEL={level}: stdout must be the program's alone\n{r}"
        );
        let prefix = format!("[amvgpu pid {}]", r.pid);
        for line in r.stderr.lines().filter(|l| l.contains("amvgpu")) {
            assert!(
                line.starts_with(&prefix),
                "level {level}: unprefixed hook line {line:?}\n{r}"
            );
        }
        if level == "4" {
            assert!(
                !r.hook_lines().is_empty(),
                "level 4 (debug) said nothing at all\n{r}"
            );
        }
    }
}

/// The invalid-limit error is a prefixed stderr line too, and stdout stays clean.
#[test]
fn error_lines_are_prefixed_and_on_stderr() {
    let sb = Sandbox::new("errline", 1).limit("1.5G");
    let r = sb.run(&["malloc:0:4k"]);
    r.expect_clean_exit().expect_oom(0);
    assert_eq!(r.stdout, "0 malloc 2 0\n", "{r}");
    let prefix = format!("[amvgpu pid {}]", r.pid);
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("HIP_DEVICE_MEMORY_LIMIT"))
        .unwrap_or_else(|| panic!("no error line\n{r}"));
    assert!(line.starts_with(&prefix), "{line:?}");
}

/// Eight threads allocating and freeing at once, each holding at most its share: no update is
/// lost (nothing refused, everything back at the end).
#[test]
fn eight_threads_churning_lose_no_update() {
    let sb = Sandbox::new("churn8", 1).limit("8m");
    let r = sb.run(&["churnrace:8:1m:2000", "meminfo", "malloc:0:8m", "usage:0"]);
    r.expect_clean_exit().expect_ok(0);
    assert_eq!(
        r.val(0, 0),
        0,
        "pairs refused although each thread holds at most 1m of 8m\n{r}"
    );
    assert_eq!(r.meminfo(1), (8 * MIB, 8 * MIB), "{r}");
    r.expect_ok(2);
    assert!(r.usage(3).1 <= 8 * MIB, "{r}");
}

/// Bad arguments to allocation doors get the runtime's answer, crash nothing and charge
/// nothing: NULL out-pointers, devices that do not exist.
#[test]
fn bad_allocation_arguments_get_the_runtimes_answer_and_charge_nothing() {
    let sb = Sandbox::new("badalloc", 2).limit("8m");
    let steps = [
        "mallocnull:6m",         // 0
        "pitchnull:0:1024:4096", // 1
        "memcreate:1:2m:2",      // 2: device 2 does not exist
        "memcreate:2:2m:99",     // 3
        "poolcreate:3:7",        // 4
        "dev:2",                 // 5
        "malloc:4:1m",           // 6: still on device 0
        "meminfo",               // 7
        "malloc:5:7m",           // 8: the whole rest of the limit
    ];
    let r = sb.run(&steps);
    let plain = sb
        .unhooked()
        .remove_env("HIP_DEVICE_MEMORY_LIMIT")
        .run(&steps);
    r.expect_clean_exit();
    for (i, step) in steps.iter().enumerate().take(6) {
        assert_ne!(
            plain.rc(i),
            HIP_SUCCESS,
            "test bug: `{step}` succeeds without the hook\n{plain}"
        );
        assert_eq!(r.rc(i), plain.rc(i), "`{step}`: the runtime's answer\n{r}");
    }
    r.expect_ok(6);
    assert_eq!(
        r.meminfo(7),
        (7 * MIB, 8 * MIB),
        "nothing but the 1m charged\n{r}"
    );
    r.expect_ok(8);
}

/// Every process of a container gets LD_AUDIT, most of them never touch HIP (shells, tools):
/// they must run exactly as without the hook, at every log level.
#[test]
fn programs_without_hip_run_unchanged() {
    let sb = Sandbox::new("nohip", 1).limit("8m");
    for level in ["0", "2", "4"] {
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", "echo hello; printf 'a\\tb'; exit 3"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LD_AUDIT", hook_path())
            .env("HIP_DEVICE_MEMORY_LIMIT", "8m")
            .env("HIP_DEVICE_MEMORY_SHARED_CACHE", sb.ledger_path())
            .env("LIBHIP_LOG_LEVEL", level)
            .output()
            .expect("run /bin/sh");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("cannot be loaded as audit interface"),
            "the loader refused the hook: {stderr}"
        );
        assert_eq!(
            out.status.code(),
            Some(3),
            "level {level}: exit status; stderr: {stderr}"
        );
        assert_eq!(
            out.stdout, b"hello\na\tb",
            "level {level}: stdout; stderr: {stderr}"
        );
    }
}

/// A log level that is not 0..4 is reported (naming the variable and the value) and changes
/// nothing else: stdout clean, the limit enforced.
#[test]
fn a_bad_log_level_is_reported_and_changes_nothing_else() {
    for value in ["abc", "9", "-1", "2.5"] {
        let sb = Sandbox::new("badlevel", 1)
            .limit("8m")
            .env("LIBHIP_LOG_LEVEL", value);
        let r = sb.run(&["malloc:0:6m", "malloc:1:4m", "meminfo"]);
        r.expect_clean_exit().expect_ok(0).expect_oom(1);
        assert_eq!(
            r.stdout, "0 malloc 0 1\n1 malloc 2 0\n2 meminfo 0 2097152 8388608\n",
            "LIBHIP_LOG_LEVEL={value:?}\n{r}"
        );
        let complaints: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.contains("LIBHIP_LOG_LEVEL"))
            .collect();
        assert_eq!(
            complaints.len(),
            1,
            "LIBHIP_LOG_LEVEL={value:?}: one line about it\n{r}"
        );
        assert!(
            complaints[0].contains(value),
            "{:?} must quote {value:?}",
            complaints[0]
        );
    }
}

/// The current device is per thread: threads on different devices racing at once each charge
/// their own device.
#[test]
fn threads_on_different_devices_charge_their_own() {
    let sb = Sandbox::new("racedev", 2).limit("8m").device_limit(1, "4m");
    let r = sb.run(&[
        "racedev:8:1m:16:2",
        "usage:0",
        "usage:1",
        "meminfo",
        "dev:1",
        "meminfo",
        "racefree",
    ]);
    r.expect_clean_exit().expect_ok(0);
    assert_eq!(
        r.val(0, 0),
        12,
        "8 x 1m on device 0 and 4 x 1m on device 1\n{r}"
    );
    assert_eq!(r.usage(1), (8 * MIB, 8 * MIB), "{r}");
    assert_eq!(r.usage(2), (4 * MIB, 4 * MIB), "{r}");
    assert_eq!(r.meminfo(3), (0, 8 * MIB), "{r}");
    assert_eq!(r.meminfo(5), (0, 4 * MIB), "{r}");
    r.expect_ok(6);
}
