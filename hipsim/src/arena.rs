//! Fast device memory: one reserved stretch of address space per device, carved up in process.
//!
//! A `mmap`/`munmap` pair per allocation costs microseconds, which drowns the tens of
//! nanoseconds a hook adds to `hipMalloc`+`hipFree`. So each device reserves, at its first
//! allocation, one `MAP_NORESERVE` mapping (untouched pages still cost nothing) and serves
//! allocations from it:
//!
//! - **small** blocks (rounded size under [`LARGE_ALLOCATION_ALIGNMENT`], so only
//!   [`MALLOC_GRANULARITY`]-aligned) come from the small region, which is dealt out in 2 MiB
//!   chunks to the simulator's shards round-robin ([`shard_of`]): shard `k` carves its
//!   [`Small`] part with a bump pointer over the chunks whose index is `k` modulo the number of
//!   shards, and a freed small block goes back to the free list of its exact size in the shard
//!   that carved it, to be handed out again (most recently freed first). So threads allocating
//!   from different shards never wait for each other, and the shard of a block follows from its
//!   address alone. What a chunk has left when a block no longer fits joins the free list of
//!   its size. Bytes are neither zeroed nor returned to the kernel, like real `hipMalloc`, which
//!   does not zero either.
//! - **big** blocks occupy whole 2 MiB units of the big region (which makes them 2 MiB-aligned),
//!   found best-fit among coalesced free ranges ([`Space`], one per device, behind a lock of its
//!   own). A freed big block is `MADV_DONTNEED`ed, so its resident pages go back to the kernel
//!   and it reads as zeroes when reused.
//!
//! The arena never decides out-of-memory: the device counters are charged before it is asked,
//! and whenever it cannot serve a block (region exhausted or fragmented, reservation refused by
//! the kernel, or not attempted because `RLIMIT_AS` caps the address space) the caller maps the
//! block on its own as before. So out-of-memory happens at exactly the same points as without
//! the arena.

use crate::memory;
use hip_sys::sim::{LARGE_ALLOCATION_ALIGNMENT, MALLOC_GRANULARITY};
use std::collections::{BTreeMap, BTreeSet};

/// Number of small size classes: every multiple of 4 KiB below 2 MiB.
const SMALL_CLASSES: usize = LARGE_ALLOCATION_ALIGNMENT / MALLOC_GRANULARITY - 1;

/// The unit in which the small region is dealt out to shards.
const CHUNK: usize = LARGE_ALLOCATION_ALIGNMENT;

/// Caps on one device's regions, so that 64 devices of absurd VRAM still leave most of the
/// 128 TiB user address space to the program; beyond them blocks are mapped one by one.
const SMALL_REGION_CAP: usize = 256 << 30;
const BIG_REGION_CAP: usize = 512 << 30;

/// The shard (of `shards`) whose small-region chunks contain `addr`, and so the shard a small
/// block at `addr` returns to; for other addresses just a spread-out choice.
#[inline]
pub fn shard_of(addr: usize, shards: usize) -> usize {
    (addr / CHUNK) % shards
}

/// One device's reservation and its big region.
#[derive(Debug)]
pub struct Space {
    vram: usize,
    state: State,
}

#[derive(Debug)]
enum State {
    /// No allocation yet on this device: nothing reserved.
    Unreserved,
    /// The kernel refused the reservation: every block is mapped on its own.
    Unavailable,
    Ready(Regions),
}

#[derive(Debug)]
struct Regions {
    /// Small region `[small_base, small_base + small_len)`, carved by the shards' [`Small`]s.
    small_base: usize,
    small_len: usize,
    /// Big region: 2 MiB-aligned, a multiple of 2 MiB long.
    big_base: usize,
    big_len: usize,
    /// Free big ranges, coalesced: start -> length, and (length, start) for best fit.
    big_free_by_start: BTreeMap<usize, usize>,
    big_free_by_len: BTreeSet<(usize, usize)>,
    /// Big blocks handed out and not yet given back.
    live_big: usize,
}

/// Bytes of the big region a big block of `bytes` occupies (whole 2 MiB units).
fn big_span(bytes: usize) -> Option<usize> {
    hip_sys::sim::round_up(bytes, LARGE_ALLOCATION_ALIGNMENT)
}

impl Space {
    /// The space of a device of `vram` bytes; reserves nothing until the first block.
    pub fn new(vram: usize) -> Space {
        Space {
            vram,
            state: State::Unreserved,
        }
    }

    fn regions(&mut self) -> Option<&mut Regions> {
        if let State::Unreserved = self.state {
            self.state = match Regions::reserve(self.vram) {
                Some(regions) => State::Ready(regions),
                None => State::Unavailable,
            };
        }
        match &mut self.state {
            State::Ready(regions) => Some(regions),
            _ => None,
        }
    }

    /// The small region's `(base, len)`, reserving the device's address space first if no
    /// block was taken yet; `None` if there is no reservation (blocks are mapped one by one).
    pub fn small_region(&mut self) -> Option<(usize, usize)> {
        self.regions().map(|r| (r.small_base, r.small_len))
    }

    /// The small region's `(base, len)` if the device's address space is reserved already.
    pub fn small_region_if_reserved(&self) -> Option<(usize, usize)> {
        match &self.state {
            State::Ready(r) => Some((r.small_base, r.small_len)),
            _ => None,
        }
    }

    /// A 2 MiB-aligned block of `bytes` (rounded to 4 KiB, at least 2 MiB, already charged)
    /// from the big region, or `None` when it cannot serve it (the caller maps it on its own).
    pub fn take_big(&mut self, bytes: usize) -> Option<usize> {
        debug_assert!(bytes >= LARGE_ALLOCATION_ALIGNMENT && bytes % MALLOC_GRANULARITY == 0);
        let regions = self.regions()?;
        let addr = regions.take_big(bytes)?;
        regions.live_big += 1;
        Some(addr)
    }

    /// Takes back a block [`Space::take_big`] handed out; `false` if `addr` is not in the big
    /// region (the caller mapped it on its own and must unmap it).
    pub fn give_back_big(&mut self, addr: usize, bytes: usize) -> bool {
        let State::Ready(regions) = &mut self.state else {
            return false;
        };
        if !regions.in_big(addr) {
            return false;
        }
        regions.give_back_big(addr, bytes);
        regions.live_big -= 1;
        true
    }

    /// Big blocks handed out and not given back.
    pub fn live_big(&self) -> usize {
        match &self.state {
            State::Ready(regions) => regions.live_big,
            _ => 0,
        }
    }
}

impl Regions {
    fn reserve(vram: usize) -> Option<Regions> {
        if memory::address_space_is_limited() {
            return None;
        }
        let small_len =
            hip_sys::sim::round_up(vram, LARGE_ALLOCATION_ALIGNMENT)?.min(SMALL_REGION_CAP);
        // Big blocks round up to 2 MiB units, at worst doubling their footprint.
        let big_len = hip_sys::sim::round_up(vram.checked_mul(2)?, LARGE_ALLOCATION_ALIGNMENT)?
            .min(BIG_REGION_CAP);
        // Small region first: both lengths are 2 MiB multiples, so the big region stays aligned.
        let base = memory::map_reservation(small_len.checked_add(big_len)?)?;
        let big_base = base + small_len;
        let mut regions = Regions {
            small_base: base,
            small_len,
            big_base,
            big_len,
            big_free_by_start: BTreeMap::new(),
            big_free_by_len: BTreeSet::new(),
            live_big: 0,
        };
        regions.insert_big_free(big_base, big_len);
        Some(regions)
    }

    fn in_big(&self, addr: usize) -> bool {
        addr >= self.big_base && addr < self.big_base + self.big_len
    }

    fn take_big(&mut self, bytes: usize) -> Option<usize> {
        let span = big_span(bytes)?;
        let &(len, start) = self.big_free_by_len.range((span, 0)..).next()?;
        self.remove_big_free(start, len);
        if len > span {
            self.insert_big_free(start + span, len - span);
        }
        Some(start)
    }

    fn give_back_big(&mut self, addr: usize, bytes: usize) {
        let span = big_span(bytes).expect("a span computed when the block was taken");
        // Freed device memory holds no resident pages (and reads as zeroes when reused).
        memory::discard(addr, span);
        let (mut start, mut len) = (addr, span);
        if let Some((&prev, &prev_len)) = self.big_free_by_start.range(..addr).next_back() {
            if prev + prev_len == addr {
                self.remove_big_free(prev, prev_len);
                start = prev;
                len += prev_len;
            }
        }
        if let Some(&next_len) = self.big_free_by_start.get(&(addr + span)) {
            self.remove_big_free(addr + span, next_len);
            len += next_len;
        }
        self.insert_big_free(start, len);
    }

    fn insert_big_free(&mut self, start: usize, len: usize) {
        self.big_free_by_start.insert(start, len);
        self.big_free_by_len.insert((len, start));
    }

    fn remove_big_free(&mut self, start: usize, len: usize) {
        self.big_free_by_start.remove(&start);
        self.big_free_by_len.remove(&(len, start));
    }
}

/// One shard's part of one device's small region: the chunks `c` with `c % shards == shard`.
#[derive(Debug)]
pub struct Small {
    base: usize,
    len: usize,
    shard: usize,
    shards: usize,
    /// Bump pointer inside the current chunk `[.., chunk_end)`; both 0 before the first chunk.
    next: usize,
    chunk_end: usize,
    /// `free[bytes / 4 KiB - 1]`: freed small blocks of exactly `bytes`.
    free: Vec<Vec<usize>>,
    /// Blocks handed out and not yet given back.
    live: usize,
}

impl Small {
    /// Shard `shard`'s part of the small region `[base, base + len)` (`base` 2 MiB-aligned).
    pub fn new(base: usize, len: usize, shard: usize, shards: usize) -> Small {
        debug_assert!(base % CHUNK == 0 && shard < shards);
        Small {
            base,
            len,
            shard,
            shards,
            next: 0,
            chunk_end: 0,
            free: vec![Vec::new(); SMALL_CLASSES],
            live: 0,
        }
    }

    /// Whether `addr` lies in the small region (in any shard's chunk).
    #[inline]
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.base && addr - self.base < self.len
    }

    /// A block of `bytes` (rounded to 4 KiB, non-zero, under 2 MiB, already charged), or `None`
    /// when this shard has neither a freed block of that size nor room in its chunks.
    #[inline]
    pub fn take(&mut self, bytes: usize) -> Option<usize> {
        debug_assert!(bytes > 0 && bytes % MALLOC_GRANULARITY == 0 && bytes < CHUNK);
        let addr = match self.free[bytes / MALLOC_GRANULARITY - 1].pop() {
            Some(addr) => addr,
            None => self.bump(bytes)?,
        };
        self.live += 1;
        Some(addr)
    }

    fn bump(&mut self, bytes: usize) -> Option<usize> {
        if self.chunk_end - self.next < bytes {
            // Freed blocks of other sizes are not split or merged; the rest of this chunk joins
            // the free list of its own size, and carving moves on to the shard's next chunk.
            let rest = self.chunk_end - self.next;
            if rest > 0 {
                self.free[rest / MALLOC_GRANULARITY - 1].push(self.next);
                self.next = self.chunk_end;
            }
            let start = if self.chunk_end == 0 {
                let first = self.base / CHUNK;
                (first + (self.shard + self.shards - first % self.shards) % self.shards) * CHUNK
            } else {
                self.chunk_end.checked_add((self.shards - 1) * CHUNK)?
            };
            let end = start.checked_add(CHUNK)?;
            if end > self.base + self.len {
                return None; // the caller tries other shards, then maps the block on its own
            }
            self.next = start;
            self.chunk_end = end;
        }
        let addr = self.next;
        self.next += bytes;
        Some(addr)
    }

    /// Takes back a block [`Small::take`] of this shard handed out (`addr` lies in one of its
    /// chunks: [`shard_of`] says this shard and [`Small::contains`] holds).
    #[inline]
    pub fn give_back(&mut self, addr: usize, bytes: usize) {
        debug_assert!(self.contains(addr) && shard_of(addr, self.shards) == self.shard);
        self.free[bytes / MALLOC_GRANULARITY - 1].push(addr);
        self.live -= 1;
    }

    /// Blocks handed out and not given back.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Forgets every freed block and starts carving from the first chunk again; returns the
    /// end of the last chunk carved from (`None` if none), so that the caller, which resets
    /// every shard of the device at once (when nothing is live there), can return the touched
    /// pages to the kernel.
    pub fn reset(&mut self) -> Option<usize> {
        debug_assert_eq!(self.live, 0);
        self.free.iter_mut().for_each(Vec::clear);
        let touched = (self.chunk_end != 0).then_some(self.chunk_end);
        self.next = 0;
        self.chunk_end = 0;
        touched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
        a.0 < b.0 + b.1 && b.0 < a.0 + a.1
    }

    /// Shard `shard` of `shards` over a fresh device of `vram`.
    fn small(vram: usize, shard: usize, shards: usize) -> (Space, Small) {
        let mut space = Space::new(vram);
        let (base, len) = space.small_region().expect("a reservation");
        (space, Small::new(base, len, shard, shards))
    }

    #[test]
    fn small_blocks_are_distinct_and_reused_most_recent_first() {
        let (_space, mut arena) = small(64 * MIB, 0, 1);
        let a = arena.take(4096).unwrap();
        let b = arena.take(8192).unwrap();
        let c = arena.take(4096).unwrap();
        assert!(!overlaps((a, 4096), (b, 8192)) && !overlaps((b, 8192), (c, 4096)));
        assert!(!overlaps((a, 4096), (c, 4096)));
        arena.give_back(a, 4096);
        arena.give_back(c, 4096);
        assert_eq!(arena.take(4096), Some(c));
        assert_eq!(arena.take(4096), Some(a));
        // A freed 8 KiB block is not handed out for another size.
        arena.give_back(b, 8192);
        assert_ne!(arena.take(4096), Some(b));
        assert!(arena.contains(a) && !arena.contains(0x1000));
    }

    #[test]
    fn small_region_exhaustion_defers_to_the_caller() {
        let (_space, mut arena) = small(2 * MIB, 0, 1);
        let blocks: Vec<usize> = (0..512).map(|_| arena.take(4096).unwrap()).collect();
        assert_eq!(arena.take(4096), None);
        for &b in &blocks {
            arena.give_back(b, 4096);
        }
        // All 2 MiB sit in the 4 KiB class: an 8 KiB block cannot be carved any more.
        assert_eq!(arena.take(8192), None);
        assert!(arena.take(4096).is_some());
    }

    #[test]
    fn shards_carve_only_their_own_chunks_and_keep_the_rest_of_a_chunk() {
        const SHARDS: usize = 4;
        let mut space = Space::new(16 * MIB); // 8 chunks: two per shard
        let (base, len) = space.small_region().unwrap();
        let mut shards: Vec<Small> = (0..SHARDS)
            .map(|k| Small::new(base, len, k, SHARDS))
            .collect();
        let mut taken = Vec::new();
        for (k, shard) in shards.iter_mut().enumerate() {
            // 1 MiB + 4 KiB: one per chunk, so a shard serves two and then defers.
            for _ in 0..2 {
                let addr = shard.take(MIB + 4096).unwrap();
                assert_eq!(shard_of(addr, SHARDS), k);
                assert_eq!(addr % CHUNK, 0, "each block starts its own chunk");
                taken.push((addr, MIB + 4096));
            }
            assert_eq!(shard.take(MIB + 4096), None);
            // The rest of each chunk (1 MiB - 4 KiB) is still there for blocks of that size.
            let rest = shard.take(MIB - 4096).unwrap();
            assert_eq!(shard_of(rest, SHARDS), k);
            taken.push((rest, MIB - 4096));
        }
        for (i, &a) in taken.iter().enumerate() {
            assert!(a.0 >= base && a.0 + a.1 <= base + len);
            for &b in &taken[..i] {
                assert!(!overlaps(a, b), "{a:x?} overlaps {b:x?}");
            }
        }
    }

    #[test]
    fn big_blocks_are_aligned_best_fit_and_coalesce() {
        let mut arena = Space::new(8 * MIB); // big region: 16 MiB
        let a = arena.take_big(3 * MIB).unwrap(); // 4 MiB span
        let b = arena.take_big(2 * MIB).unwrap(); // 2 MiB span
        let c = arena.take_big(2 * MIB).unwrap(); // 2 MiB span
        let d = arena.take_big(6 * MIB + 4096).unwrap(); // 8 MiB span: the region is full
        assert_eq!(arena.take_big(2 * MIB), None);
        assert_eq!(arena.live_big(), 4);
        let spans = [(a, 4 * MIB), (b, 2 * MIB), (c, 2 * MIB), (d, 8 * MIB)];
        for (i, &x) in spans.iter().enumerate() {
            assert_eq!(x.0 % LARGE_ALLOCATION_ALIGNMENT, 0);
            for &y in &spans[..i] {
                assert!(!overlaps(x, y), "{x:?} overlaps {y:?}");
            }
        }
        // Holes of 4 MiB (lower address) and 2 MiB: a 2 MiB block takes the 2 MiB one.
        assert!(arena.give_back_big(a, 3 * MIB) && arena.give_back_big(c, 2 * MIB));
        assert_eq!(arena.take_big(2 * MIB), Some(c));
        // What a block leaves of a hole stays free: 4 MiB hole -> 2 MiB block + 2 MiB free.
        assert_eq!(arena.take_big(2 * MIB), Some(a));
        assert_eq!(arena.take_big(2 * MIB), Some(a + 2 * MIB));
        for (addr, bytes) in [(a, 2 * MIB), (a + 2 * MIB, 2 * MIB), (b, 2 * MIB)] {
            assert!(arena.give_back_big(addr, bytes));
        }
        assert!(arena.give_back_big(d, 6 * MIB + 4096) && arena.give_back_big(c, 2 * MIB));
        assert_eq!(arena.live_big(), 0);
        // Freed neighbours on both sides merged back into one 16 MiB range.
        assert_eq!(arena.take_big(16 * MIB), Some(a));
        assert!(
            !arena.give_back_big(0x1000, 2 * MIB),
            "an address outside the arena"
        );
    }

    #[test]
    fn freed_big_blocks_read_as_zeroes_again() {
        let mut arena = Space::new(4 * MIB);
        let a = arena.take_big(2 * MIB).unwrap();
        // SAFETY: `a` is the start of a 2 MiB read-write block of the arena's mapping.
        unsafe { (a as *mut u8).write(7) };
        assert!(arena.give_back_big(a, 2 * MIB));
        assert_eq!(arena.take_big(2 * MIB), Some(a));
        // SAFETY: as above; the block is mapped for the arena's whole lifetime.
        assert_eq!(unsafe { (a as *const u8).read() }, 0);
    }

    #[test]
    fn reset_starts_over_and_reports_the_touched_chunks() {
        let (_space, mut arena) = small(4 * MIB, 0, 1);
        assert_eq!(arena.reset(), None, "nothing carved yet");
        let a = arena.take(4096).unwrap();
        let b = arena.take(4096).unwrap();
        arena.give_back(b, 4096);
        arena.give_back(a, 4096);
        assert_eq!(arena.live(), 0);
        assert_eq!(arena.reset(), Some(a + CHUNK));
        assert_eq!(arena.take(4096), Some(a), "free lists were forgotten");
        assert_eq!(arena.take(4096), Some(b));
    }
}
