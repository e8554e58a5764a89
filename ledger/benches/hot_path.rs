//! What the hook adds to a hipMalloc+hipFree pair: reserve + tracker insert
//! on the way in, tracker remove + release on the way out (target <= 60 ns).
//! Run: `cargo bench -p amvgpu-ledger --bench hot_path`

use amvgpu_ledger::{Entry, Ledger, Tracker};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const LIMIT: u64 = 64 << 30;
const TWO_MIB: usize = 2 << 20;
const BASE: usize = 0x7f00_0000_0000;

fn shared_ledger(name: &str) -> Ledger {
    let dir =
        std::env::temp_dir().join(format!("amvgpu-ledger-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Ledger::open_shared(&dir.join("ledger")).unwrap()
}

/// A tracker holding `live` unrelated entries, as a running program would.
fn populated_tracker(live: usize) -> Tracker {
    let t = Tracker::new();
    for i in 0..live {
        t.insert(
            BASE + (1 << 40) + i * TWO_MIB,
            Entry {
                bytes: 1,
                device: 0,
                door: 0,
            },
        )
        .unwrap();
    }
    t
}

/// One simulated hipMalloc+hipFree as the hook sees it.
#[inline(always)]
fn pair(ledger: &Ledger, tracker: &Tracker, key: usize) {
    let bytes = 4 << 20;
    if ledger.reserve(0, bytes, LIMIT).is_ok() {
        let _ = tracker.insert(
            key,
            Entry {
                bytes,
                device: 0,
                door: 1,
            },
        );
        if let Some(e) = tracker.remove(black_box(key)) {
            ledger.release(e.device, e.bytes);
        }
    }
}

/// Times `iters` calls of `work` on this thread while another thread runs
/// `background` flat out (the contended case).
fn with_background<B, W>(iters: u64, background: B, mut work: W) -> Duration
where
    B: Fn() + Send + 'static,
    W: FnMut(u64),
{
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(2));
    let bg = {
        let stop = stop.clone();
        let ready = ready.clone();
        std::thread::spawn(move || {
            ready.wait();
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    background();
                }
            }
        })
    };
    ready.wait();
    let start = Instant::now();
    for i in 0..iters {
        work(i);
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    bg.join().unwrap();
    elapsed
}

fn single_thread(c: &mut Criterion) {
    let ledger = shared_ledger("single");
    let tracker = populated_tracker(1000);
    let mut g = c.benchmark_group("1 thread");
    // Calibration, measured side by side: four uncontended atomic RMWs, the
    // floor for any lock-free design that updates a counter and a map entry
    // on both allocation and free. Compare ratios when the machine is busy.
    let words: [std::sync::atomic::AtomicU64; 4] = Default::default();
    g.bench_function("baseline: 4 atomic RMWs", |b| {
        b.iter(|| {
            for w in &words {
                black_box(w.fetch_add(black_box(1), Ordering::SeqCst));
            }
        })
    });
    g.bench_function("reserve+release", |b| {
        b.iter(|| {
            ledger.reserve(0, black_box(4 << 20), LIMIT).unwrap();
            ledger.release(0, black_box(4 << 20));
        })
    });
    let mut i = 0usize;
    g.bench_function("insert+remove", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            let key = BASE + i * TWO_MIB;
            tracker
                .insert(
                    key,
                    Entry {
                        bytes: 4 << 20,
                        device: 0,
                        door: 1,
                    },
                )
                .unwrap();
            black_box(tracker.remove(black_box(key)));
        })
    });
    let small = populated_tracker(0);
    g.bench_function("insert+remove, 64 keys cycling", |b| {
        b.iter(|| {
            i = (i + 1) & 63;
            let key = BASE + i * TWO_MIB;
            small
                .insert(
                    key,
                    Entry {
                        bytes: 4 << 20,
                        device: 0,
                        door: 1,
                    },
                )
                .unwrap();
            black_box(small.remove(black_box(key)));
        })
    });
    g.bench_function("hook pair (reserve+insert+remove+release)", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            pair(&ledger, &tracker, BASE + i * TWO_MIB);
        })
    });
    g.finish();
    eprintln!("after 1-thread benches: {tracker:?}");
}

fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("2 threads");
    // Both threads in one process: one slot, one `used` word, contended.
    let ledger = Arc::new(shared_ledger("two"));
    let tracker = Arc::new(populated_tracker(1000));
    g.bench_function("reserve+release, same process", |b| {
        b.iter_custom(|iters| {
            let l = ledger.clone();
            with_background(
                iters,
                move || {
                    l.reserve(0, 4 << 20, LIMIT).unwrap();
                    l.release(0, 4 << 20);
                },
                |_| {
                    ledger.reserve(0, black_box(4 << 20), LIMIT).unwrap();
                    ledger.release(0, black_box(4 << 20));
                },
            )
        })
    });
    // Two ledgers on one file: two slots, as two processes would have.
    let other = Arc::new(shared_ledger("two-procs"));
    let other_path = other.path().unwrap().to_path_buf();
    let mine = Arc::new(Ledger::open_shared(&other_path).unwrap());
    g.bench_function("reserve+release, two processes' slots", |b| {
        b.iter_custom(|iters| {
            let l = other.clone();
            with_background(
                iters,
                move || {
                    l.reserve(0, 4 << 20, LIMIT).unwrap();
                    l.release(0, 4 << 20);
                },
                |_| {
                    mine.reserve(0, black_box(4 << 20), LIMIT).unwrap();
                    mine.release(0, black_box(4 << 20));
                },
            )
        })
    });
    g.bench_function("insert+remove", |b| {
        b.iter_custom(|iters| {
            let t = tracker.clone();
            let next = std::cell::Cell::new(0usize);
            with_background(
                iters,
                move || {
                    let i = (next.get() + 1) & 1023;
                    next.set(i);
                    let key = BASE + (2048 + i) * TWO_MIB;
                    t.insert(
                        key,
                        Entry {
                            bytes: 1,
                            device: 0,
                            door: 1,
                        },
                    )
                    .unwrap();
                    black_box(t.remove(key));
                },
                |n| {
                    let key = BASE + (n as usize & 1023) * TWO_MIB;
                    tracker
                        .insert(
                            key,
                            Entry {
                                bytes: 1,
                                device: 0,
                                door: 1,
                            },
                        )
                        .unwrap();
                    black_box(tracker.remove(black_box(key)));
                },
            )
        })
    });
    g.bench_function("hook pair, same process", |b| {
        b.iter_custom(|iters| {
            let (l, t) = (ledger.clone(), tracker.clone());
            let next = std::cell::Cell::new(0usize);
            with_background(
                iters,
                move || {
                    let i = (next.get() + 1) & 1023;
                    next.set(i);
                    pair(&l, &t, BASE + (2048 + i) * TWO_MIB);
                },
                |n| pair(&ledger, &tracker, BASE + (n as usize & 1023) * TWO_MIB),
            )
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = single_thread, two_threads
}
criterion_main!(benches);
