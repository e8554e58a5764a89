//! Fast device memory: one reserved stretch of address space per device, carved up in process.
//!
//! A `mmap`/`munmap` pair per allocation costs microseconds, which drowns the tens of
//! nanoseconds a hook adds to `hipMalloc`+`hipFree`. So each device reserves, at its first
//! allocation, one `MAP_NORESERVE` mapping (untouched pages still cost nothing) and serves
//! allocations from it:
//!
//! - **small** blocks (rounded size under [`LARGE_ALLOCATION_ALIGNMENT`], so only
//!   [`MALLOC_GRANULARITY`]-aligned) come from a bump pointer over the small region; a freed
//!   small block goes to the free list of its exact size and is handed out again (most recently
//!   freed first). Its bytes are neither zeroed nor returned to the kernel, like real `hipMalloc`,
//!   which does not zero either.
//! - **big** blocks occupy whole 2 MiB units of the big region (which makes them 2 MiB-aligned),
//!   found best-fit among coalesced free ranges. A freed big block is `MADV_DONTNEED`ed, so its
//!   resident pages go back to the kernel and it reads as zeroes when reused.
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

/// Caps on one device's regions, so that 64 devices of absurd VRAM still leave most of the
/// 128 TiB user address space to the program; beyond them blocks are mapped one by one.
const SMALL_REGION_CAP: usize = 256 << 30;
const BIG_REGION_CAP: usize = 512 << 30;

/// One device's arena.
#[derive(Debug)]
pub struct Arena {
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
    /// Small region `[small_base, small_base + small_len)`, carved from `small_next` upwards.
    small_base: usize,
    small_len: usize,
    small_next: usize,
    /// `small_free[bytes / 4 KiB - 1]`: freed small blocks of exactly `bytes`.
    small_free: Vec<Vec<usize>>,
    /// Big region: 2 MiB-aligned, a multiple of 2 MiB long.
    big_base: usize,
    big_len: usize,
    /// Free big ranges, coalesced: start -> length, and (length, start) for best fit.
    big_free_by_start: BTreeMap<usize, usize>,
    big_free_by_len: BTreeSet<(usize, usize)>,
    /// Blocks handed out and not yet given back (reset only frees an empty arena).
    live_blocks: usize,
}

/// Bytes of the big region a big block of `bytes` occupies (whole 2 MiB units).
fn big_span(bytes: usize) -> Option<usize> {
    hip_sys::sim::round_up(bytes, LARGE_ALLOCATION_ALIGNMENT)
}

impl Arena {
    /// An arena for a device of `vram` bytes; reserves nothing until the first block.
    pub fn new(vram: usize) -> Arena {
        Arena {
            vram,
            state: State::Unreserved,
        }
    }

    /// A block of `bytes` (rounded to 4 KiB, non-zero, already charged), aligned as
    /// [`memory::alignment_for`] says, or `None` when the arena cannot serve it (the caller
    /// maps it on its own).
    pub fn take(&mut self, bytes: usize) -> Option<usize> {
        debug_assert!(bytes > 0 && bytes % MALLOC_GRANULARITY == 0);
        if let State::Unreserved = self.state {
            self.state = match Regions::reserve(self.vram) {
                Some(regions) => State::Ready(regions),
                None => State::Unavailable,
            };
        }
        let State::Ready(regions) = &mut self.state else {
            return None;
        };
        let addr = if bytes < LARGE_ALLOCATION_ALIGNMENT {
            regions.take_small(bytes)
        } else {
            regions.take_big(bytes)
        }?;
        regions.live_blocks += 1;
        Some(addr)
    }

    /// Takes back a block [`Arena::take`] handed out; `false` if `addr` is not in this arena
    /// (the caller mapped it on its own and must unmap it).
    pub fn give_back(&mut self, addr: usize, bytes: usize) -> bool {
        let State::Ready(regions) = &mut self.state else {
            return false;
        };
        let given = if regions.in_small(addr) {
            regions.small_free[bytes / MALLOC_GRANULARITY - 1].push(addr);
            true
        } else if regions.in_big(addr) {
            regions.give_back_big(addr, bytes);
            true
        } else {
            false
        };
        if given {
            regions.live_blocks -= 1;
        }
        given
    }

    /// When no block is live (after `hipDeviceReset`), returns every touched page to the kernel
    /// and starts carving from the beginning again, so a reset leaves no resident memory.
    pub fn reset_if_empty(&mut self) {
        if let State::Ready(regions) = &mut self.state {
            if regions.live_blocks == 0 {
                let used = regions.small_next - regions.small_base;
                if used > 0 {
                    memory::discard(regions.small_base, used);
                }
                regions.small_next = regions.small_base;
                regions.small_free.iter_mut().for_each(Vec::clear);
            }
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
            small_next: base,
            small_free: vec![Vec::new(); SMALL_CLASSES],
            big_base,
            big_len,
            big_free_by_start: BTreeMap::new(),
            big_free_by_len: BTreeSet::new(),
            live_blocks: 0,
        };
        regions.insert_big_free(big_base, big_len);
        Some(regions)
    }

    fn in_small(&self, addr: usize) -> bool {
        addr >= self.small_base && addr < self.small_base + self.small_len
    }

    fn in_big(&self, addr: usize) -> bool {
        addr >= self.big_base && addr < self.big_base + self.big_len
    }

    fn take_small(&mut self, bytes: usize) -> Option<usize> {
        if let Some(addr) = self.small_free[bytes / MALLOC_GRANULARITY - 1].pop() {
            return Some(addr);
        }
        // Freed blocks of other sizes are not split or merged: when the bump pointer runs out
        // the caller maps the block on its own.
        let end = self.small_next.checked_add(bytes)?;
        if end > self.small_base + self.small_len {
            return None;
        }
        let addr = self.small_next;
        self.small_next = end;
        Some(addr)
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

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
        a.0 < b.0 + b.1 && b.0 < a.0 + a.1
    }

    #[test]
    fn small_blocks_are_distinct_and_reused_most_recent_first() {
        let mut arena = Arena::new(64 * MIB);
        let a = arena.take(4096).unwrap();
        let b = arena.take(8192).unwrap();
        let c = arena.take(4096).unwrap();
        assert!(!overlaps((a, 4096), (b, 8192)) && !overlaps((b, 8192), (c, 4096)));
        assert!(!overlaps((a, 4096), (c, 4096)));
        assert!(arena.give_back(a, 4096) && arena.give_back(c, 4096));
        assert_eq!(arena.take(4096), Some(c));
        assert_eq!(arena.take(4096), Some(a));
        // A freed 8 KiB block is not handed out for another size.
        assert!(arena.give_back(b, 8192));
        assert_ne!(arena.take(4096), Some(b));
        assert!(
            !arena.give_back(0x1000, 4096),
            "an address outside the arena"
        );
    }

    #[test]
    fn small_region_exhaustion_defers_to_the_caller() {
        let mut arena = Arena::new(2 * MIB);
        let blocks: Vec<usize> = (0..512).map(|_| arena.take(4096).unwrap()).collect();
        assert_eq!(arena.take(4096), None);
        for &b in &blocks {
            assert!(arena.give_back(b, 4096));
        }
        // All 2 MiB sit in the 4 KiB class: an 8 KiB block cannot be carved any more.
        assert_eq!(arena.take(8192), None);
        assert!(arena.take(4096).is_some());
    }

    #[test]
    fn big_blocks_are_aligned_best_fit_and_coalesce() {
        let mut arena = Arena::new(8 * MIB); // big region: 16 MiB
        let a = arena.take(3 * MIB).unwrap(); // 4 MiB span
        let b = arena.take(2 * MIB).unwrap(); // 2 MiB span
        let c = arena.take(2 * MIB).unwrap(); // 2 MiB span
        let d = arena.take(6 * MIB + 4096).unwrap(); // 8 MiB span: the region is full
        assert_eq!(arena.take(2 * MIB), None);
        let spans = [(a, 4 * MIB), (b, 2 * MIB), (c, 2 * MIB), (d, 8 * MIB)];
        for (i, &x) in spans.iter().enumerate() {
            assert_eq!(x.0 % LARGE_ALLOCATION_ALIGNMENT, 0);
            for &y in &spans[..i] {
                assert!(!overlaps(x, y), "{x:?} overlaps {y:?}");
            }
        }
        // Holes of 4 MiB (lower address) and 2 MiB: a 2 MiB block takes the 2 MiB one.
        assert!(arena.give_back(a, 3 * MIB) && arena.give_back(c, 2 * MIB));
        assert_eq!(arena.take(2 * MIB), Some(c));
        // What a block leaves of a hole stays free: 4 MiB hole -> 2 MiB block + 2 MiB free.
        assert_eq!(arena.take(2 * MIB), Some(a));
        assert_eq!(arena.take(2 * MIB), Some(a + 2 * MIB));
        for (addr, bytes) in [(a, 2 * MIB), (a + 2 * MIB, 2 * MIB), (b, 2 * MIB)] {
            assert!(arena.give_back(addr, bytes));
        }
        assert!(arena.give_back(d, 6 * MIB + 4096) && arena.give_back(c, 2 * MIB));
        // Freed neighbours on both sides merged back into one 16 MiB range.
        assert_eq!(arena.take(16 * MIB), Some(a));
    }

    #[test]
    fn freed_big_blocks_read_as_zeroes_again() {
        let mut arena = Arena::new(4 * MIB);
        let a = arena.take(2 * MIB).unwrap();
        // SAFETY: `a` is the start of a 2 MiB read-write block of the arena's mapping.
        unsafe { (a as *mut u8).write(7) };
        assert!(arena.give_back(a, 2 * MIB));
        assert_eq!(arena.take(2 * MIB), Some(a));
        // SAFETY: as above; the block is mapped for the arena's whole lifetime.
        assert_eq!(unsafe { (a as *const u8).read() }, 0);
    }

    #[test]
    fn reset_of_an_empty_arena_starts_over_with_zeroed_pages() {
        let mut arena = Arena::new(4 * MIB);
        let a = arena.take(4096).unwrap();
        let b = arena.take(4096).unwrap();
        // SAFETY: `b` is a 4 KiB read-write block of the arena's mapping.
        unsafe { (b as *mut u8).write(9) };
        assert!(arena.give_back(b, 4096));
        arena.reset_if_empty();
        assert_eq!(arena.take(4096), Some(b), "a live block prevents the reset");
        assert!(arena.give_back(a, 4096) && arena.give_back(b, 4096));
        arena.reset_if_empty();
        assert_eq!(arena.take(4096), Some(a));
        assert_eq!(arena.take(4096), Some(b));
        // SAFETY: as above.
        assert_eq!(unsafe { (b as *const u8).read() }, 0);
    }
}
