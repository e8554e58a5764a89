//! Accounting shared between processes through the ledger file
//! (`HIP_DEVICE_MEMORY_SHARED_CACHE`): processes of one container never exceed the limit
//! together, a killed process's usage comes back, fork children get their own share, and a
//! broken ledger file degrades to process-local enforcement with an error naming the file.

mod common;
use common::*;

/// Processes are synchronised through their stdout lines (`ready`) and stdin (`wait`), never by
/// sleeping.
#[test]
fn two_processes_share_one_limit() {
    let sb = Sandbox::new("share", 1).limit("8m");
    let mut a = sb.spawn(&["malloc:0:6m", "ready", "wait", "free:0", "meminfo"]);
    assert_eq!(a.wait_step(0).rc, HIP_SUCCESS);
    a.wait_step(1);
    let b = sb.run(&["malloc:0:4m", "malloc:1:2m", "meminfo", "usage:0", "free:1"]);
    let a = a.finish();
    b.expect_clean_exit();
    a.expect_clean_exit();
    b.expect_oom(0).expect_ok(1);
    assert_eq!(
        b.meminfo(2),
        (0, 8 * MIB),
        "the other process's 6m counts here\n{b}"
    );
    assert_eq!(b.usage(3).0, 8 * MIB, "{b}");
    b.expect_ok(4);
    a.expect_ok(3);
    assert_eq!(a.meminfo(4), (8 * MIB, 8 * MIB), "{a}");
}

/// Separate ledger files are separate containers.
#[test]
fn different_ledger_files_do_not_share() {
    let sb = Sandbox::new("separate", 1).limit("8m");
    let mut a = sb.spawn(&["malloc:0:6m", "ready", "wait", "free:0"]);
    a.wait_step(1);
    let other = sb.path("other-ledger");
    let b = Sandbox::new("separate_b", 1)
        .limit("8m")
        .env(
            "HIPSIM_STATE",
            &sb.path("hipsim-state").display().to_string(),
        )
        .env(
            "HIP_DEVICE_MEMORY_SHARED_CACHE",
            &other.display().to_string(),
        )
        .run(&["malloc:0:6m", "meminfo", "free:0"]);
    let a = a.finish();
    a.expect_clean_exit();
    b.expect_clean_exit().expect_ok(0);
    assert_eq!(b.meminfo(1), (2 * MIB, 8 * MIB), "{b}");
}

/// Two processes of 4 threads each race 1 MiB allocations against a 64 MiB limit: together
/// they get exactly 64 and the simulated device never holds more than 64 MiB.
#[test]
fn racing_processes_never_pass_the_limit_together() {
    let sb = Sandbox::new("race2", 1).limit("64m");
    let steps = [
        "ready",
        "waitline",
        "race:4:1m:64",
        "ready",
        "wait",
        "racefree",
    ];
    let mut a = sb.spawn(&steps);
    let mut b = sb.spawn(&steps);
    a.wait_step(0);
    b.wait_step(0);
    // Both are parked on stdin: one line each lets them start together.
    a.send_line();
    b.send_line();
    let ra = a.wait_step(2);
    let rb = b.wait_step(2);
    a.wait_step(3);
    b.wait_step(3);
    let oracle = sb.unhooked().run(&["usage:0"]);
    let (ra_run, rb_run) = (a.finish(), b.finish());
    ra_run.expect_clean_exit();
    rb_run.expect_clean_exit();
    let (live, peak) = oracle.usage(0);
    assert!(
        peak <= 64 * MIB,
        "device peak {peak} above the 64m limit ({ra:?}, {rb:?})"
    );
    assert_eq!(
        live,
        64 * MIB,
        "the processes hold what they were granted ({ra:?}, {rb:?})"
    );
    assert_eq!(
        ra.vals[0] + rb.vals[0],
        64,
        "together exactly 64 x 1m fit: {ra:?} {rb:?}"
    );
    assert_eq!(ra_run.rc(5), 0, "{ra_run}");
}

/// A process killed with SIGKILL in the middle of an allocation loop leaves no usage behind:
/// the next process can take the whole limit, and nobody hangs. Repeated, so that the kill
/// lands at different points of the loop.
#[test]
fn a_killed_process_usage_is_reclaimed() {
    let sb = Sandbox::new("kill", 1).limit("8m");
    for round in 0..5 {
        let mut victim = sb.spawn(&["loop:6:1m", "ready", "churn:1m"]);
        assert_eq!(victim.wait_step(0).rc, HIP_SUCCESS, "round {round}");
        victim.wait_step(1);
        victim.kill();
        let killed = victim.finish();
        assert!(
            !killed.status.success(),
            "round {round}: victim was not killed"
        );
        // hipMemGetInfo first, as a framework sizing its caches at start-up would.
        let next = sb.run(&["meminfo", "malloc:0:8m", "meminfo", "free:0"]);
        next.expect_clean_exit();
        assert_eq!(
            next.meminfo(0),
            (8 * MIB, 8 * MIB),
            "round {round}: the dead process still counts\n{next}"
        );
        next.expect_ok(1);
        assert_eq!(next.meminfo(2), (0, 8 * MIB), "round {round}\n{next}");
        next.expect_ok(3);
    }
}

/// A process killed while another one is allocating: the survivor goes on and can use the
/// victim's share afterwards.
#[test]
fn a_survivor_gets_the_killed_process_share() {
    let sb = Sandbox::new("survivor", 1).limit("8m");
    // The victim holds 5 to 6 MiB while it churns: 2 MiB always fit beside it.
    let mut victim = sb.spawn(&["loop:5:1m", "ready", "churn:1m"]);
    victim.wait_step(1);
    let mut survivor = sb.spawn(&["malloc:0:2m", "ready", "wait", "malloc:1:6m", "meminfo"]);
    assert_eq!(survivor.wait_step(0).rc, HIP_SUCCESS);
    survivor.wait_step(1);
    victim.kill();
    victim.finish();
    let s = survivor.finish();
    s.expect_clean_exit().expect_ok(3);
    assert_eq!(s.meminfo(4), (0, 8 * MIB), "{s}");
}

/// The fork child is charged on its own slot; its exit, however it happens, leaves the parent's
/// usage as it was.
fn fork_child_keeps_parent_usage(mode: &str, child_frees: bool) {
    let name = format!("fork_{}_{}", mode.trim_start_matches('_'), child_frees);
    let sb = Sandbox::new(&name, 1).limit("8m");
    let endchild = format!("endchild:{mode}");
    let mut steps = vec![
        "malloc:0:4m", // 0 parent
        "fork",        // 1
        "malloc:1:2m", // 2 child
        "malloc:2:4m", // 3 child: 4 + 2 + 4 > 8
        "meminfo",     // 4 child
    ];
    steps.push(if child_frees { "free:1" } else { "meminfo" }); // 5 child
    steps.push(&endchild); // 6
    steps.extend_from_slice(&[
        "meminfo",     // 7 parent
        "malloc:3:5m", // 8 parent: its own 4m must still count
        "malloc:4:4m", // 9
        "meminfo",     // 10
        "usage:0",     // 11
    ]);
    let r = sb.run(&steps);
    r.expect_clean_exit();
    r.expect_ok(0).expect_ok(1).expect_ok(2).expect_oom(3);
    assert_eq!(
        r.meminfo(4),
        (2 * MIB, 8 * MIB),
        "child sees the whole container\n{r}"
    );
    r.expect_ok(5);
    assert_eq!(
        r.meminfo(7),
        (4 * MIB, 8 * MIB),
        "after the child's {mode}\n{r}"
    );
    r.expect_oom(8).expect_ok(9);
    assert_eq!(r.meminfo(10), (0, 8 * MIB), "{r}");
}

#[test]
fn fork_child_exit_keeps_parent_usage() {
    fork_child_keeps_parent_usage("exit", true);
    fork_child_keeps_parent_usage("exit", false);
}

#[test]
fn fork_child_underscore_exit_keeps_parent_usage() {
    fork_child_keeps_parent_usage("_exit", true);
    fork_child_keeps_parent_usage("_exit", false);
}

#[test]
fn fork_child_killed_keeps_parent_usage() {
    fork_child_keeps_parent_usage("kill", false);
}

/// The steps every broken-ledger case runs: the limit must still hold inside the process.
const LOCAL_ENFORCEMENT: [&str; 6] = [
    "malloc:0:6m",
    "malloc:1:4m",
    "meminfo",
    "free:0",
    "malloc:2:8m",
    "usage:0",
];

fn enforces_locally_and_names_the_ledger(name: &str, sb: &Sandbox) {
    let r = sb.run(&LOCAL_ENFORCEMENT);
    r.expect_clean_exit();
    r.expect_ok(0).expect_oom(1);
    assert_eq!(r.meminfo(2), (2 * MIB, 8 * MIB), "{name}\n{r}");
    r.expect_ok(3).expect_ok(4);
    assert!(r.usage(5).1 <= 8 * MIB, "{name}\n{r}");
    let path = sb.ledger_path().display().to_string();
    assert!(
        r.hook_lines().iter().any(|l| l.contains(&path)),
        "{name}: expected an error line naming {path}\n{r}"
    );
}

#[test]
fn garbage_ledger_falls_back_to_local_enforcement() {
    let sb = Sandbox::new("garbage", 1).limit("8m");
    // xorshift noise, deterministic
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..65536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    write_file(&sb.ledger_path(), &noise);
    enforces_locally_and_names_the_ledger("random bytes", &sb);
}

#[test]
fn text_file_as_ledger_falls_back_to_local_enforcement() {
    let sb = Sandbox::new("textledger", 1).limit("8m");
    write_file(&sb.ledger_path(), b"this is not a ledger\n");
    enforces_locally_and_names_the_ledger("short text file", &sb);
}

#[test]
fn directory_as_ledger_falls_back_to_local_enforcement() {
    let sb = Sandbox::new("dirledger", 1).limit("8m");
    std::fs::create_dir_all(sb.ledger_path()).unwrap();
    enforces_locally_and_names_the_ledger("a directory", &sb);
}

/// A ledger written by the hook itself, then stamped with a different header (as a future or
/// foreign version would be).
#[test]
fn incompatible_ledger_falls_back_to_local_enforcement() {
    let sb = Sandbox::new("incompatible", 1).limit("8m");
    sb.run(&["malloc:0:4k", "free:0"])
        .expect_clean_exit()
        .expect_ok(0);
    let mut bytes = std::fs::read(sb.ledger_path()).expect("the hook creates its ledger file");
    assert!(
        bytes.len() >= 16,
        "ledger unexpectedly small: {} bytes",
        bytes.len()
    );
    for b in &mut bytes[..16] {
        *b = !*b;
    }
    write_file(&sb.ledger_path(), &bytes);
    enforces_locally_and_names_the_ledger("foreign header", &sb);
}

/// A ledger the process may read but not write. Root ignores file modes, so when the tests run
/// as root the workload runs as `nobody`.
#[test]
fn read_only_ledger_falls_back_to_local_enforcement() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new("readonly", 1).limit("8m");
    let dir = sb.ledger_path().parent().unwrap().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    // a valid ledger first, made by the hook
    let is_root = effective_uid() == 0;
    let sb = if is_root { sb.run_as_uid(65534) } else { sb };
    sb.run(&["malloc:0:4k", "free:0"])
        .expect_clean_exit()
        .expect_ok(0);
    let ledger = sb.ledger_path();
    assert!(
        ledger.is_file(),
        "the hook did not create {}",
        ledger.display()
    );
    if is_root {
        // owned by root and read-only for everyone else
        std::os::unix::fs::chown(&ledger, Some(0), Some(0)).unwrap();
    }
    std::fs::set_permissions(&ledger, std::fs::Permissions::from_mode(0o444)).unwrap();
    enforces_locally_and_names_the_ledger("read-only", &sb);
}

/// The effective uid, read from /proc so the tests need no libc binding.
fn effective_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .expect("Uid: line");
    line.split_whitespace()
        .nth(2)
        .expect("effective uid")
        .parse()
        .expect("numeric uid")
}

/// hipDeviceReset releases the calling process's memory only: another process of the same
/// container keeps its share counted.
#[test]
fn device_reset_releases_only_the_calling_process() {
    let sb = Sandbox::new("reset_shared", 1).limit("8m");
    let mut holder = sb.spawn(&["malloc:0:4m", "ready", "wait", "meminfo"]);
    assert_eq!(holder.wait_step(0).rc, HIP_SUCCESS);
    holder.wait_step(1);
    let r = sb.run(&[
        "malloc:0:2m",
        "reset",
        "meminfo",
        "malloc:1:5m",
        "malloc:2:4m",
    ]);
    let h = holder.finish();
    r.expect_clean_exit().expect_ok(0).expect_ok(1);
    assert_eq!(
        r.meminfo(2),
        (4 * MIB, 8 * MIB),
        "the holder's 4m still counts\n{r}"
    );
    r.expect_oom(3).expect_ok(4);
    h.expect_clean_exit();
    // the resetting process has exited: only the holder's own 4m is left
    assert_eq!(h.meminfo(3), (4 * MIB, 8 * MIB), "{h}");
}

/// Each process takes its limit from its own environment: the process that created the ledger
/// file does not freeze the limit for later ones.
#[test]
fn the_first_process_does_not_freeze_the_limit() {
    let sb = Sandbox::new("notfrozen", 1).limit("8m");
    sb.run(&["malloc:0:8m", "free:0"])
        .expect_clean_exit()
        .expect_ok(0);
    assert!(
        sb.ledger_path().is_file(),
        "the first process created the ledger"
    );
    let bigger = sb.sibling().limit("16m");
    let r = bigger.run(&["meminfo", "malloc:0:16m", "malloc:1:4k"]);
    r.expect_clean_exit();
    assert_eq!(r.meminfo(0), (16 * MIB, 16 * MIB), "{r}");
    r.expect_ok(1).expect_oom(2);
}

/// A ledger cut in the middle (a crash while it grew, a full disk) is not trusted either.
#[test]
fn truncated_ledger_falls_back_to_local_enforcement() {
    let sb = Sandbox::new("truncated", 1).limit("8m");
    sb.run(&["malloc:0:4k", "free:0"])
        .expect_clean_exit()
        .expect_ok(0);
    let bytes = std::fs::read(sb.ledger_path()).expect("the hook creates its ledger file");
    write_file(&sb.ledger_path(), &bytes[..bytes.len() / 2]);
    enforces_locally_and_names_the_ledger("truncated to half", &sb);
}
