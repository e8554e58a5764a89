//! Single-process behaviour of `Ledger` that the hook relies on.

use amvgpu_ledger::{Ledger, Refused, MAX_DEVICES};

mod common;
use common::scratch_dir;

fn both_kinds(name: &str) -> Vec<Ledger> {
    let dir = scratch_dir(name);
    vec![
        Ledger::open_shared(&dir.join("ledger")).expect("open fresh ledger"),
        Ledger::process_local(),
    ]
}

#[test]
fn reserve_admits_up_to_the_limit_and_release_gives_room_back() {
    for ledger in both_kinds("limit") {
        assert_eq!(ledger.reserve(0, 600, 1000), Ok(()));
        assert_eq!(ledger.reserve(0, 400, 1000), Ok(()));
        assert_eq!(ledger.container_usage(0), 1000);
        assert_eq!(
            ledger.reserve(0, 1, 1000),
            Err(Refused {
                device: 0,
                requested: 1,
                usage: 1000,
                limit: 1000
            })
        );
        // Nothing of the refused request stays behind.
        assert_eq!(ledger.process_usage(0), 1000);
        ledger.release(0, 400);
        assert_eq!(ledger.container_usage(0), 600);
        assert_eq!(ledger.reserve(0, 400, 1000), Ok(()));
        // Devices are independent.
        assert_eq!(ledger.reserve(1, 1000, 1000), Ok(()));
        assert_eq!(ledger.container_usage(1), 1000);
        assert_eq!(ledger.container_usage(0), 1000);
    }
}

#[test]
fn huge_requests_are_refused_without_wrapping() {
    for ledger in both_kinds("huge") {
        ledger.reserve(0, 4096, u64::MAX).unwrap();
        // hipMalloc(SIZE_MAX) with no effective limit: the sum would overflow.
        let refused = ledger.reserve(0, u64::MAX, u64::MAX).unwrap_err();
        assert_eq!(refused.requested, u64::MAX);
        assert_eq!(ledger.container_usage(0), 4096, "usage record intact");
        assert!(ledger.reserve(0, u64::MAX - 4096, 1 << 40).is_err());
        assert_eq!(ledger.process_usage(0), 4096);
        // Exactly filling u64 is allowed when the limit says so.
        assert_eq!(ledger.reserve(0, u64::MAX - 4096, u64::MAX), Ok(()));
        assert_eq!(ledger.container_usage(0), u64::MAX);
        assert!(ledger.reserve(0, 1, u64::MAX).is_err());
    }
}

#[test]
fn zero_bytes_and_bad_devices() {
    for ledger in both_kinds("edges") {
        assert_eq!(
            ledger.reserve(0, 0, 0),
            Ok(()),
            "hipMalloc(0) must not be out of memory"
        );
        let bad = MAX_DEVICES as u32;
        let refused = ledger.reserve(bad, 1, 100).unwrap_err();
        assert_eq!(refused.device, bad);
        assert!(
            refused.to_string().contains("outside the accounted range"),
            "{refused}"
        );
        ledger.release(bad, 1); // ignored, no panic
        assert_eq!(ledger.container_usage(bad), 0);
        assert_eq!(ledger.process_usage(u32::MAX), 0);
        // Over-release clamps instead of wrapping to a huge usage.
        ledger.reserve(2, 10, 100).unwrap();
        ledger.release(2, 50);
        assert_eq!(ledger.process_usage(2), 0);
        assert_eq!(ledger.reserve(2, 100, 100), Ok(()));
    }
}

#[test]
fn two_ledgers_on_one_file_share_the_limit() {
    let dir = scratch_dir("two");
    let path = dir.join("ledger");
    let a = Ledger::open_shared(&path).unwrap();
    let b = Ledger::open_shared(&path).unwrap();
    assert!(a.is_shared() && b.is_shared());
    a.reserve(3, 700, 1000).unwrap();
    assert_eq!(b.container_usage(3), 700);
    assert_eq!(b.process_usage(3), 0);
    assert!(b.reserve(3, 301, 1000).is_err());
    b.reserve(3, 300, 1000).unwrap();
    assert_eq!(a.container_usage(3), 1000);
    // Dropping a ledger frees its slot and the usage it recorded.
    drop(a);
    assert_eq!(b.container_usage(3), 300);
}

#[test]
fn snapshot_reports_slots_limits_and_peaks() {
    let dir = scratch_dir("snap");
    let path = dir.join("ledger");
    let ledger = Ledger::open_shared(&path).unwrap();
    ledger.publish_limit(1, 5000);
    ledger.reserve(1, 3000, 5000).unwrap();
    ledger.release(1, 2000);
    let snap = ledger.snapshot();
    assert_eq!(snap.container_usage[1], 1000);
    assert_eq!(snap.container_peak[1], 3000);
    assert_eq!(snap.slots.len(), 1);
    let mine = &snap.slots[0];
    assert_eq!(mine.pid, std::process::id());
    assert!(mine.alive && mine.start_time > 0);
    assert_eq!(
        (mine.used[1], mine.peak[1], mine.limit[1]),
        (1000, 3000, 5000)
    );
    assert_eq!(snap.creator.pid, std::process::id());
    assert!(
        snap.creator.software.starts_with("amvgpu-ledger "),
        "{}",
        snap.creator.software
    );
    let read_only = amvgpu_ledger::open_readonly(&path).unwrap();
    assert_eq!(read_only.container_usage, snap.container_usage);
    assert_eq!(read_only.slots, snap.slots);
}
