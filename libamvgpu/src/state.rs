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
use crate::symbols::{self, Sym};
use amvgpu_ledger::{Ledger, Tracker};
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

// The ledger and the configuration must agree on how many devices exist.
const _: () = assert!(amvgpu_ledger::MAX_DEVICES == config::MAX_DEVICES);

/// Everything an enforcing wrapper needs.
#[derive(Debug)]
pub struct State {
    pub limits: Limits,
    /// Container-wide accounting (shared file, or process-local fallback).
    pub ledger: Ledger,
    /// Live allocations: pointer, array or VMM handle -> bytes reserved, device, door.
    pub live: Tracker,
    /// Live stream-ordered allocations: pointer -> pool handle (in `bytes`).
    pub async_pool: Tracker,
    /// Blocks a pool caches after `hipFreeAsync` (still charged): pointer -> bytes, device.
    pub pool_cache: Tracker,
    /// Cached block -> its pool (in `bytes`) and free sequence number (in `device`), so a trim
    /// can return the most recently freed first, as the runtime does.
    pub cache_order: Tracker,
    /// Known memory pools: handle -> device (`door` 1 = created by the program, 2 = default).
    pub pools: Tracker,
    /// VMM handle -> live mapping count (in `bytes`) and whether it was released (`door` 1).
    pub vmm_refs: Tracker,
    /// VMM mapping start address -> handle (in `bytes`).
    pub vmm_maps: Tracker,
    /// Stream -> the device it runs on.
    pub streams: Tracker,
    /// Source of cache sequence numbers.
    pub cache_seq: AtomicU32,
    /// Set once any pool block was cached, so synchronisations skip the cache scan until then.
    pub pool_cache_used: AtomicBool,
    /// True when the runtime uses ROCm 6+ layouts (`hipMemAllocationProp`); judged by whether
    /// it exports `hipGetDevicePropertiesR0600`, which appeared with that ABI.
    pub rocm6_abi: bool,
}

impl State {
    /// The number of bytes `device` may hold, `None` when it is not limited.
    #[inline]
    pub fn allowance(&self, device: i32) -> Option<u64> {
        self.limits.get(device).allowance()
    }

    /// False while no pool block was ever cached (Relaxed: a stale false only skips a mirror
    /// update that the next trim, refusal or reset performs).
    #[inline]
    pub fn pool_cache_may_hold(&self) -> bool {
        self.pool_cache_used.load(Ordering::Relaxed)
    }
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
    // Logs a pod CU mask ROCr would ignore or that fails open (calls only real HIP functions).
    crate::cucheck::check_at_first_use();
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
        // One line per run of devices with the same limit.
        let mut first = 0;
        while first < limits.per_device.len() {
            let limit = limits.per_device[first];
            let mut last = first;
            while last + 1 < limits.per_device.len() && limits.per_device[last + 1] == limit {
                last += 1;
            }
            match limit {
                config::DeviceLimit::Unlimited => {}
                config::DeviceLimit::Bytes(bytes) => {
                    log::info!("devices {first}..={last}: limit {bytes} bytes")
                }
                config::DeviceLimit::Invalid => {
                    log::info!("devices {first}..={last}: invalid limit, allocations refused")
                }
            }
            first = last + 1;
        }
    }
    report_binding_problems();
    let ledger = open_ledger(snapshot);
    log::debug!(
        "ledger {}; {} relocation slot(s) rewritten so far",
        if ledger.is_shared() {
            "shared"
        } else {
            "process-local"
        },
        crate::got::PATCHED.load(Ordering::Relaxed)
    );
    for (device, limit) in limits.per_device.iter().enumerate() {
        if let Some(bytes) = limit.allowance() {
            ledger.publish_limit(device as u32, bytes);
        }
    }
    Some(State {
        limits,
        ledger,
        live: Tracker::new(),
        async_pool: Tracker::new(),
        pool_cache: Tracker::new(),
        cache_order: Tracker::new(),
        pools: Tracker::new(),
        vmm_refs: Tracker::new(),
        vmm_maps: Tracker::new(),
        streams: Tracker::new(),
        cache_seq: AtomicU32::new(0),
        pool_cache_used: AtomicBool::new(false),
        rocm6_abi: symbols::real(Sym::hipGetDevicePropertiesR0600).is_some(),
    })
}

/// Opens the shared ledger, falling back to a process-local one (which still enforces the
/// limit, only not across processes) with an error naming the path and the reason.
fn open_ledger(snapshot: &Snapshot) -> Ledger {
    let path = match snapshot.get(config::SHARED_CACHE_VAR) {
        Some(value) if !value.is_empty() => PathBuf::from(OsStr::from_bytes(value)),
        _ => match default_ledger_path() {
            Ok(path) => path,
            Err((dir, errno)) => {
                log::error!(
                    "cannot create {}: {}; accounting is process-local (other processes of \
                     the container are not counted)",
                    dir.display(),
                    std::io::Error::from_raw_os_error(errno)
                );
                return Ledger::process_local();
            }
        },
    };
    match Ledger::open_shared(&path) {
        Ok(ledger) => {
            log::debug!("ledger {}", path.display());
            ledger
        }
        Err(e) => {
            log::error!(
                "{e}; accounting is process-local (other processes of the container are not \
                 counted)"
            );
            Ledger::process_local()
        }
    }
}

/// `/tmp/amvgpu/<uid>/ledger`, creating the directories. `/tmp/amvgpu` is shared by every
/// user (mode 1777, like `/tmp`), the per-user directory is private (0700).
fn default_ledger_path() -> Result<PathBuf, (PathBuf, i32)> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let top = Path::new("/tmp/amvgpu");
    let mine = top.join(uid.to_string());
    make_dir(top, 0o1777)?;
    make_dir(&mine, 0o700)?;
    Ok(mine.join("ledger"))
}

fn make_dir(dir: &Path, mode: libc::mode_t) -> Result<(), (PathBuf, i32)> {
    let mut c_path = dir.as_os_str().as_bytes().to_vec();
    c_path.push(0);
    // SAFETY: `c_path` is NUL-terminated and has no interior NUL (built from a Path we made).
    let rc = unsafe { libc::mkdir(c_path.as_ptr().cast(), mode) };
    if rc == 0 {
        if mode & 0o1000 != 0 {
            // mkdir applies the umask; the shared top directory must really be 1777.
            // SAFETY: as above.
            unsafe { libc::chmod(c_path.as_ptr().cast(), mode) };
        }
        return Ok(());
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    if errno == libc::EEXIST {
        Ok(())
    } else {
        Err((dir.to_path_buf(), errno))
    }
}

/// Logs, once, what the loader callbacks could not do (they cannot log themselves).
fn report_binding_problems() {
    if let Some(failure) = crate::audit::runtime_redirect_failure() {
        log::error!(
            "cannot redirect libamdhip64's HIP functions to the hook: {}; falling back to \
             patching the program's relocation slots (calls, pointers, libraries opened later \
             are limited), but a function pointer the program gets from dlsym() is NOT \
             limited",
            failure
        );
    }
    if let Some(failure) = crate::audit::libc_redirect_failure() {
        log::error!(
            "cannot redirect libc's getenv to the hook: {}; the program and runtime read the \
             process environment directly",
            failure
        );
    }
    if let Some(failure) = crate::audit::hsa_redirect_failure() {
        log::error!(
            "cannot redirect libhsa-runtime64's hsa_queue_create to the hook: {}; \
             AMD_TASK_PRIORITY is not applied",
            failure
        );
    }
    log::debug!(
        "runtime's own references {}",
        if crate::audit::reentry_possible() {
            "may still reach the wrappers: per-thread re-entrancy guard on"
        } else {
            "all reach its real functions: no re-entrancy guard needed"
        }
    );
    if crate::audit::own_slots_unreadable() {
        log::warn!(
            "cannot read libamdhip64's relocations: its calls to its own HIP functions may be \
             counted twice"
        );
    }
}
