//! `Tracker`: the pointer-to-reservation map (design on the type).

use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};

/// What was reserved for one allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub bytes: u64,
    pub device: u32,
    /// Which allocation function ("door") made it, so the matching free can
    /// be checked; opaque to the tracker.
    pub door: u8,
}

/// The tracker could not obtain memory for a new level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrackerFull;

impl core::fmt::Display for TrackerFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("allocation tracker is out of memory for a new table level")
    }
}

impl std::error::Error for TrackerFull {}

#[cfg(not(loom))]
const LEVEL0_LOG2: u32 = 12;
#[cfg(loom)]
const LEVEL0_LOG2: u32 = 1;
#[cfg(not(loom))]
const MAX_LEVELS: usize = 28;
#[cfg(loom)]
const MAX_LEVELS: usize = 3;

const EMPTY: u64 = 0;
const CLAIMING: u64 = 1;
const PRESENT: u64 = 2;
const VACANT: u64 = 3;
const STATE_MASK: u64 = 3;
const GEN_SHIFT: u32 = 42;

#[inline]
fn meta(state: u64, generation: u64, entry: Option<Entry>) -> u64 {
    let payload = entry.map_or(0, |e| {
        (u64::from(e.door) << 2) | (u64::from(e.device) << 10)
    });
    (generation << GEN_SHIFT) | payload | state
}

#[inline]
fn generation(meta: u64) -> u64 {
    meta >> GEN_SHIFT
}

#[inline]
fn next_generation(meta: u64) -> u64 {
    (generation(meta) + 1) & ((1 << (64 - GEN_SHIFT)) - 1)
}

#[inline]
fn unpack(meta: u64, bytes: u64) -> Entry {
    Entry {
        bytes,
        device: (meta >> 10) as u32,
        door: (meta >> 2) as u8,
    }
}

/// Multiplicative (Fibonacci) hashing: multiplying by an odd constant is a
/// bijection (distinct keys never share a hash), and since bit `j` of a
/// product affects only bits `>= j`, the bucket index takes the *top* bits,
/// which every key bit reaches. Keys in arithmetic progression (e.g. 2
/// MiB-aligned pointers, 21 constant low bits) spread almost perfectly evenly.
/// One multiply instead of murmur3's finaliser (two multiplies, three
/// shift-xors): this runs on every tracked allocation and free.
#[inline]
pub(crate) fn mix(key: u64) -> u64 {
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

#[inline]
const fn level_log2(level: usize) -> u32 {
    LEVEL0_LOG2 + level as u32
}

#[inline]
fn home(hash: u64, level: usize) -> usize {
    (hash >> (64 - level_log2(level))) as usize
}

#[repr(C)]
struct Bucket {
    meta: AtomicU64,
    key: AtomicU64,
    bytes: AtomicU64,
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Bucket>() == 24);

/// Per-level counts of buckets ever taken from EMPTY, written only when a
/// never-used bucket is claimed. The array starts on its own cache line, away
/// from `levels`/`newest`, which every operation reads; the counters share
/// lines with each other, which costs nothing because only the newest level
/// is being filled at any time. (One line per counter made each tracker
/// 2 KiB: 18 KiB of state, four page faults, in every hooked process.)
#[repr(align(64))]
struct Filled([AtomicUsize; MAX_LEVELS]);

/// `Tracker`: a lock-free map from allocation pointer (or handle) to what was
/// reserved for it, so a free can release exactly those bytes.
///
/// # Design
///
/// Open addressing with linear probing over *levels*: level `i` holds
/// `LEVEL0 << i` buckets of 24 bytes, mapped (anonymous, zero-filled) when
/// first needed. New entries go to the newest level; once half its buckets
/// have ever been used, the next (twice as large) level is added. Nothing is
/// ever rehashed or moved, so no operation waits for another: a lookup simply
/// probes every level, newest first. Levels are only unmapped by `Drop`.
///
/// A bucket is `{ meta, key, bytes }`. `meta` holds a two-bit state (EMPTY,
/// CLAIMING, PRESENT, VACANT), the entry's device and door, and a 22-bit
/// generation bumped on every claim. It works like a seqlock: a writer first
/// CASes `meta` to CLAIMING (gaining exclusive use of `key`/`bytes`), writes
/// them with Release, then publishes PRESENT with Release. A reader loads
/// `meta` (Acquire), then `key`/`bytes` (Acquire), then `meta` again; equal
/// words mean the key and bytes belong to that generation. `remove` turns
/// PRESENT into VACANT with a CAS against the word it read, so it can only
/// take the entry it inspected: a bucket recycled for another key meanwhile
/// has another generation and the CAS fails. VACANT buckets (tombstones) keep
/// probe chains intact and are reused by later inserts; EMPTY ends a chain.
/// A new entry may thus land in an older level; lookups probe all levels, so
/// it is found wherever it is.
///
/// # Semantics worth knowing
///
/// * Inserting a key that is present replaces its entry; `insert_or_replace`
///   returns the old one (its bytes were never released: the runtime handed
///   the same pointer out again, so a free went unseen). Two threads
///   inserting the same key at the same instant may both succeed, leaving two
///   entries that two removes take one by one.
/// * An operation racing a `remove` of the same key (a use-after-free or
///   double free in the program) sees the entry either fully present or gone.
/// * `len` and `drain_device` scan every level: they are for tools and
///   `hipDeviceReset`, not the hot path.
/// * Memory: at most 2x the buckets needed for the peak number of live
///   entries (~50 bytes per live entry at one million). An insert reuses the
///   first tombstone on its probe chain in *any* level before it takes a
///   never-used bucket, so churn through addresses that never repeat refills
///   old levels instead of growing the table (measured: 288 KiB after one
///   million distinct addresses with 100 live).
/// * Fork: the memory is private, so a child starts with a copy of the
///   parent's entries. That is harmless: the child's ledger slot starts at
///   zero and releasing from an empty slot clamps at zero.
pub struct Tracker {
    levels: [AtomicPtr<Bucket>; MAX_LEVELS],
    newest: AtomicUsize,
    filled: Filled,
}

impl core::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tracker")
            .field("levels", &(self.newest.load(Relaxed) + 1))
            .field("table_bytes", &self.table_bytes())
            .finish()
    }
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new()
    }
}

enum Probe<'a> {
    Found(Option<Entry>),
    /// Absent; carries the first VACANT bucket of the chain (bucket, word).
    NotFound(Option<(&'a Bucket, u64)>),
}

impl Tracker {
    /// An empty tracker; no memory is mapped until the first insert, so it
    /// can initialise a `static`.
    #[cfg(not(loom))]
    pub const fn new() -> Tracker {
        Tracker {
            levels: [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_LEVELS],
            newest: AtomicUsize::new(0),
            filled: Filled([const { AtomicUsize::new(0) }; MAX_LEVELS]),
        }
    }

    #[cfg(loom)]
    pub fn new() -> Tracker {
        Tracker {
            levels: std::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            newest: AtomicUsize::new(0),
            filled: Filled(std::array::from_fn(|_| AtomicUsize::new(0))),
        }
    }

    #[inline]
    fn level(&self, level: usize) -> Option<&[Bucket]> {
        // Acquire pairs with the AcqRel CAS in `add_level`, making the
        // zero-initialised buckets visible before we touch them.
        let ptr = self.levels[level].load(Acquire);
        if ptr.is_null() {
            return None;
        }
        // SAFETY: a non-null level pointer was published by `add_level` for a
        // zero-initialised array of exactly `1 << level_log2(level)` buckets
        // that stays allocated until `Drop` (which needs `&mut self`).
        Some(unsafe { core::slice::from_raw_parts(ptr, 1 << level_log2(level)) })
    }

    /// Bytes of bucket memory currently mapped.
    pub fn table_bytes(&self) -> usize {
        (0..MAX_LEVELS)
            .filter(|&l| !self.levels[l].load(Relaxed).is_null())
            .map(|l| (1usize << level_log2(l)) * core::mem::size_of::<Bucket>())
            .sum()
    }

    /// Records `entry` for `key`. A present key's entry is replaced (see
    /// `insert_or_replace` to learn the old one). Fails only when no memory
    /// can be mapped for a new level.
    #[inline]
    pub fn insert(&self, key: usize, entry: Entry) -> Result<(), TrackerFull> {
        self.insert_or_replace(key, entry).map(|_| ())
    }

    /// Like `insert`, returning the entry it replaced, if any.
    #[inline]
    pub fn insert_or_replace(
        &self,
        key: usize,
        entry: Entry,
    ) -> Result<Option<Entry>, TrackerFull> {
        let key = key as u64;
        let hash = mix(key);
        'retry: loop {
            let newest = self.newest.load(Acquire);
            // Older levels: replace a present key; remember a tombstone there,
            // so churn through new addresses refills old levels instead of
            // growing the table.
            let mut older_vacant = None;
            for level in (0..newest).rev() {
                if let Some(table) = self.level(level) {
                    match self.probe_replace(table, level, hash, key, entry) {
                        Probe::Found(old) => return Ok(old),
                        Probe::NotFound(Some((bucket, m))) if older_vacant.is_none() => {
                            older_vacant = Some((bucket, level, m));
                        }
                        Probe::NotFound(_) => {}
                    }
                }
            }
            let Some(table) = self.level(newest) else {
                self.add_level(newest)?;
                continue;
            };
            let mask = table.len() - 1;
            let mut index = home(hash, newest);
            let mut vacant = None;
            let mut empty = None;
            let mut steps = 0;
            while steps < table.len() {
                let bucket = &table[index];
                let m = bucket.meta.load(Acquire);
                match m & STATE_MASK {
                    EMPTY => {
                        empty = Some((bucket, m));
                        break;
                    }
                    VACANT if vacant.is_none() => vacant = Some((bucket, m)),
                    PRESENT if bucket.key.load(Acquire) == key => {
                        if bucket.meta.load(Relaxed) == m {
                            if let Some(old) = Self::replace_at(bucket, m, entry) {
                                return Ok(Some(old));
                            }
                        }
                        continue; // changed under us: look again
                    }
                    _ => {}
                }
                index = (index + 1) & mask;
                steps += 1;
            }
            let half_full = self.filled.0[newest].load(Relaxed) >= table.len() / 2;
            // The chosen bucket is kept by reference rather than re-found by
            // (level, index): levels are never unmapped while `self` lives.
            let (bucket, level, m) = match (vacant, older_vacant, empty) {
                (Some((bucket, m)), _, _) => (bucket, newest, m),
                (None, Some(older), _) => older,
                (None, None, Some((bucket, m))) if !half_full => (bucket, newest, m),
                _ => {
                    self.add_level(newest + 1)?;
                    continue 'retry;
                }
            };
            let generation = next_generation(m);
            // AcqRel: Acquire orders our key/bytes stores after the claim (no
            // reader can pair them with the previous generation's word);
            // Release is not needed here but costs nothing extra on a CAS.
            if bucket
                .meta
                .compare_exchange(m, meta(CLAIMING, generation, None), AcqRel, Relaxed)
                .is_err()
            {
                continue 'retry;
            }
            if m & STATE_MASK == EMPTY {
                self.filled.0[level].fetch_add(1, Relaxed);
            }
            Self::publish(bucket, generation, key, entry);
            return Ok(None);
        }
    }

    /// Writes a claimed bucket's contents and makes it PRESENT.
    #[inline]
    fn publish(bucket: &Bucket, generation: u64, key: u64, entry: Entry) {
        // Release on the data so a reader whose Acquire load sees it also sees
        // our CLAIMING word, and so detects the change on its second look.
        bucket.key.store(key, Release);
        bucket.bytes.store(entry.bytes, Release);
        // Release: a reader that sees PRESENT sees the key and bytes.
        bucket
            .meta
            .store(meta(PRESENT, generation, Some(entry)), Release);
    }

    /// Replaces the entry in a PRESENT bucket whose word is `m`; `None` if the
    /// bucket changed first.
    fn replace_at(bucket: &Bucket, m: u64, entry: Entry) -> Option<Entry> {
        let generation = next_generation(m);
        bucket
            .meta
            .compare_exchange(m, meta(CLAIMING, generation, None), AcqRel, Relaxed)
            .ok()?;
        // We own the bucket: nobody else writes `bytes` until we publish.
        let old = unpack(m, bucket.bytes.load(Acquire));
        let key = bucket.key.load(Acquire);
        Self::publish(bucket, generation, key, entry);
        Some(old)
    }

    fn probe_replace<'a>(
        &self,
        table: &'a [Bucket],
        level: usize,
        hash: u64,
        key: u64,
        entry: Entry,
    ) -> Probe<'a> {
        let mask = table.len() - 1;
        let mut index = home(hash, level);
        let mut steps = 0;
        let mut vacant = None;
        while steps < table.len() {
            let bucket = &table[index];
            let m = bucket.meta.load(Acquire);
            match m & STATE_MASK {
                EMPTY => return Probe::NotFound(vacant),
                VACANT if vacant.is_none() => vacant = Some((bucket, m)),
                PRESENT if bucket.key.load(Acquire) == key => {
                    if bucket.meta.load(Relaxed) == m {
                        if let Some(old) = Self::replace_at(bucket, m, entry) {
                            return Probe::Found(Some(old));
                        }
                    }
                    continue;
                }
                _ => {}
            }
            index = (index + 1) & mask;
            steps += 1;
        }
        Probe::NotFound(vacant)
    }

    /// Maps level `level` if no thread has yet, and makes it the newest.
    #[cold]
    fn add_level(&self, level: usize) -> Result<(), TrackerFull> {
        if level >= MAX_LEVELS {
            return Err(TrackerFull);
        }
        if self.levels[level].load(Acquire).is_null() {
            let fresh = alloc_level(1 << level_log2(level)).ok_or(TrackerFull)?;
            // AcqRel: Release publishes the zeroed buckets to `level()`.
            if self.levels[level]
                .compare_exchange(core::ptr::null_mut(), fresh, AcqRel, Acquire)
                .is_err()
            {
                // SAFETY: `fresh` came from `alloc_level` with this length and
                // was never published, so no one else can reference it.
                unsafe { free_level(fresh, 1 << level_log2(level)) };
            }
        }
        // AcqRel: a thread reading the new `newest` finds the level published.
        self.newest.fetch_max(level, AcqRel);
        Ok(())
    }

    /// The entry recorded for `key`.
    pub fn get(&self, key: usize) -> Option<Entry> {
        let key = key as u64;
        let hash = mix(key);
        let newest = self.newest.load(Acquire);
        for level in (0..=newest).rev() {
            let Some(table) = self.level(level) else {
                continue;
            };
            let mask = table.len() - 1;
            let mut index = home(hash, level);
            let mut steps = 0;
            while steps < table.len() {
                let bucket = &table[index];
                let m = bucket.meta.load(Acquire);
                match m & STATE_MASK {
                    EMPTY => break,
                    PRESENT if bucket.key.load(Acquire) == key => {
                        let bytes = bucket.bytes.load(Acquire);
                        // The Acquire loads above keep this load after them.
                        if bucket.meta.load(Relaxed) == m {
                            return Some(unpack(m, bytes));
                        }
                        continue; // changed while we read: look again
                    }
                    _ => {}
                }
                index = (index + 1) & mask;
                steps += 1;
            }
        }
        None
    }

    /// Removes and returns the entry for `key`.
    #[inline]
    pub fn remove(&self, key: usize) -> Option<Entry> {
        let key = key as u64;
        let hash = mix(key);
        let newest = self.newest.load(Acquire);
        for level in (0..=newest).rev() {
            let Some(table) = self.level(level) else {
                continue;
            };
            let mask = table.len() - 1;
            let mut index = home(hash, level);
            let mut steps = 0;
            while steps < table.len() {
                let bucket = &table[index];
                let m = bucket.meta.load(Acquire);
                match m & STATE_MASK {
                    EMPTY => break,
                    PRESENT if bucket.key.load(Acquire) == key => {
                        let bytes = bucket.bytes.load(Acquire);
                        // Succeeds only if the bucket still holds the very
                        // generation whose key and bytes we just read.
                        if bucket
                            .meta
                            .compare_exchange(m, meta(VACANT, generation(m), None), AcqRel, Relaxed)
                            .is_ok()
                        {
                            return Some(unpack(m, bytes));
                        }
                        continue;
                    }
                    _ => {}
                }
                index = (index + 1) & mask;
                steps += 1;
            }
        }
        None
    }

    /// Live entries. Scans every level: O(capacity).
    pub fn len(&self) -> usize {
        let mut live = 0;
        for level in 0..MAX_LEVELS {
            if let Some(table) = self.level(level) {
                live += table
                    .iter()
                    .filter(|b| b.meta.load(Acquire) & STATE_MASK == PRESENT)
                    .count();
            }
        }
        live
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every entry of `device`, handing each to `f` (for
    /// `hipDeviceReset`, which frees all of a device's memory at once).
    /// Entries inserted concurrently may or may not be visited.
    pub fn drain_device(&self, device: u32, mut f: impl FnMut(usize, Entry)) {
        for level in 0..MAX_LEVELS {
            let Some(table) = self.level(level) else {
                continue;
            };
            for bucket in table {
                loop {
                    let m = bucket.meta.load(Acquire);
                    if m & STATE_MASK != PRESENT || (m >> 10) as u32 != device {
                        break;
                    }
                    let key = bucket.key.load(Acquire);
                    let bytes = bucket.bytes.load(Acquire);
                    if bucket
                        .meta
                        .compare_exchange(m, meta(VACANT, generation(m), None), AcqRel, Relaxed)
                        .is_ok()
                    {
                        f(key as usize, unpack(m, bytes));
                        break;
                    }
                }
            }
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for level in 0..MAX_LEVELS {
            let ptr = self.levels[level].load(Acquire);
            if !ptr.is_null() {
                // SAFETY: published by `add_level` from `alloc_level` with this
                // length; `&mut self` means no reference into it remains.
                unsafe { free_level(ptr, 1 << level_log2(level)) };
            }
        }
    }
}

#[cfg(not(loom))]
fn alloc_level(buckets: usize) -> Option<*mut Bucket> {
    let len = buckets.checked_mul(core::mem::size_of::<Bucket>())?;
    let mapping = crate::os::Mapping::anonymous(len).ok()?;
    let ptr = mapping.ptr.cast::<Bucket>();
    // Ownership passes to the tracker; `free_level` unmaps it.
    core::mem::forget(mapping);
    Some(ptr)
}

/// # Safety
/// `ptr` must come from `alloc_level(buckets)` and no reference into the level
/// may outlive this call.
#[cfg(not(loom))]
unsafe fn free_level(ptr: *mut Bucket, buckets: usize) {
    drop(crate::os::Mapping {
        ptr: ptr.cast(),
        len: buckets * core::mem::size_of::<Bucket>(),
    });
}

#[cfg(loom)]
fn alloc_level(buckets: usize) -> Option<*mut Bucket> {
    let level: Box<[Bucket]> = (0..buckets)
        .map(|_| Bucket {
            meta: AtomicU64::new(0),
            key: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        })
        .collect();
    Some(Box::into_raw(level).cast())
}

/// # Safety
/// `ptr` must come from `alloc_level(buckets)` and no reference into the level
/// may outlive this call.
#[cfg(loom)]
unsafe fn free_level(ptr: *mut Bucket, buckets: usize) {
    // SAFETY: per the contract, `ptr` is a leaked `Box<[Bucket]>` of `buckets`.
    drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(ptr, buckets)) });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn aligned_pointers_spread_evenly_over_buckets() {
        // 64 Ki keys 2 MiB apart (typical device allocations) into 4096
        // buckets: a good mixer gives ~16 per bucket; low-bit indexing would
        // put them all in one.
        let log2 = level_log2(0);
        let mut counts = vec![0u32; 1 << log2];
        let base = 0x7f00_0000_0000u64;
        for i in 0..(1u64 << 16) {
            counts[home(mix(base + (i << 21)), 0)] += 1;
        }
        let max = *counts.iter().max().unwrap();
        let empty = counts.iter().filter(|&&c| c == 0).count();
        assert!(max <= 40, "fullest bucket has {max} keys (expected ~16)");
        assert_eq!(empty, 0, "{empty} buckets never hit");
        // Chi-square against uniform, 4095 degrees of freedom: mean 4095,
        // sd ~90; 4600 is > 5 sd.
        let expected = 16.0;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (f64::from(c) - expected).powi(2) / expected)
            .sum();
        assert!(chi2 < 4600.0, "chi-square {chi2}");
    }

    #[test]
    fn meta_round_trips_device_door_and_generation() {
        let e = Entry {
            bytes: u64::MAX,
            device: u32::MAX,
            door: 0xff,
        };
        let m = meta(PRESENT, (1 << 22) - 1, Some(e));
        assert_eq!(m & STATE_MASK, PRESENT);
        assert_eq!(generation(m), (1 << 22) - 1);
        assert_eq!(next_generation(m), 0);
        assert_eq!(unpack(m, u64::MAX), e);
    }
}
