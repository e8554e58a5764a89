//! Device-memory accounting shared by every process of one container, without
//! a lock that a killed process could hold.
//!
//! The audit hook (`libamvgpu`) calls [`Ledger::reserve`] before each real
//! device allocation and [`Ledger::release`] after each free, and keeps a
//! [`Tracker`] from pointer to reserved bytes. `amvgpu status` reads the file
//! with [`open_readonly`]. This crate only takes a path: the hook uses
//! `HIP_DEVICE_MEMORY_SHARED_CACHE`, defaulting to `/tmp/amvgpu/<uid>/ledger`
//! (creating the directory is the hook's business; a missing one is an error
//! here). All processes sharing a file must be in one PID namespace, since
//! dead owners are found by pid: the file records its creator's namespace, and
//! a process from another namespace may take the file over only while no slot
//! is occupied (a restarted container whose old processes are gone), otherwise
//! `open_shared` refuses it ([`Reason::ForeignPidNamespace`]).
//!
//! API notes (names as agreed with the hook): [`Tracker::insert_or_replace`]
//! was added beside `insert` so the hook can release an entry the runtime
//! silently recycled; [`Ledger::reclaim_dead`] and [`Ledger::path`] are extra.
//! [`TrackerFull`] is a unit struct: the only failure is running out of memory
//! for a new table level.
//!
//! # File layout (layout version 1, native endianness, 856,064 bytes)
//!
//! ```text
//! header page, offset 0 (written once, before the file gets its name)
//!   0x000 magic "AMVGPULG"        0x008 layout_version u32  0x00c header_size u32 (4096)
//!   0x010 total_size u64          0x018 max_slots u32 (1024) 0x01c max_devices u32 (32)
//!   0x020 slot_size u32 (832)     0x024 creator pid u32     0x028 creator uid u32
//!   0x030 created unix secs u64   0x038 creator's PID-namespace inode u64
//!   0x040 creator software, 64 bytes NUL-padded ("amvgpu-ledger 0.1.0")
//! live header counters
//!   0x080 slot_high_water u32     (own cache line: read by every reserve)
//!   0x0c0 container_peak[32] u64  (written only on a new peak)
//! slot i at 0x1000 + i * 0x340, i < 1024
//!   +0x000 state u64 = status(2 bits: free/claiming/live/reclaiming) << 62
//!                      | generation(30 bits) << 32 | pid
//!   +0x008 start_time u64 (/proc/<pid>/stat field 22)   +0x010 claimed unix secs
//!   +0x040 used[32] u64    (own cache lines: the hot counters)
//!   +0x140 peak[32] u64    +0x240 limit[32] u64
//! ```
//!
//! # Algorithm
//!
//! The container's usage on device `d` is *defined* as the sum of `used[d]`
//! over all slots below `slot_high_water`. There is no separate container
//! total: a process killed between updating its own counter and a shared
//! total would leak, whereas everything a process ever adds lives in its own
//! slot and is reclaimed with it, exactly.
//!
//! `reserve(d, bytes, limit)`:
//! 1. find this process's slot (one load; claimed by `open_shared`, or on
//!    first use in a fork child or a process-local ledger);
//! 2. `used[d] += bytes` (a checked CAS loop: a slot never wraps);
//! 3. sum `used[d]` over all slots; if the sum is `<= limit`, admit;
//! 4. otherwise subtract `bytes` again and re-sum. If the request would fit
//!    in that sum, others' in-flight requests were in the way: retry (at most
//!    16 attempts). If not, reclaim dead processes' slots once and retry;
//!    if it still does not fit, refuse, reporting the usage without it.
//!    Retries skip slots another process is reclaiming at that moment (their
//!    owner is known dead), so a reclaimer stalled mid-way cannot cause a
//!    refusal; the first, hot attempt counts every slot.
//!
//! Why it never overshoots: steps 2 and 3 are SeqCst, so all the adds and
//! sums fall in one total order. Take any set of admitted reservations held at
//! once; the one whose add came last summed after every other add, saw them
//! all (none was withdrawn: they are held), and admitted only because the
//! total was within its limit. So committed usage never exceeds the limit,
//! not even for an instant, whatever the interleaving of threads and
//! processes. Of two requests that race for the last room at least one
//! succeeds: each withdrawal precedes its re-sum, so they cannot both still
//! see the other (checked by the loom tests). A refusal can be spurious only
//! while other requests keep racing at the limit for 16 rounds. Retries that
//! skip a RECLAIMING slot keep the argument: that slot can only gain a new
//! owner after the skip in the total order, so the new owner's add comes
//! after ours and its own sum sees us.
//!
//! The pointer map ([`Tracker`]) is described on its type: open addressing
//! over levels that are added, never rehashed; a per-bucket generation makes
//! every read and remove ABA-safe; 24 bytes per bucket.
//!
//! The price: a reader of the raw sum ([`Ledger::container_usage`], the
//! snapshot) may, for an instant, include a request that is about to be
//! withdrawn, so it can read above the limit although no memory is held above
//! it. The container peak records sums that were admitted, so it is within
//! the limit but may include others' in-flight bytes.
//!
//! Overflow: `bytes > limit` is refused at once; a sum that overflows u64 is
//! treated as over any limit; `hipMalloc(SIZE_MAX)` can never be admitted.
//!
//! The same `Refused` is returned when no slot can be claimed even after
//! reclaiming (1024 live `Ledger`s on one file): admitting memory that cannot
//! be accounted would break the limit.
//!
//! # Atomic orderings
//!
//! * `used` add/withdraw, the sums' loads and the high-water mark: SeqCst,
//!   the store-then-load pattern of the proof above needs a single total
//!   order (on x86-64 the RMWs are `lock` instructions and SeqCst loads are
//!   plain loads, so this costs nothing extra).
//! * `release`: Release RMW. A reserver that does not yet see a release only
//!   refuses; it can never over-admit.
//! * Slot claim: CAS FREE->CLAIMING (SeqCst: acquires the previous owner's
//!   zeroing, and is ordered after any retry's SeqCst read of RECLAIMING, so
//!   a skipped slot cannot hide a newer owner), write start time, raise
//!   `slot_high_water` (SeqCst, before any
//!   add to the slot, so any reserver that could miss the slot's first add
//!   is ordered before it), then store LIVE (Release: a reclaimer that sees
//!   LIVE sees the start time).
//! * Reclaim: CAS LIVE(pid, gen)->RECLAIMING(me, gen), zero `used`, store
//!   FREE, all SeqCst (off the hot path; FREE needs Release at least). The
//!   generation makes the CAS fail if the slot changed hands since it was
//!   inspected, even to a recycled pid.
//! * Peaks and limits: Relaxed; statistics ordered against nothing.
//! * The per-process slot word: Acquire load / AcqRel publication, so a
//!   thread sees the slot its sibling initialised.
//! * Model checking: loom treats SeqCst loads and RMWs as Acquire/Release only
//!   and would report the store-buffering outcome that SeqCst forbids, so the
//!   loom build inserts a SeqCst fence (which loom models exactly) between
//!   the add and the sum; the real build compiles it to nothing (see
//!   `sync::store_load_order`). Run the models with
//!   `RUSTFLAGS="--cfg loom" cargo test -p amvgpu-ledger --release --lib loom`.
//!
//! # Crash semantics
//!
//! No lock exists. A process killed at any point leaves at most its own
//! slot's counters, which are exact (including a request it had not yet
//! withdrawn) until reclaimed. A slot is dead when `kill(pid, 0)` says ESRCH,
//! `/proc/<pid>` is gone or a zombie, or its start time differs (recycled
//! pid; this includes a slot carrying *our own* pid but another start time,
//! left by an earlier process that the same pid was recycled from). Reclaim
//! happens before any refusal, when no slot is free, and on
//! [`Ledger::reclaim_dead`]; and a claim that finds no free slot below
//! `slot_high_water` first frees one slot below it whose owner is gone
//! (`kill(pid, 0)` says ESRCH; one probe per occupied slot, no `/proc`
//! read) and takes it. The hook never frees its slot at exit, so without
//! that every process start would raise the mark by one, and after 1024
//! starts every open would check, and every reservation sum, all 1024 slots;
//! with it the mark stays at the most processes ever alive at once. A reclaimer killed mid-way leaves RECLAIMING with its own pid, which the
//! next reclaimer detects and finishes (zeroing is idempotent). Races: two
//! reclaimers of one slot: the CAS picks one. A slot freed and re-claimed
//! while a reclaimer looked: generation mismatch, CAS fails. A dead claimer
//! in CLAIMING is judged by pid alone (its start time may be half-written);
//! if its pid was recycled within that window the slot is lost until the
//! recycled process dies, and a slot is all that is lost (it holds nothing).
//!
//! # Fork semantics
//!
//! Each `Ledger` keeps "my slot" in a private page marked `MADV_WIPEONFORK`,
//! which the kernel hands a fork child zeroed: the child therefore has no
//! slot, claims a fresh one on its first reservation (zero usage), and never
//! writes its parent's slot; its exit leaves only its own slot to reclaim.
//! On kernels without wipe-on-fork the page holds the owner pid, compared
//! with `getpid()` on each call. A process-local ledger is private memory
//! copied into the child; there the child treats every slot not owned by its
//! own pid as dead (and clears them before it first reports or reserves), so
//! it also starts at zero.
//!
//! # File creation and validation
//!
//! A missing file is created by writing the complete header into a private
//! temporary file beside it (mode 0600, `O_EXCL`) and `link(2)`ing it into
//! place: the name only ever refers to a complete file, exactly one of
//! several racing creators wins, and the losers open the winner's file.
//! Nothing waits on anything; the new file's slot pages are holes (only the
//! header page is written). Opening checks the file type, magic, version,
//! every layout field, the exact size, the PID namespace and that no free
//! slot below `slot_high_water` holds usage or names a pid; each failure is a
//! [`LedgerError`] naming the path. Slots at or above the mark were never
//! claimed and are part of no sum, so they are not read at open (that would
//! fault in all 208 slot pages at every process start): each is checked by
//! the process that claims it, before it raises the mark. `open_shared`
//! claims this process's slot at once, so a dirty slot there is the same
//! [`Reason::Corrupt`] error; the slot is zeroed before the error is returned,
//! so a claimer racing past it cannot raise the mark over garbage. (A later
//! claim, a fork child's, zeroes such a slot and uses it.)
//!
//! # Cost
//!
//! Measured on the 2-core development VM (shared with other builds, so
//! absolute numbers move by 2x between runs; compare with the floor):
//!
//! ```text
//! cargo run --release -p amvgpu-ledger --example hot_path_ratio   (best of 7)
//!   floor: 4 atomic RMWs           11.0 ns
//!   reserve+release                18.0 ns  (1.6x floor)
//!   insert+remove                  18.3 ns  (1.7x floor)
//!   hook pair (all four)           30.1 ns  (2.7x floor)   target <= 60 ns
//! cargo bench -p amvgpu-ledger --bench hot_path   (criterion, medians, busier)
//!   1 thread:  floor 22.0, reserve+release 25.1, insert+remove 44.9, pair 58.1 ns
//!   2 threads: reserve+release same slot 54.9, two slots 70.8,
//!              insert+remove 103.7, pair same process 140.9 ns
//! ```
//!
//! Panics: none on any input path. Allocation: none in `reserve`, `release`,
//! `Tracker::insert`/`remove`/`get` (except the first use: slot claim reads
//! `/proc/self/stat` on the stack; a tracker level is `mmap`ed).

#![cfg_attr(loom, allow(dead_code))]

mod core;
mod layout;
#[cfg(not(loom))]
mod ledger;
#[cfg(not(loom))]
mod os;
mod sync;
mod tracker;

#[cfg(all(test, loom))]
mod loom_tests;

pub use crate::core::Refused;
pub use crate::layout::{SlotStatus, MAX_DEVICES};
#[cfg(not(loom))]
pub use crate::ledger::{
    open_readonly, Creator, Ledger, LedgerError, Reason, SlotSnapshot, Snapshot,
};
pub use crate::tracker::{Entry, Tracker, TrackerFull};

// Both are used from wrapper functions on any thread.
#[cfg(not(loom))]
const _: fn() = || {
    fn shared_between_threads<T: Send + Sync>() {}
    shared_between_threads::<Ledger>();
    shared_between_threads::<Tracker>();
};
