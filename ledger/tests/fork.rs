//! fork(2): the child accounts in its own fresh slot and can never change its
//! parent's usage. The child only calls the ledger (which neither allocates
//! nor locks on these paths) and reports through its exit status.

mod common;
use amvgpu_ledger::Ledger;
use common::scratch_dir;

/// Runs `child` in a forked process; returns its exit status (0 = passed,
/// otherwise the number of the first failed check).
fn in_fork(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child runs only `child` (ledger calls: atomics and raw
    // system calls, no allocation or locks) and leaves with `_exit`, so it
    // never touches state another thread of the parent may have locked.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child();
        // SAFETY: `_exit` ends the child without running the parent's atexit
        // handlers or destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for the child we just created; `status` is writable.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status),
        "child did not exit normally: {status:#x}"
    );
    libc::WEXITSTATUS(status)
}

fn check(steps: &[bool]) -> i32 {
    steps.iter().position(|ok| !ok).map_or(0, |i| i as i32 + 1)
}

#[test]
fn fork_child_has_its_own_slot_and_never_touches_the_parents_usage() {
    let dir = scratch_dir("fork");
    let ledger = Ledger::open_shared(&dir.join("ledger")).unwrap();
    ledger.reserve(0, 1000, 10_000).unwrap();

    let status = in_fork(|| {
        // Releasing before any reservation: the child owns nothing yet, so
        // this must not eat into the parent's 1000.
        ledger.release(0, 1000);
        let own_starts_at_zero = ledger.process_usage(0) == 0;
        let sees_parent = ledger.container_usage(0) == 1000;
        let reserved = ledger.reserve(0, 500, 10_000).is_ok();
        let own_is_500 = ledger.process_usage(0) == 500;
        let total_is_1500 = ledger.container_usage(0) == 1500;
        // The shared limit includes the parent: 1000 + 500 + 8501 > 10000.
        let over_refused = ledger.reserve(0, 8501, 10_000).is_err();
        ledger.release(0, 200);
        let total_is_1300 = ledger.container_usage(0) == 1300;
        // Exit still holding 300: only the child's slot keeps it.
        check(&[
            own_starts_at_zero,
            sees_parent,
            reserved,
            own_is_500,
            total_is_1500,
            over_refused,
            total_is_1300,
        ])
    });
    assert_eq!(status, 0, "child check {status} failed");

    assert_eq!(
        ledger.process_usage(0),
        1000,
        "the child changed the parent's usage"
    );
    // The dead child's 300 counts until reclaimed, then disappears.
    assert_eq!(ledger.container_usage(0), 1300);
    assert_eq!(ledger.reclaim_dead(), 1);
    assert_eq!(ledger.container_usage(0), 1000);
    let snap = ledger.snapshot();
    assert_eq!(snap.slots.len(), 1);
    assert_eq!(snap.slots[0].pid, std::process::id());
    assert_eq!(snap.slots[0].used[0], 1000);

    // A refusal in the parent reclaims a dead child by itself.
    let status = in_fork(|| check(&[ledger.reserve(0, 9000, 10_000).is_ok()]));
    assert_eq!(status, 0);
    assert_eq!(
        ledger.reserve(0, 9000, 10_000),
        Ok(()),
        "dead child's 9000 not reclaimed"
    );
    assert_eq!(ledger.process_usage(0), 10_000);
}

#[test]
fn process_local_fork_child_starts_from_zero() {
    let ledger = Ledger::process_local();
    ledger.reserve(2, 700, 1000).unwrap();
    let status = in_fork(|| {
        check(&[
            ledger.process_usage(2) == 0,
            // The parent's usage is the parent's own business.
            ledger.container_usage(2) == 0,
            ledger.reserve(2, 1000, 1000).is_ok(),
            ledger.container_usage(2) == 1000,
        ])
    });
    assert_eq!(status, 0, "child check {status} failed");
    assert_eq!(ledger.process_usage(2), 700);
    assert_eq!(ledger.container_usage(2), 700);
}
