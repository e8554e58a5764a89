//! The accounting algorithm, written once against `&Header`, `&[Slot]` and the
//! `sync` facade so that the production build (slots in a shared mapping) and
//! the loom model (slots in boxes) run the same code. See the crate docs for
//! the argument; comments here name the ordering each access relies on.

use crate::layout::{state, Header, Slot, MAX_DEVICES};
use crate::sync::{spin_hint, store_load_order, AtomicU64, Ordering::*};

/// Reservation attempts before a contended request is refused. Each retry
/// happens only when the request fitted in the usage observed without it, so
/// the bound only matters while other reservers keep racing at the limit.
pub(crate) const RESERVE_ATTEMPTS: usize = 16;

/// Why a reservation was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    pub device: u32,
    pub requested: u64,
    /// Container usage on `device` observed without this request
    /// (`u64::MAX` if the sum itself overflowed).
    pub usage: u64,
    pub limit: u64,
}

impl core::fmt::Display for Refused {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.device as usize >= MAX_DEVICES {
            write!(
                f,
                "device {} is outside the accounted range 0..{MAX_DEVICES}; {} bytes refused",
                self.device, self.requested
            )
        } else {
            write!(
                f,
                "device {}: {} bytes refused, container uses {} of its {}-byte limit",
                self.device, self.requested, self.usage, self.limit
            )
        }
    }
}

impl std::error::Error for Refused {}

/// A free slot that is not clean: it holds usage or names a pid. Such garbage
/// would distort every sum once the slot counts (below the high-water mark).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirtySlot {
    pub slot: usize,
    pub what: &'static str,
}

/// Why the free slot whose state word is `word` is not clean, if it is not.
pub(crate) fn dirt(slot: &Slot, word: u64) -> Option<&'static str> {
    if state::pid(word) != 0 {
        Some("is free but names a pid")
    } else if slot.used.iter().any(|u| u.load(Relaxed) != 0) {
        Some("is free but holds usage")
    } else {
        None
    }
}

/// What the algorithm needs from the operating system; faked in loom tests.
pub(crate) trait Env {
    fn current_pid(&self) -> u32;
    /// This process's start time (0 if unknown).
    fn self_start_time(&self) -> u64;
    /// True only if `pid` certainly no longer names the process that started
    /// at `start_time` (0: start time unknown, judge by the pid alone).
    fn is_dead(&self, pid: u32, start_time: u64) -> bool;
    /// True only if no process `pid` exists at all: one cheap probe, which
    /// does not see a pid recycled by another process (`is_dead` does).
    fn is_gone(&self, pid: u32) -> bool;
    fn now_unix_secs(&self) -> u64;
}

/// Per-process (per `Ledger`) private state. Lives in a page that the kernel
/// zeroes in a fork child (`MADV_WIPEONFORK`), which is how the child notices
/// it is not the slot's owner without a `getpid` per call.
pub(crate) struct ProcState {
    /// `pid << 32 | (slot index + 1)`; 0 = no slot yet.
    pub mine: AtomicU64,
}

/// A borrowed view of one ledger region plus this process's state.
pub(crate) struct Core<'a, E: Env> {
    pub header: &'a Header,
    pub slots: &'a [Slot],
    pub me: &'a ProcState,
    pub env: E,
    /// The wipe-on-fork page is unavailable: compare the pid on each call.
    pub pid_check: bool,
    /// Process-local region: any slot owned by another pid is a fork parent's
    /// copy and therefore dead here.
    pub local_only: bool,
}

impl<E: Env> Core<'_, E> {
    /// This process's slot, if it has claimed one (never claims).
    #[inline]
    pub fn current_slot(&self) -> Option<usize> {
        // Acquire pairs with the Release publication in `claim`, so the slot's
        // initialisation by a sibling thread is visible before we use it.
        let word = self.me.mine.load(Acquire);
        if word == 0 {
            return None;
        }
        if self.pid_check && (word >> 32) as u32 != self.env.current_pid() {
            // A fork child holding its parent's slot index: forget it. A lost
            // race means a sibling already replaced it; either way re-read.
            let _ = self.me.mine.compare_exchange(word, 0, AcqRel, Relaxed);
            return None;
        }
        let index = ((word & 0xffff_ffff) as usize).wrapping_sub(1);
        (index < self.slots.len()).then_some(index)
    }

    #[inline]
    pub fn check_fork(&self) {
        let _ = self.current_slot();
    }

    #[inline]
    fn slot_or_claim(&self) -> Option<usize> {
        match self.current_slot() {
            Some(index) => Some(index),
            None => self.claim(),
        }
    }

    /// Sum of `used[device]` over every slot below the high-water mark.
    /// `None` if the sum overflows u64 (treated as over any limit).
    #[inline]
    pub fn sum(&self, device: usize) -> Option<u64> {
        // SeqCst (with the SeqCst add in `reserve`): of two reservers, the one
        // whose add comes later in the single total order sees the other's add.
        let high = (self.header.slot_high_water.load(SeqCst) as usize).min(self.slots.len());
        let mut total: u64 = 0;
        for slot in &self.slots[..high] {
            total = total.checked_add(slot.used[device].load(SeqCst))?;
        }
        Some(total)
    }

    /// In a process-local region, a fork child's copy still holds its parent's
    /// slot until the child claims its own (which clears it); do that before
    /// reporting, so the child never reports its parent's usage.
    pub fn settle(&self) {
        if self.local_only {
            let _ = self.slot_or_claim();
        }
    }

    /// Like `sum`, but without slots being reclaimed: their owner is known
    /// dead, so their bytes are not real any more. Used on the slow path so a
    /// reclaimer stalled mid-way cannot cause refusals. Safe because the state
    /// is read (SeqCst) before the counters: a slot skipped as RECLAIMING can
    /// only gain a new owner (SeqCst claim CAS after the SeqCst FREE store)
    /// later in the total order than this load, hence after our own add, and
    /// that owner's sum then sees our add.
    fn sum_live(&self, device: usize) -> Option<u64> {
        let high = (self.header.slot_high_water.load(SeqCst) as usize).min(self.slots.len());
        let mut total: u64 = 0;
        for slot in &self.slots[..high] {
            if state::status(slot.state.load(SeqCst)) == state::RECLAIMING {
                continue;
            }
            total = total.checked_add(slot.used[device].load(SeqCst))?;
        }
        Some(total)
    }

    pub fn container_usage(&self, device: u32) -> u64 {
        self.settle();
        let device = device as usize;
        if device >= MAX_DEVICES {
            return 0;
        }
        self.sum(device).unwrap_or(u64::MAX)
    }

    pub fn process_usage(&self, device: u32) -> u64 {
        let device = device as usize;
        match self.current_slot() {
            Some(index) if device < MAX_DEVICES => self.slots[index].used[device].load(SeqCst),
            _ => 0,
        }
    }

    pub fn publish_limit(&self, device: u32, limit: u64) {
        let device = device as usize;
        if device >= MAX_DEVICES {
            return;
        }
        if let Some(index) = self.slot_or_claim() {
            // Informational only: nothing is ordered against it.
            self.slots[index].limit[device].store(limit, Relaxed);
        }
    }

    #[inline]
    pub fn reserve(&self, device: u32, bytes: u64, limit: u64) -> Result<(), Refused> {
        let d = device as usize;
        let refused = |usage: u64| Refused {
            device,
            requested: bytes,
            usage,
            limit,
        };
        if d >= MAX_DEVICES {
            return Err(refused(0));
        }
        if bytes == 0 {
            // Occupies nothing, so it can never push usage over the limit.
            return Ok(());
        }
        let Some(index) = self.slot_or_claim() else {
            // No slot even after reclaiming the dead: accounting is impossible,
            // and admitting unaccounted memory would break the limit.
            return Err(refused(self.container_usage(device)));
        };
        let slot = &self.slots[index];
        if slot.limit[d].load(Relaxed) != limit {
            slot.limit[d].store(limit, Relaxed);
        }
        if bytes > limit {
            return Err(refused(self.container_usage(device)));
        }
        let used = &slot.used[d];
        // First attempt (the hot path), counting every slot: publish the
        // request (SeqCst RMW), then look. Checked so the slot never wraps to
        // a small value another reserver would trust.
        let Ok(before) = used.fetch_update(SeqCst, SeqCst, |u| u.checked_add(bytes)) else {
            return Err(refused(u64::MAX));
        };
        store_load_order();
        if let Some(total) = self.sum(d).filter(|&total| total <= limit) {
            self.note_peaks(slot, d, before + bytes, total);
            return Ok(());
        }
        // Kept out of line so the hot path stays small (fewer saved
        // registers); it withdraws this attempt's add before anything else.
        self.reserve_contended(slot, d, bytes, limit)
            .map_err(refused)
    }

    /// The rest of `reserve` after a first attempt that did not fit: its add
    /// is still published. `Err` carries the usage to report.
    #[cold]
    #[inline(never)]
    fn reserve_contended(&self, slot: &Slot, d: usize, bytes: u64, limit: u64) -> Result<(), u64> {
        let used = &slot.used[d];
        let mut reclaimed = false;
        let mut usage_without = 0;
        for attempt in 0..RESERVE_ATTEMPTS {
            if attempt > 0 {
                // Retries skip slots that are being reclaimed.
                let Ok(before) = used.fetch_update(SeqCst, SeqCst, |u| u.checked_add(bytes)) else {
                    return Err(u64::MAX);
                };
                store_load_order();
                if let Some(total) = self.sum_live(d).filter(|&total| total <= limit) {
                    self.note_peaks(slot, d, before + bytes, total);
                    return Ok(());
                }
            }
            // Over the limit (perhaps only because of others' in-flight
            // requests): withdraw. Saturating: a caller that over-released
            // concurrently must not make the slot wrap.
            let _ = used.fetch_update(SeqCst, SeqCst, |u| Some(u.saturating_sub(bytes)));
            store_load_order();
            let without = self.sum_live(d);
            usage_without = without.unwrap_or(u64::MAX);
            let fits = without
                .and_then(|u| u.checked_add(bytes))
                .is_some_and(|t| t <= limit);
            if fits {
                // Someone else's request (or a release) was in the way: retry.
                spin_hint();
                continue;
            }
            if !reclaimed {
                // Retry once after reclaiming even if another reserver beat us
                // to the dead slots: its reclaim may have made the room.
                reclaimed = true;
                self.reclaim_dead();
                continue;
            }
            return Err(usage_without);
        }
        Err(usage_without)
    }

    #[inline]
    fn note_peaks(&self, slot: &Slot, d: usize, own: u64, total: u64) {
        // Relaxed: peaks are statistics; fetch_max keeps them monotonic.
        if own > slot.peak[d].load(Relaxed) {
            slot.peak[d].fetch_max(own, Relaxed);
        }
        let peak = &self.header.container_peak[d];
        if total > peak.load(Relaxed) {
            peak.fetch_max(total, Relaxed);
        }
    }

    #[inline]
    pub fn release(&self, device: u32, bytes: u64) {
        let d = device as usize;
        if d >= MAX_DEVICES || bytes == 0 {
            return;
        }
        // A process that never reserved (or a fork child before its first
        // reservation) has nothing to give back.
        let Some(index) = self.current_slot() else {
            return;
        };
        // Release: a reserver that already sees the smaller value may admit
        // into the freed room; one that does not yet see it refuses, which is
        // the safe direction. Saturating so a double release cannot wrap.
        let _ = self.slots[index].used[d]
            .fetch_update(Release, Relaxed, |u| Some(u.saturating_sub(bytes)));
    }

    /// Claims a free slot for this process (reclaiming dead ones if none is
    /// free) and publishes it in `me`. A dirty slot at or above the high-water
    /// mark (see [`Core::claim_checked`]) is zeroed and used: the caller
    /// already trusts the file. Cold: once per process and fork.
    #[inline]
    pub fn claim(&self) -> Option<usize> {
        self.claim_inner(false).unwrap_or(None)
    }

    /// Like [`Core::claim`], but a free slot at or above the high-water mark
    /// that is not clean (it holds usage or names a pid) is an error: such a
    /// slot was never validated (opening validates only the slots below the
    /// mark). The slot is zeroed and left free before returning, so that a
    /// claimer racing past it cannot raise the mark over garbage.
    #[inline]
    pub fn claim_checked(&self) -> Result<Option<usize>, DirtySlot> {
        self.claim_inner(true)
    }

    #[cold]
    #[inline(never)]
    fn claim_inner(&self, strict: bool) -> Result<Option<usize>, DirtySlot> {
        if let Some(index) = self.current_slot() {
            return Ok(Some(index));
        }
        let pid = self.env.current_pid();
        // Whatever is left here is 0 or a fork parent's stale word (pid_check
        // mode); the publication CAS below replaces either.
        let observed = self.me.mine.load(Acquire);
        if observed != 0 && (observed >> 32) as u32 == pid {
            // A sibling thread published its claim since we looked.
            return Ok(self.current_slot());
        }
        if self.local_only {
            self.reclaim_dead();
        }
        'round: for _ in 0..RESERVE_ATTEMPTS {
            // Every slot below the mark was checked, either when this ledger
            // was opened or by the process that claimed it (which raises the
            // mark only after its check). Slots at or above it are checked here.
            let checked = self.header.slot_high_water.load(Acquire) as usize;
            for (index, slot) in self.slots.iter().enumerate() {
                if index == checked && !self.local_only && self.reclaim_one_gone(index) {
                    // No slot below the mark was free, but one whose owner is
                    // gone is free now: take it rather than raise the mark.
                    continue 'round;
                }
                let word = slot.state.load(Acquire);
                if state::status(word) != state::FREE {
                    continue;
                }
                let generation = state::generation(word) + 1;
                let claiming = state::pack(state::CLAIMING, generation, pid);
                // SeqCst (not just Acquire, which makes the previous owner's
                // zeroing visible): `sum_live` relies on claims being ordered
                // after its SeqCst read of RECLAIMING.
                if slot
                    .state
                    .compare_exchange(word, claiming, SeqCst, Relaxed)
                    .is_err()
                {
                    continue;
                }
                // Ours now: nobody else writes its counters, so this check
                // cannot race (and needs no re-read, unlike the check at open).
                if index >= checked {
                    if let Some(what) = dirt(slot, word) {
                        for used in &slot.used {
                            // SeqCst like every other write of `used`.
                            used.store(0, SeqCst);
                        }
                        if strict {
                            slot.state
                                .store(state::pack(state::FREE, generation, 0), SeqCst);
                            return Err(DirtySlot { slot: index, what });
                        }
                    }
                }
                slot.start_time.store(self.env.self_start_time(), Relaxed);
                slot.claimed_unix_secs
                    .store(self.env.now_unix_secs(), Relaxed);
                for d in 0..MAX_DEVICES {
                    slot.peak[d].store(0, Relaxed);
                    slot.limit[d].store(0, Relaxed);
                }
                // SeqCst, before any add to this slot's `used`: a reserver
                // whose sum follows our first add in the total order also
                // follows this raise, so it scans our slot. If a SeqCst load
                // already sees the mark above us, the raise that put it there
                // precedes that load, hence our first add, in the total order
                // (and the mark never shrinks): the write is skipped, which
                // spares the header page a write fault in most processes.
                let high = index as u32 + 1;
                if self.header.slot_high_water.load(SeqCst) < high {
                    self.header.slot_high_water.fetch_max(high, SeqCst);
                }
                // Release: `start_time` is visible to whoever sees LIVE, so a
                // reclaimer never compares against a half-written start time.
                slot.state
                    .store(state::pack(state::LIVE, generation, pid), Release);
                let mine = (u64::from(pid) << 32) | (index as u64 + 1);
                return Ok(
                    match self
                        .me
                        .mine
                        .compare_exchange(observed, mine, AcqRel, Acquire)
                    {
                        Ok(_) => Some(index),
                        Err(_) => {
                            // A sibling thread claimed concurrently: keep its slot,
                            // give ours back untouched (nothing was added to it).
                            self.free_slot(index, generation);
                            self.current_slot()
                        }
                    },
                );
            }
            if self.reclaim_dead() == 0 && !self.reclaim_in_progress() {
                break;
            }
            spin_hint();
        }
        Ok(None)
    }

    /// Zeroes a slot this process owns (or won the right to reclaim) and
    /// returns it to FREE.
    fn free_slot(&self, index: usize, generation: u64) {
        let slot = &self.slots[index];
        for d in 0..MAX_DEVICES {
            // SeqCst like every other write of `used` that reservers sum.
            slot.used[d].store(0, SeqCst);
            slot.peak[d].store(0, Relaxed);
            slot.limit[d].store(0, Relaxed);
        }
        slot.start_time.store(0, Relaxed);
        slot.claimed_unix_secs.store(0, Relaxed);
        // Release (as part of SeqCst): the zeroes above are visible to the next
        // claimer, whose CAS reads this FREE word; SeqCst for `sum_live`.
        slot.state
            .store(state::pack(state::FREE, generation, 0), SeqCst);
    }

    /// Frees this process's slot (the `Ledger` is going away).
    pub fn release_own_slot(&self) {
        if let Some(index) = self.current_slot() {
            let word = self.slots[index].state.load(Acquire);
            self.me.mine.store(0, Release);
            self.free_slot(index, state::generation(word));
        }
    }

    /// Whether some slot is being reclaimed by another process right now.
    fn reclaim_in_progress(&self) -> bool {
        let high = (self.header.slot_high_water.load(SeqCst) as usize).min(self.slots.len());
        self.slots[..high]
            .iter()
            .any(|slot| state::status(slot.state.load(Acquire)) == state::RECLAIMING)
    }

    /// Frees the first slot below `high` whose owner no longer exists at all
    /// (one `kill(pid, 0)` per occupied slot; live owners are not read from
    /// `/proc`). Called by `claim` before it would take a slot above the mark:
    /// the hook never frees its slot at exit, so without this every process
    /// start would raise the mark by one, and after 1024 starts every open
    /// would check, and every reservation sum, all 1024 slots. Returns
    /// whether a slot was freed.
    fn reclaim_one_gone(&self, high: usize) -> bool {
        let me = self.env.current_pid();
        let high = high.min(self.slots.len());
        for (index, slot) in self.slots[..high].iter().enumerate() {
            let word = slot.state.load(Acquire);
            let pid = state::pid(word);
            if state::status(word) == state::FREE || pid == me || !self.env.is_gone(pid) {
                continue;
            }
            if self.take_and_free(index, word, me) {
                return true;
            }
        }
        false
    }

    /// Frees slot `index`, judged dead while its state word was `word`: marks it RECLAIMING by
    /// `me` and frees it. The generation in `word` makes the CAS fail if the slot was freed and
    /// claimed again (even by a recycled pid) since it was judged; then nothing is done.
    fn take_and_free(&self, index: usize, word: u64, me: u32) -> bool {
        let generation = state::generation(word);
        let reclaiming = state::pack(state::RECLAIMING, generation, me);
        let taken = self.slots[index]
            .state
            .compare_exchange(word, reclaiming, SeqCst, Relaxed)
            .is_ok();
        if taken {
            self.free_slot(index, generation);
        }
        taken
    }

    /// Returns dead processes' slots to FREE; the number reclaimed.
    pub fn reclaim_dead(&self) -> usize {
        let me = self.env.current_pid();
        let high = (self.header.slot_high_water.load(SeqCst) as usize).min(self.slots.len());
        let mut reclaimed = 0;
        let mut my_start = None;
        for (index, slot) in self.slots[..high].iter().enumerate() {
            let word = slot.state.load(Acquire);
            let pid = state::pid(word);
            let dead = match state::status(word) {
                state::FREE => false,
                _ if self.local_only => pid != me,
                state::LIVE => {
                    // Acquire on the state word made the owner's start_time
                    // (stored before its Release of LIVE) visible.
                    let started = slot.start_time.load(Relaxed);
                    if pid == me {
                        // Our pid, but perhaps an earlier incarnation's (a
                        // restarted container's first process gets the same
                        // small pid): dead if it started at another time.
                        let mine = *my_start.get_or_insert_with(|| self.env.self_start_time());
                        started != 0 && mine != 0 && started != mine
                    } else {
                        self.env.is_dead(pid, started)
                    }
                }
                // A claimer's start time may be half-written: judge by pid.
                state::CLAIMING => pid != me && self.env.is_dead(pid, 0),
                // Another reclaimer is at work; take over only if it died.
                _ => pid != me && self.env.is_dead(pid, 0),
            };
            if !dead {
                continue;
            }
            if self.take_and_free(index, word, me) {
                reclaimed += 1;
            }
        }
        reclaimed
    }
}
