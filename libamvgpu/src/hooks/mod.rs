//! The wrappers, one file per door family, and what they share.
//!
//! Every wrapper has the exact C signature of the function it replaces and starts the same
//! way: fetch the real function, then ask [`hook`] whether there is anything to do. In a
//! process without any limit `hook` is one atomic load and a predictable branch, and the call
//! goes straight to the runtime. A wrapper re-entered on the same thread (the runtime calling
//! back into a wrapped function while we are inside one) also goes straight to the runtime
//! (query wrappers, which change nothing, read the state directly instead).

pub mod alloc;
pub mod env;
pub mod free;
pub mod hsa;
pub mod lookup;
pub mod query;
pub mod stream;

use crate::log;
use crate::state::{self, State};
use crate::symbols::{self, Sym};
use core::cell::Cell;
use core::ffi::c_int;
use hip_sys::hipError_t;

thread_local! {
    /// True while this thread runs hook logic. Const-initialised and without destructor, so it
    /// is a plain TLS slot: no allocation, no registration, nothing to tear down on exit.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Proof that this thread is inside hook logic; clears the flag when dropped.
pub(crate) struct Active {
    pub state: &'static State,
    /// This thread's `IN_HOOK` slot, kept so that leaving costs no second TLS lookup (in a
    /// `dlopen`ed module each lookup is a `__tls_get_addr` call); null when the guard is off
    /// (see [`hook`]). The raw pointer also makes `Active` `!Send`: it never leaves its thread.
    flag: *const Cell<bool>,
}

impl Drop for Active {
    fn drop(&mut self) {
        if !self.flag.is_null() {
            // SAFETY: `flag` is this thread's TLS slot (see `hook`); `Active` cannot leave the
            // thread and lives shorter than it, so the slot is alive.
            unsafe { (*self.flag).set(false) };
        }
    }
}

/// The state to enforce with, or `None` when the call should go straight to the runtime: no
/// limit is configured, or this thread is already inside the hook.
///
/// The re-entrancy guard (a thread-local flag) exists for the runtime calling its own wrapped
/// exports while a wrapper is running, which would count one allocation twice. Once the
/// runtime's references to its own exports point at the real functions
/// ([`crate::audit::settle_runtime`]) that cannot happen, and the guard is skipped: two
/// `__tls_get_addr` calls fewer per allocation and free, and a program callback that allocates
/// from inside a wrapped call (on the same thread) is counted like any other allocation.
#[inline]
pub(crate) fn hook() -> Option<Active> {
    let state = state::enforcing()?;
    if !crate::audit::reentry_possible() {
        return Some(Active {
            state,
            flag: core::ptr::null(),
        });
    }
    IN_HOOK.with(|flag| {
        if flag.get() {
            None
        } else {
            flag.set(true);
            Some(Active {
                state,
                flag: flag as *const Cell<bool>,
            })
        }
    })
}

/// Fetches the real function of a symbol as its typed pointer, or returns
/// `hipErrorNotInitialized` from the enclosing wrapper if the runtime does not export it
/// (which cannot happen for a wrapper reached through a binding to that very export).
macro_rules! real {
    ($sym:ident : $ty:ty) => {
        match $crate::symbols::real($crate::symbols::Sym::$sym) {
            // SAFETY: the address is the runtime's export of this name, whose C signature is
            // `$ty` (hip-sys documents each type from the HIP headers).
            Some(addr) => unsafe { core::mem::transmute::<usize, $ty>(addr) },
            None => return $crate::hooks::missing($crate::symbols::Sym::$sym),
        }
    };
}
pub(crate) use real;

/// What a wrapper returns when the runtime lacks the real function.
#[cold]
pub(crate) fn missing(sym: Sym) -> hipError_t {
    log::error!(
        "{} is not exported by libamdhip64; returning hipErrorNotInitialized",
        log::Bytes(symbols::NAMES[sym as usize])
    );
    hip_sys::hipErrorNotInitialized
}

/// What is known about the number of devices the runtime shows this process.
mod devices {
    pub const UNKNOWN: u8 = 0;
    /// Exactly one: every thread's current device is necessarily device 0.
    pub const ONE: u8 = 1;
    /// Several, none, or the runtime could not say: ask it for the current device each time.
    pub const ASK: u8 = 2;
}

/// A process's device count is fixed when the runtime initialises (`HIP_VISIBLE_DEVICES` and
/// friends are read once), so it is learnt once. Relaxed: the value is the same whichever
/// thread computes it, and nothing else is published with it.
static DEVICES: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(devices::UNKNOWN);

/// The calling thread's current device, as the runtime sees it.
///
/// With a single visible device (the usual container slice) the answer can only be 0, and the
/// runtime is not asked: that saves a call into it on every allocation (about 13 ns of the
/// hipMalloc+hipFree pair over the simulator, more over ROCm, whose entry points also trace).
/// With several devices the runtime is asked every time, so a `hipSetDevice` on any thread is
/// always honoured: there is no shadow copy of the current device.
#[inline]
pub(crate) fn current_device() -> Result<c_int, hipError_t> {
    match DEVICES.load(core::sync::atomic::Ordering::Relaxed) {
        devices::ONE => Ok(0),
        devices::ASK => ask_current_device(),
        _ => learn_devices(),
    }
}

/// The first `current_device` of the process: learns the device count, then answers.
#[cold]
#[inline(never)]
fn learn_devices() -> Result<c_int, hipError_t> {
    let one = device_count() == Some(1);
    let known = if one { devices::ONE } else { devices::ASK };
    DEVICES.store(known, core::sync::atomic::Ordering::Relaxed);
    if one {
        Ok(0)
    } else {
        ask_current_device()
    }
}

/// The runtime's device count, `None` when it reports an error (for example no device).
fn device_count() -> Option<c_int> {
    let addr = symbols::lookup_in_runtime(b"hipGetDeviceCount")?;
    // SAFETY: the runtime's hipGetDeviceCount has the hipGetDeviceCount_fn signature.
    let get: hip_sys::hipGetDeviceCount_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
    let mut count: c_int = 0;
    // SAFETY: `count` is a valid out-pointer for the duration of the call.
    (unsafe { get(&mut count) } == hip_sys::hipSuccess).then_some(count)
}

/// Asks the runtime for the calling thread's current device.
#[inline]
fn ask_current_device() -> Result<c_int, hipError_t> {
    let Some(addr) = symbols::real(Sym::hipGetDevice) else {
        return Err(missing(Sym::hipGetDevice));
    };
    // SAFETY: the runtime's hipGetDevice has the hipGetDevice_fn signature.
    let get: hip_sys::hipGetDevice_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
    let mut device: c_int = -1;
    // SAFETY: `device` is a valid out-pointer for the duration of the call.
    match unsafe { get(&mut device) } {
        hip_sys::hipSuccess => Ok(device),
        err => Err(err),
    }
}

/// Reads `*ptr` if `ptr` is not NULL.
///
/// # Safety
/// `ptr` must be NULL or valid for reading a `T`.
pub(crate) unsafe fn read_in<T: Copy>(ptr: *const T) -> Option<T> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: non-NULL and valid per the caller's guarantee.
        Some(unsafe { ptr.read() })
    }
}

/// Which door made an allocation (stored in the tracker entry).
pub(crate) mod door {
    pub const LINEAR: u8 = 1;
    pub const MANAGED: u8 = 2;
    pub const PITCHED: u8 = 3;
    pub const ARRAY: u8 = 4;
    pub const MIPMAPPED: u8 = 5;
    pub const POOL: u8 = 6;
    pub const VMM: u8 = 7;
}

/// The device of a charge when the runtime cannot say which device is meant (no device, bad
/// stream): `allocate` then lets the runtime answer and refuses anything it would allocate.
pub(crate) const NO_DEVICE: c_int = -1;

/// What an allocation door is about to take.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Charge {
    /// The device the memory lands on.
    pub device: c_int,
    /// Bytes to reserve before the call: the runtime's rounded size, or an upper estimate
    /// that is corrected once the real size is known.
    pub bytes: u64,
    pub door: u8,
    /// The door's name, for the log.
    pub name: &'static str,
}

/// Reserves `bytes` on `device` under `limit`, logging a refusal.
#[inline]
pub(crate) fn reserve(state: &State, charge: &Charge, bytes: u64, limit: u64) -> bool {
    match state.ledger.reserve(charge.device as u32, bytes, limit) {
        Ok(()) => true,
        Err(refused) => {
            log_refusal(state, charge, &refused);
            false
        }
    }
}

/// Logs that `charge` is answered with `hipErrorOutOfMemory`.
#[cold]
#[inline(never)]
pub(crate) fn log_refusal(state: &State, charge: &Charge, refused: &amvgpu_ledger::Refused) {
    let why = if state.limits.get(charge.device) == crate::config::DeviceLimit::Invalid {
        " (the limit variable for this device is invalid, see the error logged at start)"
    } else {
        ""
    };
    log::warn!(
        "{} refused with hipErrorOutOfMemory: {}{}",
        charge.name,
        refused,
        why
    );
}

/// Runs one allocation door under the limit.
///
/// Reserve before the real call (so concurrent allocations can never overshoot), release if
/// it fails, then correct the reservation to the size the runtime really took and track the
/// result so the matching free releases exactly that. `call` performs the real allocation;
/// `result` reads back the key (pointer, array or handle) and the real size after success
/// (`None`: nothing was allocated, e.g. a zero-sized pitched allocation); `undo` frees a
/// successful allocation the hook must refuse after all.
#[inline]
pub(crate) fn allocate(
    state: &State,
    charge: Charge,
    call: impl FnOnce() -> hipError_t,
    result: impl FnOnce() -> Option<(usize, u64)>,
    undo: impl FnOnce(usize),
) -> hipError_t {
    let Some(limit) = state.allowance(charge.device) else {
        return call();
    };
    if !(0..crate::config::MAX_DEVICES as c_int).contains(&charge.device) {
        // Let the runtime judge the device id: its error is the right answer. If it accepts
        // a device we cannot account for, the allocation must not escape the limit.
        let rc = call();
        if rc == hip_sys::hipSuccess {
            if let Some((key, _)) = result() {
                undo(key);
            }
            log::error!(
                "{}: device {} is outside the accounted range; refused",
                charge.name,
                charge.device
            );
            return hip_sys::hipErrorOutOfMemory;
        }
        return rc;
    }
    if charge.bytes == 0 {
        // Nothing to charge (zero-sized requests): the runtime answers as it does unhooked.
        return call();
    }
    if !reserve(state, &charge, charge.bytes, limit) {
        return hip_sys::hipErrorOutOfMemory;
    }
    let device = charge.device as u32;
    let rc = call();
    if rc != hip_sys::hipSuccess {
        state.ledger.release(device, charge.bytes);
        return rc;
    }
    let Some((key, real_bytes)) = result() else {
        state.ledger.release(device, charge.bytes);
        return rc;
    };
    if real_bytes > charge.bytes {
        if !reserve(state, &charge, real_bytes - charge.bytes, limit) {
            undo(key);
            state.ledger.release(device, charge.bytes);
            return hip_sys::hipErrorOutOfMemory;
        }
    } else if real_bytes < charge.bytes {
        state.ledger.release(device, charge.bytes - real_bytes);
    }
    if real_bytes == 0 {
        return rc;
    }
    track(state, &charge, key, real_bytes, undo)
}

/// Records a successful allocation of `bytes` (already reserved) under `key`.
#[inline]
pub(crate) fn track(
    state: &State,
    charge: &Charge,
    key: usize,
    bytes: u64,
    undo: impl FnOnce(usize),
) -> hipError_t {
    let device = charge.device as u32;
    let entry = amvgpu_ledger::Entry {
        bytes,
        device,
        door: charge.door,
    };
    match state.live.insert_or_replace(key, entry) {
        Ok(None) => hip_sys::hipSuccess,
        Ok(Some(stale)) => {
            // The runtime handed out the same key again, so its free went unseen (e.g. made
            // while the hook was re-entered): the old bytes are no longer held.
            state.ledger.release(stale.device, stale.bytes);
            hip_sys::hipSuccess
        }
        Err(full) => untrack_full(state, charge, key, bytes, full, undo),
    }
}

/// `track`'s failure path, out of line so the hot path stays small: the tracker could not
/// grow, so the allocation is undone and its reservation released.
#[cold]
#[inline(never)]
fn untrack_full(
    state: &State,
    charge: &Charge,
    key: usize,
    bytes: u64,
    full: amvgpu_ledger::TrackerFull,
    undo: impl FnOnce(usize),
) -> hipError_t {
    log::error!("{}: {full}; allocation undone", charge.name);
    undo(key);
    state.ledger.release(charge.device as u32, bytes);
    hip_sys::hipErrorOutOfMemory
}

/// Runs a free door for a tracked key: the entry is taken first (so a concurrent reuse of the
/// address by the runtime cannot be confused with it), the real free runs, and the bytes are
/// released only if it succeeded. Unknown keys pass through untouched.
#[inline]
pub(crate) fn free_tracked(
    state: &State,
    key: usize,
    call: impl FnOnce() -> hipError_t,
) -> (hipError_t, Option<amvgpu_ledger::Entry>) {
    let Some(entry) = state.live.remove(key) else {
        return (call(), None);
    };
    let rc = call();
    if rc == hip_sys::hipSuccess {
        (rc, Some(entry))
    } else {
        retrack(state, key, entry);
        (rc, None)
    }
}

/// A free the runtime refused leaves the memory allocated: track it again. Out of line so
/// every free's frame stays small.
#[cold]
#[inline(never)]
fn retrack(state: &State, key: usize, entry: amvgpu_ledger::Entry) {
    let _ = state.live.insert(key, entry);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::{DeviceLimit, Limits, MAX_DEVICES};
    use amvgpu_ledger::{Ledger, Tracker};
    use core::cell::Cell as StdCell;
    use core::sync::atomic::{AtomicBool, AtomicU32};
    use hip_sys::{hipErrorInvalidValue, hipErrorOutOfMemory, hipSuccess};

    /// A state with `limit` bytes on device 0, nothing on the others, and process-local
    /// accounting.
    pub(crate) fn state_with_limit(limit: u64) -> State {
        let mut per_device = [DeviceLimit::Unlimited; MAX_DEVICES];
        per_device[0] = DeviceLimit::Bytes(limit);
        State {
            limits: Limits { per_device },
            ledger: Ledger::process_local(),
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
            rocm6_abi: true,
        }
    }

    fn charge(device: c_int, bytes: u64) -> Charge {
        Charge {
            device,
            bytes,
            door: door::LINEAR,
            name: "test",
        }
    }

    #[test]
    fn over_the_limit_is_refused_before_the_runtime_is_called() {
        let state = state_with_limit(1 << 20);
        let called = StdCell::new(false);
        let rc = allocate(
            &state,
            charge(0, 2 << 20),
            || {
                called.set(true);
                hipSuccess
            },
            || Some((0x1000, 2 << 20)),
            |_| panic!("nothing to undo"),
        );
        assert_eq!(rc, hipErrorOutOfMemory);
        assert!(!called.get());
        assert_eq!(state.ledger.container_usage(0), 0);
    }

    #[test]
    fn a_failed_call_releases_its_reservation_and_keeps_its_error() {
        let state = state_with_limit(1 << 20);
        let rc = allocate(
            &state,
            charge(0, 4096),
            || hipErrorInvalidValue,
            || None,
            |_| {},
        );
        assert_eq!(rc, hipErrorInvalidValue);
        assert_eq!(state.ledger.container_usage(0), 0);
        assert!(state.live.get(0x1000).is_none());
    }

    #[test]
    fn the_reservation_is_corrected_to_the_real_size_and_freed_exactly() {
        let state = state_with_limit(1 << 20);
        // Estimated 8 KiB, the runtime took 12 KiB.
        let rc = allocate(
            &state,
            charge(0, 8192),
            || hipSuccess,
            || Some((0x1000, 12288)),
            |_| {},
        );
        assert_eq!(rc, hipSuccess);
        assert_eq!(state.ledger.container_usage(0), 12288);
        // Estimated 8 KiB, the runtime took 4 KiB.
        allocate(
            &state,
            charge(0, 8192),
            || hipSuccess,
            || Some((0x2000, 4096)),
            |_| {},
        );
        assert_eq!(state.ledger.container_usage(0), 16384);
        let (rc, entry) = free_tracked(&state, 0x1000, || hipSuccess);
        assert_eq!(rc, hipSuccess);
        assert_eq!(entry.map(|e| e.bytes), Some(12288));
    }

    #[test]
    fn a_real_size_past_the_limit_is_undone() {
        let state = state_with_limit(16384);
        let undone = StdCell::new(0usize);
        let rc = allocate(
            &state,
            charge(0, 8192),
            || hipSuccess,
            || Some((0x3000, 32768)),
            |key| undone.set(key),
        );
        assert_eq!(rc, hipErrorOutOfMemory);
        assert_eq!(undone.get(), 0x3000);
        assert_eq!(state.ledger.container_usage(0), 0);
        assert!(state.live.get(0x3000).is_none());
    }

    #[test]
    fn zero_bytes_and_unlimited_devices_pass_through_uncharged() {
        let state = state_with_limit(4096);
        let rc = allocate(&state, charge(0, 0), || hipSuccess, || None, |_| {});
        assert_eq!(rc, hipSuccess);
        let rc = allocate(
            &state,
            charge(1, 1 << 30),
            || hipSuccess,
            || Some((0x4000, 1 << 30)),
            |_| panic!("unlimited device"),
        );
        assert_eq!(rc, hipSuccess);
        assert_eq!(state.ledger.container_usage(0), 0);
        assert!(state.live.get(0x4000).is_none());
    }

    #[test]
    fn a_device_the_hook_cannot_account_gets_the_runtimes_answer_or_a_refusal() {
        let state = state_with_limit(1 << 30);
        let rc = allocate(
            &state,
            charge(NO_DEVICE, 4096),
            || hip_sys::hipErrorInvalidDevice,
            || None,
            |_| {},
        );
        assert_eq!(rc, hip_sys::hipErrorInvalidDevice);
        let undone = StdCell::new(false);
        let rc = allocate(
            &state,
            charge(40, 4096),
            || hipSuccess,
            || Some((0x5000, 4096)),
            |_| undone.set(true),
        );
        assert_eq!(rc, hipErrorOutOfMemory);
        assert!(undone.get());
    }

    #[test]
    fn frees_of_unknown_keys_pass_through_and_failed_frees_keep_the_entry() {
        let state = state_with_limit(1 << 20);
        let (rc, entry) = free_tracked(&state, 0x9000, || hipErrorInvalidValue);
        assert_eq!((rc, entry), (hipErrorInvalidValue, None));
        allocate(
            &state,
            charge(0, 4096),
            || hipSuccess,
            || Some((0x6000, 4096)),
            |_| {},
        );
        let (rc, entry) = free_tracked(&state, 0x6000, || hipErrorInvalidValue);
        assert_eq!((rc, entry), (hipErrorInvalidValue, None));
        assert!(
            state.live.get(0x6000).is_some(),
            "still allocated, still tracked"
        );
    }

    #[test]
    fn a_reused_key_releases_the_stale_entry() {
        let state = state_with_limit(1 << 20);
        for _ in 0..2 {
            allocate(
                &state,
                charge(0, 4096),
                || hipSuccess,
                || Some((0x7000, 4096)),
                |_| {},
            );
        }
        // The first allocation's free was never seen; the runtime handed the key out again.
        assert_eq!(state.ledger.container_usage(0), 4096);
    }
}
