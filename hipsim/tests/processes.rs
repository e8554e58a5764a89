//! Device-wide truth across processes (HIPSIM_STATE), exact peaks, fork and exit behaviour.

use testkit::{Compiled, Fixture, SharedState};

fn fixture(name: &str) -> Compiled {
    let path = format!("{}/tests/fixtures/{name}.c", env!("CARGO_MANIFEST_DIR"));
    Fixture::from_path(path)
        .link_flag("-pthread")
        .compile()
        .unwrap()
}

/// Parses "free=.. total=.. live=.. peak=.. mine=.." into (free, total, live, peak, mine).
fn info(line: &str) -> [u64; 5] {
    let values: Vec<u64> = line
        .split(' ')
        .map(|kv| kv.split_once('=').unwrap().1.parse().unwrap())
        .collect();
    values.try_into().unwrap()
}

#[test]
fn two_processes_sharing_state_see_each_other() {
    let state = SharedState::new();
    let driver = fixture("driver");
    let mut a = driver.run().state(&state).env("HIPSIM_VRAM", "1g").spawn();
    let mut b = driver.run().state(&state).env("HIPSIM_VRAM", "1g").spawn();
    a.write_line("alloc 3145728");
    assert_eq!(a.read_line(), "ok");
    b.write_line("info");
    assert_eq!(
        info(&b.read_line()),
        [(1 << 30) - (3 << 20), 1 << 30, 3 << 20, 3 << 20, 0]
    );
    b.write_line("alloc 1048576");
    assert_eq!(b.read_line(), "ok");
    a.write_line("info");
    assert_eq!(
        info(&a.read_line()),
        [(1 << 30) - (4 << 20), 1 << 30, 4 << 20, 4 << 20, 3 << 20]
    );
    // B fills the device: A is out of memory, device-wide.
    b.write_line(&format!("alloc {}", (1u64 << 30) - (4 << 20)));
    assert_eq!(b.read_line(), "ok");
    a.write_line("alloc 4096");
    let out = a.finish();
    out.assert_code(1);
    assert!(
        out.stderr.contains("returned 2 (hipErrorOutOfMemory)"),
        "{}",
        out.stderr
    );
    // A exited normally: its 3 MiB went back, as a driver returns a dead process's memory.
    b.write_line("info");
    assert_eq!(
        info(&b.read_line()),
        [
            3 << 20,
            1 << 30,
            (1 << 30) - (3 << 20),
            1 << 30,
            (1 << 30) - (3 << 20)
        ]
    );
    b.finish().assert_success();
}

#[test]
fn without_state_usage_is_process_local() {
    let driver = fixture("driver");
    let mut a = driver.run().no_state().spawn();
    let mut b = driver.run().no_state().spawn();
    a.write_line("alloc 8192");
    assert_eq!(a.read_line(), "ok");
    b.write_line("info");
    assert_eq!(info(&b.read_line())[2], 0);
    a.finish().assert_success();
    b.finish().assert_success();
}

#[test]
fn processes_must_agree_on_the_machine() {
    let state = SharedState::new();
    let driver = fixture("driver");
    let first = driver
        .run()
        .state(&state)
        .env("HIPSIM_VRAM", "1g")
        .stdin("alloc 4096\ninfo\n")
        .output();
    first.assert_success();
    let second = driver
        .run()
        .state(&state)
        .env("HIPSIM_VRAM", "2g")
        .stdin("alloc 4096\n")
        .output();
    second.assert_code(1);
    assert!(
        second
            .stderr
            .contains("created for 1 device(s) of 1073741824 bytes")
            && second.stderr.contains("HIPSIM_VRAM=2147483648")
            && second
                .stderr
                .contains("returned 3 (hipErrorNotInitialized)"),
        "{}",
        second.stderr
    );
    std::fs::write(state.path(), b"not a state file").unwrap();
    let third = driver.run().state(&state).stdin("alloc 4096\n").output();
    third.assert_code(1);
    assert!(
        third.stderr.contains("16 bytes, a hipsim state file has"),
        "{}",
        third.stderr
    );
}

#[test]
fn peak_is_exact_under_concurrent_threads() {
    let out = fixture("peak")
        .run()
        .env("HIPSIM_VRAM", "64m")
        .timeout(std::time::Duration::from_secs(120))
        .output();
    out.assert_success();
    assert!(out.stdout.ends_with("blocks=64\n"), "{}", out.stdout);
}

#[test]
fn a_fork_child_owns_none_of_its_parents_memory() {
    fixture("fork").run().output().assert_success();
}
