//! Loom models of the accounting algorithm and the tracker: every
//! interleaving (within the preemption bound) of the very code the hook runs.
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p amvgpu-ledger --release --lib loom`

use crate::core::{Core, Env, ProcState};
use crate::layout::{state, Header, Slot};
use crate::sync::{AtomicU64, Ordering::SeqCst};
use crate::tracker::{Entry, Tracker};
use loom::sync::Arc;
use loom::thread;

const DEAD_PID: u32 = 99;

/// `DEAD_PID` is dead; so is `RECYCLED_PID` when it started at time 1 (its
/// second incarnation starts at 2). Everyone else is alive.
#[derive(Clone, Copy)]
struct FakeEnv {
    pid: u32,
    start: u64,
}

const RECYCLED_PID: u32 = 77;

impl Env for FakeEnv {
    fn current_pid(&self) -> u32 {
        self.pid
    }
    fn self_start_time(&self) -> u64 {
        self.start
    }
    fn is_dead(&self, pid: u32, start_time: u64) -> bool {
        pid == DEAD_PID || (pid == RECYCLED_PID && start_time == 1)
    }
    fn is_gone(&self, pid: u32) -> bool {
        pid == DEAD_PID
    }
    fn now_unix_secs(&self) -> u64 {
        0
    }
}

/// One ledger region shared by simulated processes, plus each process's
/// private state and a "real device memory" counter to check the invariant.
struct World {
    header: Header,
    slots: Vec<Slot>,
    procs: Vec<ProcState>,
    real: AtomicU64,
}

impl World {
    fn new(slots: usize, procs: usize) -> Arc<World> {
        Arc::new(World {
            header: Header::new_for_model(),
            slots: (0..slots).map(|_| Slot::new_for_model()).collect(),
            procs: (0..procs)
                .map(|_| ProcState {
                    mine: AtomicU64::new(0),
                })
                .collect(),
            real: AtomicU64::new(0),
        })
    }

    /// Process number `proc` (private state `procs[proc]`) running as `pid`.
    fn core(&self, proc: usize, pid: u32) -> Core<'_, FakeEnv> {
        self.core_started(proc, pid, 1000 + u64::from(pid))
    }

    fn core_started(&self, proc: usize, pid: u32, start: u64) -> Core<'_, FakeEnv> {
        Core {
            header: &self.header,
            slots: &self.slots,
            me: &self.procs[proc],
            env: FakeEnv { pid, start },
            pid_check: false,
            local_only: false,
        }
    }

    /// Reserve and, if admitted, "allocate": the real usage must stay within
    /// the limit at every instant.
    fn allocate(&self, core: &Core<'_, FakeEnv>, bytes: u64, limit: u64) -> bool {
        if core.reserve(0, bytes, limit).is_err() {
            return false;
        }
        let now = self.real.fetch_add(bytes, SeqCst) + bytes;
        assert!(now <= limit, "real usage {now} above limit {limit}");
        true
    }

    fn free(&self, core: &Core<'_, FakeEnv>, bytes: u64) {
        self.real.fetch_sub(bytes, SeqCst);
        core.release(0, bytes);
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

#[test]
fn loom_two_processes_racing_for_the_last_room_never_overshoot() {
    model(|| {
        let world = World::new(2, 2);
        world.core(0, 1).claim().unwrap();
        world.core(1, 2).claim().unwrap();
        let w = world.clone();
        let other = thread::spawn(move || w.allocate(&w.core(1, 2), 60, 100));
        let mine = world.allocate(&world.core(0, 1), 60, 100);
        let theirs = other.join().unwrap();
        // 60 + 60 > 100: not both; each alone fits: not neither.
        assert!(mine ^ theirs, "mine={mine} theirs={theirs}");
        assert_eq!(world.core(0, 1).container_usage(0), 60);
    });
}

#[test]
fn loom_release_racing_reserve_never_overshoots() {
    model(|| {
        let world = World::new(2, 2);
        assert!(world.allocate(&world.core(0, 1), 80, 100));
        world.core(1, 2).claim().unwrap();
        let w = world.clone();
        let freer = thread::spawn(move || w.free(&w.core(0, 1), 80));
        let got = world.allocate(&world.core(1, 2), 50, 100);
        freer.join().unwrap();
        let expected = if got { 50 } else { 0 };
        assert_eq!(world.core(1, 2).container_usage(0), expected);
        assert_eq!(world.core(1, 2).process_usage(0), expected);
    });
}

#[test]
fn loom_dead_process_is_reclaimed_by_racing_reservers() {
    model(|| {
        let world = World::new(3, 3);
        world.core(0, 1).claim().unwrap();
        world.core(1, 2).claim().unwrap();
        // A process that died holding 90 of 100 (in slot 2: a claim would
        // have reused its slot had it been below theirs).
        assert!(world.core(2, DEAD_PID).reserve(0, 90, 100).is_ok());
        let w = world.clone();
        let other = thread::spawn(move || w.allocate(&w.core(1, 2), 50, 100));
        let mine = world.allocate(&world.core(0, 1), 50, 100);
        let theirs = other.join().unwrap();
        // 50 + 50 fits once the dead 90 is gone: both must get in, even
        // while the other is still reclaiming.
        assert!(mine && theirs, "mine={mine} theirs={theirs}");
        // Whoever reclaimed left the dead slot free and empty.
        let dead = &world.slots[2];
        assert_eq!(state::status(dead.state.load(SeqCst)), state::FREE);
        assert_eq!(dead.used[0].load(SeqCst), 0);
        let held = 50 * (u64::from(mine) + u64::from(theirs));
        assert_eq!(world.core(0, 1).container_usage(0), held);
    });
}

#[test]
fn loom_a_newcomer_reuses_a_gone_owners_slot_while_another_reserves() {
    model(|| {
        let world = World::new(3, 3);
        // Slot 0: a live process; slot 1: one that died holding 90.
        world.core(0, 1).claim().unwrap();
        assert!(world.core(1, DEAD_PID).reserve(0, 90, 100).is_ok());
        let w = world.clone();
        let other = thread::spawn(move || w.allocate(&w.core(0, 1), 50, 100));
        // The newcomer takes the dead slot instead of raising the mark (it
        // may only find the slot mid-reclaim by the other process, which is
        // alive, and then take a new one).
        let got = world.core(2, 2).claim();
        let mine = world.allocate(&world.core(2, 2), 40, 100);
        let theirs = other.join().unwrap();
        assert!(mine && theirs, "mine={mine} theirs={theirs}");
        let high = world.header.slot_high_water.load(SeqCst);
        assert!(
            (got, high) == (Some(1), 2) || (got, high) == (Some(2), 3),
            "{got:?} {high}"
        );
        // Whoever reclaimed it, the dead 90 is gone and nothing else is lost.
        assert_eq!(world.core(0, 1).container_usage(0), 90);
        if got == Some(2) {
            assert_eq!(world.slots[1].used[0].load(SeqCst), 0);
        }
    });
}

#[test]
fn loom_sibling_threads_claiming_at_once_share_one_slot() {
    model(|| {
        let world = World::new(3, 1);
        let w = world.clone();
        let sibling = thread::spawn(move || w.core(0, 1).reserve(0, 10, 100).is_ok());
        assert!(world.core(0, 1).reserve(0, 10, 100).is_ok());
        assert!(sibling.join().unwrap());
        assert_eq!(world.core(0, 1).process_usage(0), 20);
        let live = world
            .slots
            .iter()
            .filter(|s| state::status(s.state.load(SeqCst)) == state::LIVE)
            .count();
        assert_eq!(live, 1);
        assert_eq!(world.core(0, 1).container_usage(0), 20);
    });
}

fn entry(bytes: u64) -> Entry {
    Entry {
        bytes,
        device: 1,
        door: 2,
    }
}

#[test]
fn loom_tracker_concurrent_inserts_grow_a_level_and_lose_nothing() {
    model(|| {
        let tracker = Arc::new(Tracker::new());
        let t = tracker.clone();
        let other = thread::spawn(move || {
            t.insert(0x20_0000, entry(1)).unwrap();
            t.remove(0x20_0000)
        });
        tracker.insert(0x40_0000, entry(2)).unwrap();
        tracker.insert(0x60_0000, entry(3)).unwrap();
        assert_eq!(other.join().unwrap(), Some(entry(1)));
        assert_eq!(tracker.get(0x40_0000), Some(entry(2)));
        assert_eq!(tracker.get(0x60_0000), Some(entry(3)));
        assert_eq!(tracker.get(0x20_0000), None);
        assert_eq!(tracker.len(), 2);
    });
}

#[test]
fn loom_tracker_remove_racing_replace_conserves_bytes() {
    model(|| {
        let tracker = Arc::new(Tracker::new());
        tracker.insert(0x1000, entry(10)).unwrap();
        let t = tracker.clone();
        let remover = thread::spawn(move || t.remove(0x1000).map_or(0, |e| e.bytes));
        let replaced = tracker
            .insert_or_replace(0x1000, entry(20))
            .unwrap()
            .map_or(0, |e| e.bytes);
        let removed = remover.join().unwrap();
        let left = tracker.get(0x1000).map_or(0, |e| e.bytes);
        // Every byte recorded is either handed back exactly once or still held.
        assert_eq!(removed + replaced + left, 30);
    });
}

#[test]
fn loom_reclaim_never_wipes_a_recycled_pids_new_slot() {
    model(|| {
        // One slot: pid 77's next incarnation can only get it back through
        // reclaim, so a reclaimer that inspected it earlier races a re-claim
        // by the same pid (the ABA the generation number exists for).
        let world = World::new(1, 3);
        // The first incarnation of pid 77 died holding 90.
        assert!(world
            .core_started(0, RECYCLED_PID, 1)
            .reserve(0, 90, 100)
            .is_ok());
        let w = world.clone();
        // A slow reclaimer that may inspect the dead slot, then lose the CPU
        // while it is reclaimed and re-claimed by pid 77's next incarnation.
        let slow = thread::spawn(move || {
            w.core(1, 1).reclaim_dead();
        });
        let reborn = world.core_started(2, RECYCLED_PID, 2);
        // With the only slot mid-reclaim the newcomer may be turned away for
        // the moment, but once the reclaimer is done it must get in...
        let first = reborn.reserve(0, 50, 100).is_ok();
        slow.join().unwrap();
        if !first {
            assert!(
                reborn.reserve(0, 50, 100).is_ok(),
                "dead first incarnation not reclaimed"
            );
        }
        // ...and no reclaimer may ever have wiped its live usage.
        assert_eq!(reborn.process_usage(0), 50, "a reclaimer wiped a live slot");
        assert_eq!(reborn.container_usage(0), 50);
    });
}

#[test]
fn loom_tracker_insert_into_an_older_levels_tombstone_races_a_remove() {
    model(|| {
        let tracker = Arc::new(Tracker::new());
        // Level 0 has two buckets: the second insert opens level 1, and
        // removing the first leaves a tombstone in level 0 for reuse.
        tracker.insert(0x10_0000, entry(1)).unwrap();
        tracker.insert(0x20_0000, entry(2)).unwrap();
        assert_eq!(tracker.remove(0x10_0000), Some(entry(1)));
        let t = tracker.clone();
        let other = thread::spawn(move || (t.get(0x20_0000), t.remove(0x20_0000)));
        tracker.insert(0x30_0000, entry(3)).unwrap();
        tracker.insert(0x40_0000, entry(4)).unwrap();
        let (seen, removed) = other.join().unwrap();
        assert_eq!(seen, Some(entry(2)));
        assert_eq!(removed, Some(entry(2)));
        assert_eq!(tracker.get(0x30_0000), Some(entry(3)));
        assert_eq!(tracker.get(0x40_0000), Some(entry(4)));
        assert_eq!(tracker.len(), 2);
    });
}
