//! Quick, noise-resistant check of the hook's hot path: best-of-7 timings of
//! each operation next to a calibration of four uncontended atomic RMWs (the
//! floor for any lock-free design that updates one counter and one map entry
//! on both allocation and free), so a busy machine shows in the ratio.
//! Run: `cargo run --release -p amvgpu-ledger --example hot_path_ratio`

use amvgpu_ledger::{Entry, Ledger, Tracker};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

fn best_ns(mut f: impl FnMut()) -> f64 {
    let n = 2_000_000u32;
    (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let dir = std::env::temp_dir().join(format!("amvgpu-hot-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let ledger = Ledger::open_shared(&dir.join("ledger")).expect("ledger");
    let tracker = Tracker::new();
    let words: [AtomicU64; 4] = Default::default();
    let key = |i: usize| 0x7f00_0000_0000 + (i & 63) * (2 << 20);
    let mut i = 0;

    let floor = best_ns(|| {
        for w in &words {
            black_box(w.fetch_add(1, Ordering::SeqCst));
        }
    });
    let ledger_pair = best_ns(|| {
        ledger.reserve(0, black_box(4096), 1 << 40).unwrap();
        ledger.release(0, black_box(4096));
    });
    let tracker_pair = best_ns(|| {
        i += 1;
        tracker
            .insert(
                key(i),
                Entry {
                    bytes: 4096,
                    device: 0,
                    door: 0,
                },
            )
            .unwrap();
        black_box(tracker.remove(black_box(key(i))));
    });
    let hook_pair = best_ns(|| {
        i += 1;
        ledger.reserve(0, black_box(4096), 1 << 40).unwrap();
        tracker
            .insert(
                key(i),
                Entry {
                    bytes: 4096,
                    device: 0,
                    door: 0,
                },
            )
            .unwrap();
        let e = tracker.remove(black_box(key(i))).unwrap();
        ledger.release(e.device, e.bytes);
    });
    println!("floor: 4 atomic RMWs          {floor:6.1} ns");
    for (name, ns) in [
        ("reserve+release", ledger_pair),
        ("insert+remove", tracker_pair),
        ("hook pair (all four)", hook_pair),
    ] {
        println!("{name:<30}{ns:6.1} ns  ({:.1}x floor)", ns / floor);
    }
    drop(ledger);
    let _ = std::fs::remove_dir_all(&dir);
}
