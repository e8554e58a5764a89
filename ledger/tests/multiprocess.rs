//! Real processes sharing one ledger file: the limit holds under contention,
//! and SIGKILLed processes' usage is reclaimed without anyone hanging.

mod common;
use amvgpu_ledger::{open_readonly, Ledger};
use common::*;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

const LIMIT: u64 = 1_000_000;

/// Ground truth shared by the children: the bytes they actually "hold"
/// (counted only after `reserve` said yes, uncounted before `release`), the
/// highest value it ever reached, and the highest admitted sum seen.
struct Truth {
    ptr: *mut AtomicU64,
}

impl Truth {
    fn map(path: &Path) -> Truth {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap();
        file.set_len(4096).unwrap();
        // SAFETY: a fresh shared mapping of a 4096-byte file we just sized;
        // it aliases no Rust object and stays mapped for the process's life.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Truth { ptr: ptr.cast() }
    }
    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < 512);
        // SAFETY: the mapping is 4096 bytes = 512 aligned u64s, never unmapped,
        // and only ever accessed atomically.
        unsafe { &*self.ptr.add(i) }
    }
    fn held(&self) -> &AtomicU64 {
        self.word(0)
    }
    fn max_held(&self) -> &AtomicU64 {
        self.word(1)
    }
    fn violations(&self) -> &AtomicU64 {
        self.word(2)
    }
}

fn hammer(ledger: &Ledger, truth: &Truth, seed: u64, iterations: u64, report_after: u64) -> u64 {
    let mut x = seed | 1;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut holding: Vec<u64> = Vec::new();
    let mut admitted = 0;
    for i in 0..iterations {
        if i == report_after {
            println!("running");
        }
        let bytes = 1 + rand() % (LIMIT / 3);
        if ledger.reserve(0, bytes, LIMIT).is_ok() {
            admitted += 1;
            let now = truth.held().fetch_add(bytes, SeqCst) + bytes;
            truth.max_held().fetch_max(now, SeqCst);
            if now > LIMIT {
                truth.violations().fetch_add(1, SeqCst);
            }
            holding.push(bytes);
        }
        // Free some, oldest first, to keep a changing mix of holders.
        while holding.len() > (rand() % 4) as usize {
            let bytes = holding.remove(0);
            truth.held().fetch_sub(bytes, SeqCst);
            ledger.release(0, bytes);
        }
    }
    for bytes in holding {
        truth.held().fetch_sub(bytes, SeqCst);
        ledger.release(0, bytes);
    }
    admitted
}

#[test]
fn processes_hammering_one_file_never_exceed_the_limit() {
    const CHILDREN: usize = 4;
    let dir = scratch_dir("hammer");
    let ledger_path = dir.join("ledger");
    let truth_path = dir.join("truth");
    let truth = Truth::map(&truth_path);
    let args = [
        ("LEDGER", ledger_path.display().to_string()),
        ("TRUTH", truth_path.display().to_string()),
    ];
    let mut children: Vec<_> = (0..CHILDREN)
        .map(|i| {
            let mut cmd = spawn_child("hammer", &args);
            cmd.env("SEED", (i as u64 * 7919 + 1).to_string());
            cmd.spawn().unwrap()
        })
        .collect();
    for child in &mut children {
        read_until(child, "ready");
    }
    for child in &mut children {
        writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    }
    for child in &mut children {
        let line = read_until(child, "admitted");
        let admitted: u64 = line["admitted ".len()..].parse().unwrap();
        assert!(admitted > 1000, "a process starved: {line}");
        assert!(child.wait().unwrap().success());
    }
    let max = truth.max_held().load(SeqCst);
    println!("highest real usage across {CHILDREN} processes: {max} of {LIMIT}");
    assert_eq!(
        truth.violations().load(SeqCst),
        0,
        "limit exceeded (max {max})"
    );
    assert!(max <= LIMIT);
    assert!(max > LIMIT / 2, "the test never came near the limit: {max}");
    assert_eq!(truth.held().load(SeqCst), 0);
    let snap = open_readonly(&ledger_path).unwrap();
    assert_eq!(snap.container_usage[0], 0, "usage left behind: {snap:?}");
    assert!(snap.container_peak[0] <= LIMIT);
    assert!(snap.slots.is_empty(), "slots left behind: {:?}", snap.slots);
}

#[test]
fn sigkilled_processes_are_reclaimed_and_nobody_hangs() {
    const CHILDREN: usize = 3;
    let dir = scratch_dir("sigkill");
    let ledger_path = dir.join("ledger");
    let truth_path = dir.join("truth");
    let args = [
        ("LEDGER", ledger_path.display().to_string()),
        ("TRUTH", truth_path.display().to_string()),
    ];
    for round in 0..3 {
        let mut children: Vec<_> = (0..CHILDREN)
            .map(|i| {
                let mut cmd = spawn_child("hammer-forever", &args);
                cmd.env("SEED", (round * 100 + i as u64 + 1).to_string());
                cmd.spawn().unwrap()
            })
            .collect();
        for child in &mut children {
            read_until(child, "ready");
            writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
        }
        // Each has done thousands of reserve/release pairs and is mid-loop:
        // killed at an arbitrary point, perhaps between add and withdraw.
        for child in &mut children {
            read_until(child, "running");
        }
        for child in &mut children {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        let before = open_readonly(&ledger_path).unwrap();
        assert!(
            before.slots.iter().all(|s| !s.alive),
            "dead owners must show as dead"
        );
        // Whatever they held must come back: the whole limit fits again.
        let ledger = Ledger::open_shared(&ledger_path).unwrap();
        assert_eq!(
            ledger.reserve(0, LIMIT, LIMIT),
            Ok(()),
            "round {round}: {before:?}"
        );
        let after = ledger.snapshot();
        assert_eq!(after.container_usage[0], LIMIT);
        assert_eq!(
            after.slots.len(),
            1,
            "only our slot remains: {:?}",
            after.slots
        );
        assert_eq!(after.slots[0].pid, std::process::id());
        ledger.release(0, LIMIT);
    }
}

#[test]
#[ignore = "entry point for child processes of the tests above"]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE_VAR) else {
        return;
    };
    let ledger = Ledger::open_shared(Path::new(&arg("LEDGER"))).expect("open ledger");
    let truth = Truth::map(Path::new(&arg("TRUTH")));
    let seed: u64 = arg("SEED").parse().unwrap();
    println!("ready");
    wait_for_parent();
    match role.as_str() {
        "hammer" => {
            let admitted = hammer(&ledger, &truth, seed, 20_000, u64::MAX);
            println!("admitted {admitted}");
        }
        "hammer-forever" => {
            // Bounded so an orphan cannot run forever; the parent kills it
            // long before.
            hammer(&ledger, &truth, seed, 50_000_000, 2_000);
            println!("finished without being killed");
        }
        other => panic!("unknown role {other}"),
    }
}
