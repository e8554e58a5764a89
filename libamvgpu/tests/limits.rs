//! Limit configuration: `HIP_DEVICE_MEMORY_LIMIT[_<i>]` parsing, precedence, bad values, and the
//! basic promise that hipMalloc never takes a container past its limit while frees give memory back.

mod common;
use common::*;

/// Every accepted spelling of 8 MiB, and one plain byte count.
#[test]
fn every_suffix_spelling_means_binary_units() {
    let spellings = [
        "8m", "8M", "8mi", "8Mi", "8mb", "8MB", "8mib", "8MiB", "8MIB", "8192k", "8192K",
        "8192KiB", "8388608",
    ];
    for s in spellings {
        let sb = Sandbox::new("suffix", 1).limit(s);
        let r = sb.run(&["meminfo", "malloc:0:8m", "malloc:1:4k", "usage:0"]);
        r.expect_clean_exit();
        let (_, total) = r.meminfo(0);
        assert_eq!(
            total,
            8 * MIB,
            "HIP_DEVICE_MEMORY_LIMIT={s}: meminfo total\n{r}"
        );
        r.expect_ok(1);
        r.expect_oom(2);
        let (live, peak) = r.usage(3);
        assert_eq!(
            (live, peak),
            (8 * MIB, 8 * MIB),
            "HIP_DEVICE_MEMORY_LIMIT={s}\n{r}"
        );
        assert!(
            r.hook_lines()
                .iter()
                .all(|l| !l.contains("HIP_DEVICE_MEMORY_LIMIT")),
            "a valid value `{s}` must not be reported as an error\n{r}"
        );
    }
}

#[test]
fn gigabyte_and_terabyte_suffixes() {
    for (s, bytes) in [
        ("1g", GIB),
        ("1G", GIB),
        ("1GiB", GIB),
        ("1gb", GIB),
        ("2g", 2 * GIB),
    ] {
        let sb = Sandbox::new("gsuffix", 1).limit(s);
        let r = sb.run(&["meminfo"]);
        assert_eq!(r.meminfo(0).1, bytes, "HIP_DEVICE_MEMORY_LIMIT={s}\n{r}");
    }
    // A limit above the device: the device stays the bound of the size queries, and an
    // allocation of most of the device still passes the hook (a 1 KiB..1 GiB misreading or a
    // refusal of the value would refuse it).
    for s in ["1t", "1T", "1TiB", "1tb", "1Ti"] {
        let sb = Sandbox::new("tsuffix", 1).limit(s);
        let r = sb.run(&["totalmem:0", "malloc:0:3g"]);
        r.expect_ok(0).expect_ok(1);
        assert_eq!(
            r.val(0, 0),
            DEFAULT_VRAM,
            "min(limit, VRAM) with HIP_DEVICE_MEMORY_LIMIT={s}\n{r}"
        );
    }
}

#[test]
fn allocations_up_to_the_limit_succeed_and_one_byte_more_fails() {
    let sb = Sandbox::new("exact", 1).limit("8m");
    let r = sb.run(&[
        "malloc:0:6m",
        "malloc:1:2m",
        "malloc:2:1",
        "usage:0",
        "meminfo",
    ]);
    r.expect_clean_exit()
        .expect_ok(0)
        .expect_ok(1)
        .expect_oom(2);
    // A refused allocation must leave nothing allocated in the runtime.
    assert_eq!(r.usage(3), (8 * MIB, 8 * MIB), "{r}");
    assert_eq!(r.meminfo(4), (0, 8 * MIB), "{r}");
    assert_eq!(
        r.val(2, 0),
        0,
        "a refused hipMalloc must not hand out a pointer\n{r}"
    );
}

#[test]
fn free_gives_the_memory_back() {
    let sb = Sandbox::new("free", 1).limit("8m");
    let r = sb.run(&[
        "malloc:0:8m",
        "malloc:1:4k",
        "free:0",
        "meminfo",
        "malloc:2:8m",
        "usage:0",
        "free:2",
        "meminfo",
    ]);
    r.expect_clean_exit()
        .expect_ok(0)
        .expect_oom(1)
        .expect_ok(2);
    assert_eq!(r.meminfo(3), (8 * MIB, 8 * MIB), "free after hipFree\n{r}");
    r.expect_ok(4);
    assert_eq!(r.usage(5), (8 * MIB, 8 * MIB), "{r}");
    r.expect_ok(6);
    assert_eq!(r.meminfo(7), (8 * MIB, 8 * MIB), "{r}");
}

#[test]
fn repeated_alloc_free_cycles_never_leak_accounting() {
    let sb = Sandbox::new("cycles", 1).limit("8m");
    let mut steps = Vec::new();
    for _ in 0..50 {
        steps.push("malloc:0:8m");
        steps.push("free:0");
    }
    steps.push("meminfo");
    let r = sb.run(&steps);
    r.expect_clean_exit();
    for i in 0..100 {
        r.expect_ok(i);
    }
    assert_eq!(r.meminfo(100), (8 * MIB, 8 * MIB), "{r}");
}

#[test]
fn per_device_limit_wins_over_the_global_one() {
    let sb = Sandbox::new("perdev", 2).limit("8m").device_limit(1, "4m");
    let r = sb.run(&[
        "meminfo",     // 0: device 0
        "malloc:0:8m", // 1
        "dev:1",       // 2
        "meminfo",     // 3: device 1
        "malloc:1:5m", // 4: over device 1's own limit
        "malloc:2:4m", // 5
        "usage:0",     // 6
        "usage:1",     // 7
    ]);
    r.expect_clean_exit();
    assert_eq!(
        r.meminfo(0).1,
        8 * MIB,
        "device 0 keeps the global limit\n{r}"
    );
    r.expect_ok(1).expect_ok(2);
    assert_eq!(
        r.meminfo(3).1,
        4 * MIB,
        "HIP_DEVICE_MEMORY_LIMIT_1 wins on device 1\n{r}"
    );
    r.expect_oom(4).expect_ok(5);
    assert_eq!(r.usage(6).0, 8 * MIB, "{r}");
    assert_eq!(r.usage(7).1, 4 * MIB, "{r}");
}

#[test]
fn per_device_limit_alone_leaves_other_devices_unlimited() {
    let sb = Sandbox::new("onlydev1", 2).device_limit(1, "4m");
    let r = sb.run(&[
        "meminfo",     // 0: device 0, unlimited
        "malloc:0:1g", // 1
        "dev:1",       // 2
        "meminfo",     // 3
        "malloc:1:5m", // 4
    ]);
    r.expect_clean_exit();
    let reference = sb.unhooked().run(&["meminfo"]);
    assert_eq!(
        r.meminfo(0).1,
        reference.meminfo(0).1,
        "device 0 must pass through\n{r}"
    );
    r.expect_ok(1).expect_ok(2);
    assert_eq!(r.meminfo(3).1, 4 * MIB, "{r}");
    r.expect_oom(4);
}

#[test]
fn limits_are_per_device_not_per_container() {
    let sb = Sandbox::new("twodev", 2).limit("8m");
    let r = sb.run(&[
        "malloc:0:8m",
        "dev:1",
        "malloc:1:8m",
        "malloc:2:4k",
        "usage:0",
        "usage:1",
    ]);
    r.expect_clean_exit()
        .expect_ok(0)
        .expect_ok(2)
        .expect_oom(3);
    assert_eq!(r.usage(4).1, 8 * MIB, "{r}");
    assert_eq!(r.usage(5).1, 8 * MIB, "{r}");
}

/// Values that are not a size must never mean "unlimited": one error line names the variable and
/// the value, and every allocation on the device is refused.
#[test]
fn invalid_values_refuse_every_allocation_and_say_why() {
    let invalid = [
        "1.5G",
        "-1",
        "0x10",
        "16 G",
        " 16G",
        "16G ",
        "",
        "G",
        "16x",
        "16GG",
        "16Gibb",
        "16e9",
        "99999999999999999999", // more than u64
        "18446744073709551616", // u64::MAX + 1
        "17179869184g",         // 2^34 GiB = 2^64 bytes
        "16777216t",            // 2^24 TiB = 2^64 bytes
    ];
    for value in invalid {
        let sb = Sandbox::new("invalid", 1).limit(value);
        let r = sb.run(&["malloc:0:4k", "malloc:1:1", "usage:0"]);
        r.expect_clean_exit();
        r.expect_oom(0).expect_oom(1);
        assert_eq!(
            r.usage(2),
            (0, 0),
            "HIP_DEVICE_MEMORY_LIMIT={value:?}: nothing may be allocated\n{r}"
        );
        let complaints: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.contains("HIP_DEVICE_MEMORY_LIMIT"))
            .collect();
        assert_eq!(
            complaints.len(),
            1,
            "HIP_DEVICE_MEMORY_LIMIT={value:?}: expected one error line naming the variable\n{r}"
        );
        if !value.trim().is_empty() {
            assert!(
                complaints[0].contains(value.trim()),
                "the error line must quote the value {value:?}: {:?}",
                complaints[0]
            );
        }
    }
}

#[test]
fn an_invalid_per_device_value_refuses_only_that_device() {
    let sb = Sandbox::new("invalid_dev1", 2)
        .limit("8m")
        .device_limit(1, "1.5G");
    let r = sb.run(&[
        "malloc:0:8m",
        "malloc:1:4k",
        "dev:1",
        "malloc:2:4k",
        "usage:1",
    ]);
    r.expect_clean_exit();
    r.expect_ok(0).expect_oom(1).expect_ok(2).expect_oom(3);
    assert_eq!(r.usage(4), (0, 0), "{r}");
    let complaints: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("HIP_DEVICE_MEMORY_LIMIT_1"))
        .collect();
    assert_eq!(
        complaints.len(),
        1,
        "one error line naming HIP_DEVICE_MEMORY_LIMIT_1\n{r}"
    );
    assert!(complaints[0].contains("1.5G"), "{r}");
}

/// Without any limit the hook must be invisible: same answers as the runtime alone.
#[test]
fn no_limit_passes_every_call_through() {
    let sb = Sandbox::new("nolimit", 2);
    let steps = [
        "meminfo",
        "totalmem:0",
        "attr:1",
        "props:0",
        "props0:1",
        "props6:0",
        "malloc:0:3g",
        "malloc:1:2g",
        "meminfo",
        "free:0",
        "meminfo",
        "usage:0",
    ];
    let hooked = sb.run(&steps);
    let plain = sb.unhooked().run(&steps);
    hooked.expect_clean_exit();
    plain.expect_clean_exit();
    assert_eq!(
        hooked.stdout, plain.stdout,
        "no limit set: the hook must change nothing\n{hooked}"
    );
    hooked.expect_ok(6);
    hooked.expect_oom(7); // the simulated 4 GiB device itself refuses
}

/// The limit is read from the environment the process started with: a program cannot raise it
/// by changing its own environment afterwards.
#[test]
fn setenv_at_run_time_does_not_raise_the_limit() {
    let sb = Sandbox::new("setenv", 1).limit("8m");
    let r = sb.run(&[
        "setenv:HIP_DEVICE_MEMORY_LIMIT:100g",
        "malloc:0:16m",
        "meminfo",
    ]);
    r.expect_clean_exit().expect_oom(1);
    assert_eq!(r.meminfo(2).1, 8 * MIB, "{r}");
}

/// A valid per-device value wins even when the global one is invalid: that device is limited,
/// the others refuse everything.
#[test]
fn a_valid_per_device_value_wins_over_an_invalid_global_one() {
    let sb = Sandbox::new("devwins", 2)
        .limit("16 G")
        .device_limit(1, "4m");
    let r = sb.run(&[
        "malloc:0:4k",
        "dev:1",
        "malloc:1:4m",
        "malloc:2:4k",
        "meminfo",
    ]);
    r.expect_clean_exit();
    r.expect_oom(0).expect_ok(1).expect_ok(2).expect_oom(3);
    assert_eq!(r.meminfo(4), (0, 4 * MIB), "{r}");
    assert!(
        r.stderr
            .lines()
            .any(|l| l.contains("HIP_DEVICE_MEMORY_LIMIT") && l.contains("16 G")),
        "the invalid global value is reported\n{r}"
    );
}
