//! The pointer tracker: capacity, memory per entry, replacement, draining and
//! concurrent use.

use amvgpu_ledger::{Entry, Tracker};
use std::sync::{Arc, Barrier};

fn entry(bytes: u64, device: u32, door: u8) -> Entry {
    Entry {
        bytes,
        device,
        door,
    }
}

const BASE: usize = 0x7f00_0000_0000;
const TWO_MIB: usize = 2 << 20;

#[test]
fn insert_get_remove_and_replace() {
    let t = Tracker::new();
    assert!(t.is_empty());
    assert_eq!(t.remove(BASE), None);
    t.insert(BASE, entry(100, 0, 1)).unwrap();
    t.insert(BASE + TWO_MIB, entry(200, 1, 2)).unwrap();
    // Keys the C table could not hold: NULL and all-ones are ordinary keys.
    t.insert(0, entry(1, 2, 3)).unwrap();
    t.insert(usize::MAX, entry(2, 3, 4)).unwrap();
    assert_eq!(t.len(), 4);
    assert_eq!(t.get(BASE), Some(entry(100, 0, 1)));
    assert_eq!(t.get(0), Some(entry(1, 2, 3)));
    assert_eq!(t.get(usize::MAX), Some(entry(2, 3, 4)));
    // The runtime handing out a live pointer again: the old entry comes back
    // so its bytes can be released; the key keeps one entry.
    assert_eq!(
        t.insert_or_replace(BASE, entry(300, 0, 5)).unwrap(),
        Some(entry(100, 0, 1))
    );
    assert_eq!(t.len(), 4);
    assert_eq!(t.remove(BASE), Some(entry(300, 0, 5)));
    assert_eq!(t.remove(BASE), None, "a double free finds nothing");
    assert_eq!(t.get(BASE), None);
    assert_eq!(t.remove(0), Some(entry(1, 2, 3)));
    assert_eq!(t.len(), 2);
}

#[test]
fn drain_device_removes_exactly_that_device() {
    let t = Tracker::new();
    for i in 0..10_000usize {
        t.insert(BASE + i * TWO_MIB, entry(i as u64, (i % 3) as u32, 0))
            .unwrap();
    }
    let mut drained = Vec::new();
    t.drain_device(1, |key, e| drained.push((key, e)));
    assert_eq!(drained.len(), 3333);
    assert!(drained
        .iter()
        .all(|(key, e)| e.device == 1 && *key == BASE + e.bytes as usize * TWO_MIB));
    assert_eq!(t.len(), 10_000 - 3333);
    assert_eq!(t.get(BASE + TWO_MIB), None);
    assert_eq!(t.get(BASE + 2 * TWO_MIB), Some(entry(2, 2, 0)));
}

#[test]
fn a_million_live_aligned_entries_fit_in_64_bytes_each() {
    let t = Tracker::new();
    let n = 1_000_000usize;
    for i in 0..n {
        t.insert(
            BASE + i * TWO_MIB,
            entry(i as u64 + 1, (i % 32) as u32, (i % 7) as u8),
        )
        .expect("no fixed cap");
    }
    assert_eq!(t.len(), n);
    for i in (0..n).step_by(997) {
        assert_eq!(
            t.get(BASE + i * TWO_MIB),
            Some(entry(i as u64 + 1, (i % 32) as u32, (i % 7) as u8))
        );
    }
    let per_entry = t.table_bytes() as f64 / n as f64;
    println!(
        "tracker: {} bytes of table for {n} live entries = {per_entry:.1} bytes/entry",
        t.table_bytes()
    );
    assert!(per_entry <= 64.0, "{per_entry} bytes per live entry");
    for i in 0..n {
        assert_eq!(
            t.remove(BASE + i * TWO_MIB).map(|e| e.bytes),
            Some(i as u64 + 1)
        );
    }
    assert!(t.is_empty());
}

#[test]
fn churn_with_reused_addresses_does_not_grow_the_table() {
    let t = Tracker::new();
    for round in 0..200u64 {
        for i in 0..1000usize {
            t.insert(BASE + i * TWO_MIB, entry(round, 0, 0)).unwrap();
        }
        for i in 0..1000usize {
            assert_eq!(t.remove(BASE + i * TWO_MIB).map(|e| e.bytes), Some(round));
        }
    }
    // 1000 live at most: level 0 (4096 buckets) and one more at most.
    assert!(
        t.table_bytes() <= (4096 + 8192) * 24,
        "{} bytes",
        t.table_bytes()
    );
}

#[test]
fn eight_threads_hammering_lose_and_duplicate_nothing() {
    const THREADS: usize = 8;
    const KEYS: usize = 20_000;
    let t = Arc::new(Tracker::new());
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|id| {
            let t = t.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                // Interleaved key ranges so neighbours probe each other's buckets.
                let key = |i: usize| BASE + (i * THREADS + id) * TWO_MIB;
                let mut kept = 0u64;
                for round in 0..3 {
                    for i in 0..KEYS {
                        t.insert(key(i), entry((i + round) as u64, id as u32, round as u8))
                            .unwrap();
                    }
                    for i in 0..KEYS {
                        let got = t.get(key(i)).expect("own entry visible");
                        assert_eq!((got.bytes, got.device), ((i + round) as u64, id as u32));
                    }
                    for i in (0..KEYS).filter(|i| i % 4 != 0 || round < 2) {
                        assert_eq!(t.remove(key(i)).map(|e| e.bytes), Some((i + round) as u64));
                    }
                }
                for i in (0..KEYS).step_by(4) {
                    kept += t.get(key(i)).unwrap().bytes;
                }
                kept
            })
        })
        .collect();
    let kept: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(t.len(), THREADS * KEYS / 4);
    let mut drained = 0u64;
    for device in 0..THREADS as u32 {
        t.drain_device(device, |_, e| drained += e.bytes);
    }
    assert_eq!(drained, kept);
    assert!(t.is_empty());
}

#[test]
fn churn_through_never_repeated_addresses_refills_old_tombstones() {
    // A runtime that never hands the same address out twice: inserts reuse
    // the tombstones of earlier addresses (in any level), so the table stops
    // growing instead of growing with every operation.
    let t = Tracker::new();
    let distinct = 1_000_000usize;
    for i in 0..distinct {
        t.insert(BASE + i * TWO_MIB, entry(i as u64, 0, 0)).unwrap();
        if i >= 100 {
            assert_eq!(
                t.remove(BASE + (i - 100) * TWO_MIB).map(|e| e.bytes),
                Some(i as u64 - 100)
            );
        }
    }
    assert_eq!(t.len(), 100);
    let per_address = t.table_bytes() as f64 / distinct as f64;
    println!("tracker: {} bytes after {distinct} distinct addresses, 100 live: {per_address:.1} bytes/address", t.table_bytes());
    assert!(t.table_bytes() <= 1 << 20, "{} bytes", t.table_bytes());
    assert!(per_address < 1.0, "{per_address}");
}

#[test]
fn matches_a_hashmap_over_random_operations() {
    use std::collections::HashMap;
    let t = Tracker::new();
    let mut model: HashMap<usize, Entry> = HashMap::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for step in 0..300_000u64 {
        let r = rand();
        // A key space large enough to open several levels and leave many
        // tombstones, small enough that keys come back.
        let key = BASE + (r as usize % 12_000) * TWO_MIB;
        let e = entry(step, (r >> 20) as u32 % 4, (r >> 30) as u8);
        match (r >> 40) % 8 {
            0..=2 => assert_eq!(
                t.insert_or_replace(key, e).unwrap(),
                model.insert(key, e),
                "step {step}"
            ),
            3..=5 => assert_eq!(t.remove(key), model.remove(&key), "step {step}"),
            6 => assert_eq!(t.get(key), model.get(&key).copied(), "step {step}"),
            _ if step % 1000 == 7 => {
                let device = (r >> 50) as u32 % 4;
                let mut drained = HashMap::new();
                t.drain_device(device, |k, e| assert!(drained.insert(k, e).is_none()));
                let expected: HashMap<_, _> = model
                    .iter()
                    .filter(|(_, e)| e.device == device)
                    .map(|(k, e)| (*k, *e))
                    .collect();
                assert_eq!(drained, expected, "step {step}");
                model.retain(|_, e| e.device != device);
            }
            _ if step % 500 == 0 => assert_eq!(t.len(), model.len(), "step {step}"),
            _ => assert_eq!(t.get(key), model.get(&key).copied(), "step {step}"),
        }
    }
}
