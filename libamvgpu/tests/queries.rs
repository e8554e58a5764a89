//! Memory queries are virtualized: every door that reports a size shows the container's limit
//! (never more than the device), hipMemGetInfo's free never promises more than the limit or the
//! device can give, and bad arguments get the runtime's error instead of a crash.

mod common;
use common::*;

const SIZE_DOORS: [&str; 5] = ["totalmem", "attr", "props", "props0", "props6"];

#[test]
fn every_size_door_reports_the_limit() {
    let sb = Sandbox::new("sizes", 1).limit("8m");
    let steps: Vec<String> = SIZE_DOORS.iter().map(|d| format!("{d}:0")).collect();
    let mut steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    steps.push("meminfo");
    let r = sb.run(&steps);
    r.expect_clean_exit();
    for (i, door) in SIZE_DOORS.iter().enumerate() {
        r.expect_ok(i);
        assert_eq!(r.val(i, 0), 8 * MIB, "{door} must report the 8m limit\n{r}");
    }
    assert_eq!(r.meminfo(SIZE_DOORS.len()), (8 * MIB, 8 * MIB), "{r}");
}

/// With a limit above the device, the size doors report the device (min(limit, real)) and
/// hipMemGetInfo's free is what the device really has.
#[test]
fn a_limit_above_the_device_reports_the_device() {
    let sb = Sandbox::new("above", 1).vram(GIB).limit("1t");
    let r = sb.run(&[
        "totalmem:0",
        "attr:0",
        "props:0",
        "props0:0",
        "props6:0",
        "malloc:0:256m",
        "meminfo",
    ]);
    r.expect_clean_exit();
    for (i, door) in SIZE_DOORS.iter().enumerate() {
        r.expect_ok(i);
        assert_eq!(r.val(i, 0), GIB, "{door}: min(1t, 1 GiB of VRAM)\n{r}");
    }
    r.expect_ok(5);
    assert_eq!(
        r.meminfo(6).0,
        GIB - 256 * MIB,
        "free is bounded by the device's real free\n{r}"
    );
}

/// Each device's query answers with that device's limit, whichever device the thread is on.
#[test]
fn queries_name_their_device() {
    let sb = Sandbox::new("qdev", 2).limit("8m").device_limit(1, "4m");
    let r = sb.run(&[
        "totalmem:1",
        "attr:1",
        "props:1",
        "props0:1",
        "props6:1", // 0..4 from device 0
        "dev:1",
        "totalmem:0",
        "attr:0",
        "props:0",
        "props0:0",
        "props6:0", // 5..10 from device 1
        "meminfo",  // 11: device 1
    ]);
    r.expect_clean_exit();
    for i in 0..5 {
        r.expect_ok(i);
        assert_eq!(
            r.val(i, 0),
            4 * MIB,
            "{} for device 1\n{r}",
            r.steps_given[i]
        );
    }
    for i in 6..11 {
        r.expect_ok(i);
        assert_eq!(
            r.val(i, 0),
            8 * MIB,
            "{} for device 0\n{r}",
            r.steps_given[i]
        );
    }
    assert_eq!(r.meminfo(11), (4 * MIB, 4 * MIB), "{r}");
}

#[test]
fn meminfo_free_follows_the_containers_usage() {
    let sb = Sandbox::new("free_usage", 1).limit("64m");
    let r = sb.run(&[
        "malloc:0:10m",
        "meminfo",
        "pitch:1:1000:1024", // charged 1 MiB (1024-byte pitch)
        "meminfo",
        "free:0",
        "meminfo",
    ]);
    r.expect_clean_exit().expect_ok(0).expect_ok(2).expect_ok(4);
    assert_eq!(r.meminfo(1), (54 * MIB, 64 * MIB), "{r}");
    assert_eq!(r.meminfo(3), (53 * MIB, 64 * MIB), "{r}");
    assert_eq!(r.meminfo(5), (63 * MIB, 64 * MIB), "{r}");
}

/// Another tenant (no hook, same simulated device) leaves less real memory than the container's
/// headroom: free must show what the device can really give.
#[test]
fn meminfo_free_never_exceeds_the_devices_real_free() {
    let sb = Sandbox::new("realfree", 1).vram(64 * MIB).limit("32m");
    let other = sb.unhooked().remove_env("HIP_DEVICE_MEMORY_LIMIT");
    let mut tenant = other.spawn(&["malloc:0:60m", "ready", "wait", "free:0"]);
    let held = tenant.wait_step(0);
    assert_eq!(held.rc, 0, "the other tenant could not allocate: {held:?}");
    tenant.wait_step(1);
    let r = sb.run(&["meminfo", "malloc:0:2m", "meminfo"]);
    let t = tenant.finish();
    t.expect_clean_exit();
    r.expect_clean_exit();
    assert_eq!(
        r.meminfo(0),
        (4 * MIB, 32 * MIB),
        "free = min(32m - 0, 4m real)\n{r}"
    );
    r.expect_ok(1);
    assert_eq!(r.meminfo(2), (2 * MIB, 32 * MIB), "{r}");
}

/// NULL out-pointers and invalid device ids get the runtime's own error, not a crash, both with
/// a limit (the hook answers) and compared with the runtime alone.
#[test]
fn bad_arguments_get_the_runtimes_error() {
    let sb = Sandbox::new("badargs", 2).limit("8m");
    let cases: [(&str, i64); 14] = [
        ("meminfo:null", HIP_INVALID_VALUE),
        ("totalmem:0:null", HIP_INVALID_VALUE),
        ("attr:0:null", HIP_INVALID_VALUE),
        ("props:0:null", HIP_INVALID_VALUE),
        ("props0:0:null", HIP_INVALID_VALUE),
        ("props6:0:null", HIP_INVALID_VALUE),
        ("totalmem:2", HIP_INVALID_DEVICE),
        ("attr:2", HIP_INVALID_DEVICE),
        ("props:2", HIP_INVALID_DEVICE),
        ("props0:2", HIP_INVALID_DEVICE),
        ("props6:2", HIP_INVALID_DEVICE),
        ("totalmem:100000", HIP_INVALID_DEVICE),
        ("props6:2147483647", HIP_INVALID_DEVICE),
        ("dev:7", HIP_INVALID_DEVICE),
    ];
    let steps: Vec<&str> = cases
        .iter()
        .map(|c| c.0)
        .chain(["malloc:0:4m", "meminfo"])
        .collect();
    let r = sb.run(&steps);
    let plain = sb.unhooked().run(&steps);
    r.expect_clean_exit();
    for (i, (step, rc)) in cases.iter().enumerate() {
        assert_eq!(
            plain.rc(i),
            *rc,
            "test bug: the runtime answers `{step}` differently\n{plain}"
        );
        r.expect_rc(i, *rc);
    }
    // the failed calls changed nothing
    r.expect_ok(cases.len());
    assert_eq!(r.meminfo(cases.len() + 1), (4 * MIB, 8 * MIB), "{r}");
}

/// The hook rewrites totalGlobalMem and nothing else of the property structs.
#[test]
fn props_differ_from_the_runtimes_only_in_total_global_mem() {
    let sb = Sandbox::new("propsrest", 2).limit("8m");
    let steps = ["props:0", "props0:1", "props6:0", "props6:1"];
    let r = sb.run(&steps);
    let plain = sb.unhooked().run(&steps);
    r.expect_clean_exit();
    for (i, step) in steps.iter().enumerate() {
        r.expect_ok(i);
        assert_eq!(r.val(i, 0), 8 * MIB, "{r}");
        assert_ne!(
            plain.val(i, 0),
            8 * MIB,
            "test bug: the device must be larger than the limit"
        );
        assert_eq!(
            r.val(i, 1),
            plain.val(i, 1),
            "`{step}` changed other fields\n{r}\n{plain}"
        );
    }
}

/// Device count and the current device are the runtime's answers.
#[test]
fn device_count_and_current_device_pass_through() {
    let sb = Sandbox::new("count", 3).limit("8m");
    let steps = ["count", "getdev", "dev:2", "getdev"];
    let r = sb.run(&steps);
    let plain = sb.unhooked().run(&steps);
    r.expect_clean_exit();
    assert_eq!(r.stdout, plain.stdout, "{r}");
    assert_eq!(r.val(0, 0), 3, "{r}");
}

/// Functions obtained through dlsym and hipGetProcAddress answer like the directly called ones.
#[test]
fn looked_up_query_functions_are_virtualized_too() {
    let sb = Sandbox::new("lookedup", 1).limit("8m");
    let r = sb.run(&["malloc:0:2m", "dlmeminfo", "procmeminfo", "procprops:0"]);
    r.expect_clean_exit().expect_ok(0);
    for i in [1, 2] {
        r.expect_ok(i);
        assert_eq!((r.val(i, 0), r.val(i, 1)), (6 * MIB, 8 * MIB), "{r}");
    }
    r.expect_ok(3);
    assert_eq!(r.val(3, 0), 8 * MIB, "{r}");
}
