//! The hook's hot path must not allocate: it runs inside other people's
//! programs, possibly while their allocator is in an inconsistent state.

mod common;
use amvgpu_ledger::{Entry, Ledger, Tracker};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call unchanged to the system allocator; the counter
// is a thread-local Cell, which does not allocate after first use.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

#[test]
fn reserve_release_insert_remove_do_not_allocate() {
    let counted = allocations();
    drop(std::hint::black_box(vec![1u8; 16]));
    assert_eq!(
        allocations(),
        counted + 1,
        "the counting allocator is not in use"
    );
    let dir = common::scratch_dir("noalloc");
    for ledger in [
        Ledger::open_shared(&dir.join("ledger")).unwrap(),
        Ledger::process_local(),
    ] {
        let tracker = Tracker::new();
        let before = allocations();
        // Including the first use (slot claim, first tracker level) and the
        // refusal path (which reclaims, reading /proc).
        for i in 0..10_000usize {
            let key = 0x7f00_0000_0000 + (i % 777) * (2 << 20);
            ledger.reserve((i % 4) as u32, 4096, 1 << 30).unwrap();
            tracker
                .insert(
                    key,
                    Entry {
                        bytes: 4096,
                        device: (i % 4) as u32,
                        door: 0,
                    },
                )
                .unwrap();
            let e = tracker.remove(key).unwrap();
            ledger.release(e.device, e.bytes);
        }
        assert!(ledger.reserve(0, 2 << 30, 1 << 30).is_err());
        ledger.reserve(0, 1 << 30, 1 << 30).unwrap();
        assert!(ledger.reserve(0, 1, 1 << 30).is_err());
        ledger.release(0, 1 << 30);
        assert_eq!(allocations() - before, 0, "the hot path allocated");
    }
}
