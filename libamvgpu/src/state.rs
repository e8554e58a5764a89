//! The hook's global state, built lazily on the first wrapped call.
//!
//! Initialisation runs once per process, on whichever thread first calls a wrapper; others
//! wait for it by spinning with `sched_yield` (it takes microseconds: one read of
//! `/proc/self/environ` and one `mmap` of the ledger). There is no `std::sync::Once` or
//! `Mutex`: those park threads on a futex, and a child forked while another thread held one
//! would wait forever. Here a child that inherits an unfinished initialisation (its initialising
//! thread did not survive the fork) notices that the recorded pid is not its own and takes over.
//!
//! After initialisation the mode is fixed: [`PASSTHROUGH`] when no limit is configured (the
//! wrappers then only forward) or [`ENFORCING`].

use crate::config::{self, Level, Limits};
use crate::log;
use crate::snapshot::{Snapshot, Source};
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU64, Ordering};

/// Everything an enforcing wrapper needs.
#[derive(Debug)]
pub struct State {
    pub limits: Limits,
}

const UNINIT: u64 = 0;
const RUNNING: u64 = 1;
const PASSTHROUGH: u64 = 2;
const ENFORCING: u64 = 3;

/// Low byte: one of the constants above; high bits: pid of the initialising process while
/// RUNNING.
static MODE: AtomicU64 = AtomicU64::new(UNINIT);

struct StateCell(UnsafeCell<MaybeUninit<State>>);
// SAFETY: the cell is written once, by the single thread that won the UNINIT -> RUNNING
// transition, before MODE is set to ENFORCING with Release; it is read only after an Acquire
// load of ENFORCING, and never written again.
unsafe impl Sync for StateCell {}

static STATE: StateCell = StateCell(UnsafeCell::new(MaybeUninit::uninit()));

/// The state to enforce with, or `None` when every call passes through.
#[inline]
pub fn enforcing() -> Option<&'static State> {
    // Acquire pairs with the Release store in `initialise`, making the state visible.
    match MODE.load(Ordering::Acquire) {
        PASSTHROUGH => None,
        // SAFETY: ENFORCING is stored only after STATE was fully written (see StateCell).
        ENFORCING => Some(unsafe { (*STATE.0.get()).assume_init_ref() }),
        _ => initialise(),
    }
}

fn own_pid() -> u64 {
    // SAFETY: getpid has no preconditions.
    u64::from(unsafe { libc::getpid() }.unsigned_abs())
}

#[cold]
fn initialise() -> Option<&'static State> {
    let running = RUNNING | (own_pid() << 8);
    loop {
        let mode = MODE.load(Ordering::Acquire);
        match mode & 0xff {
            PASSTHROUGH => return None,
            // SAFETY: as in `enforcing`.
            ENFORCING => return Some(unsafe { (*STATE.0.get()).assume_init_ref() }),
            UNINIT => {
                if MODE
                    .compare_exchange(UNINIT, running, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
            }
            _ if mode != running && (mode >> 8) != own_pid() => {
                // Inherited mid-initialisation from a parent whose initialising thread does not
                // exist here: take over.
                if MODE
                    .compare_exchange(mode, running, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
            }
            _ => {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }
    let (snapshot, source) = Snapshot::take();
    let built = build(&snapshot, source);
    match built {
        None => {
            MODE.store(PASSTHROUGH, Ordering::Release);
            None
        }
        Some(state) => {
            // SAFETY: we won the transition to RUNNING, so no other thread touches STATE until
            // we publish ENFORCING below.
            let slot = unsafe { &mut *STATE.0.get() };
            slot.write(state);
            MODE.store(ENFORCING, Ordering::Release);
            // SAFETY: just written.
            Some(unsafe { slot.assume_init_ref() })
        }
    }
}

/// Reads the configuration; `None` when there is nothing to enforce.
fn build(snapshot: &Snapshot, source: Source) -> Option<State> {
    match snapshot.get(config::LOG_LEVEL_VAR) {
        None => log::set_level(Level::DEFAULT),
        Some(value) => match config::parse_log_level(value) {
            Some(level) => log::set_level(level),
            None => {
                log::set_level(Level::DEFAULT);
                log::warn!(
                    "{}=\"{}\": {}",
                    log::Bytes(config::LOG_LEVEL_VAR),
                    log::Bytes(value),
                    config::ProblemReason::BadLogLevel
                );
            }
        },
    }
    if source != Source::ProcSelfEnviron {
        log::warn!("/proc/self/environ unreadable; configuration taken from {source:?}");
    }
    let limits = config::limits_from_vars(snapshot.vars(), &mut |problem| match problem.reason {
        config::ProblemReason::BadSize(_) => log::error!(
            "{}=\"{}\": {}; allocations on the devices it governs are refused",
            log::Bytes(problem.var),
            log::Bytes(problem.value),
            problem.reason
        ),
        _ => log::error!(
            "{}=\"{}\": {}",
            log::Bytes(problem.var),
            log::Bytes(problem.value),
            problem.reason
        ),
    });
    if !limits.any() {
        log::debug!("no HIP_DEVICE_MEMORY_LIMIT set: passing every call through");
        return None;
    }
    if log::enabled(Level::Info) {
        for (device, limit) in limits.per_device.iter().enumerate() {
            let shared_with_previous = device > 0 && limits.per_device[device - 1] == *limit;
            if !shared_with_previous && *limit != config::DeviceLimit::Unlimited {
                log::info!("device {device} and following: limit {limit:?}");
            }
        }
    }
    Some(State { limits })
}
