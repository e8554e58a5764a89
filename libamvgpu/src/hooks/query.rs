//! Doors that report memory sizes: every caller sees the limit, never the physical card.
//!
//! These wrappers only read the hook's state (the limits and the ledger's counters), so they
//! take no re-entrancy guard: a query re-entered from inside the hook answers the same way,
//! and the guard's thread-local lookup stays off this hot path (PyTorch calls
//! `hipGetDevicePropertiesR0600` about 135k times per training step).
//!
//! For a limited device, total = min(limit, real total) in every door (so they all agree), and
//! `hipMemGetInfo`'s free = min(limit - container usage, real free), never above total. An
//! invalid or zero limit reports 0. Each wrapper calls the real function first: NULL
//! out-pointers and bad device ids get the runtime's own error, untouched, and nothing is
//! written then.
#![allow(non_snake_case)]

use super::{current_device, real};
use crate::config::MAX_DEVICES;
use crate::state;
use crate::state::State;
use core::ffi::c_int;
use core::sync::atomic::{AtomicU64, Ordering};
use hip_sys::*;

/// The total memory to report for `device`, or `None` to report the real value.
fn virtual_total(state: &State, device: c_int, real_total: u64) -> Option<u64> {
    state.allowance(device).map(|limit| limit.min(real_total))
}

/// What `hipMemGetInfo` reports under `limit`: total = min(limit, real total); free = what the
/// limit leaves the container, never more than the device really has free, nor than total.
fn virtual_info(limit: u64, usage: u64, real_free: u64, real_total: u64) -> (u64, u64) {
    let total = limit.min(real_total);
    (limit.saturating_sub(usage).min(real_free).min(total), total)
}

/// When the last sweep for dead processes ran (coarse monotonic nanoseconds).
static LAST_SWEEP: AtomicU64 = AtomicU64::new(0);

/// How often a query may sweep: a sweep costs one `kill(pid, 0)` per process slot.
const SWEEP_INTERVAL_NS: u64 = 10_000_000;

/// The container's usage of `device`. Memory of processes that died without freeing stays in
/// the ledger until a sweep (an allocation sweeps before it refuses); so that free memory is
/// not under-reported meanwhile, a query that sees others' usage sweeps at most every 10 ms.
fn container_usage(state: &State, device: u32) -> u64 {
    let usage = state.ledger.container_usage(device);
    if usage == 0 || usage <= state.ledger.process_usage(device) {
        return usage;
    }
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid out-pointer; the coarse clock is served by the vDSO.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut now) } != 0 {
        return usage;
    }
    let now = (now.tv_sec as u64).saturating_mul(1_000_000_000) + now.tv_nsec as u64;
    let last = LAST_SWEEP.load(Ordering::Relaxed);
    if now.saturating_sub(last) < SWEEP_INTERVAL_NS
        || LAST_SWEEP
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return usage;
    }
    if state.ledger.reclaim_dead() == 0 {
        return usage;
    }
    state.ledger.container_usage(device)
}

/// `hipMemGetInfo` (current device).
///
/// # Safety
/// HIP's contract for `hipMemGetInfo`.
pub unsafe extern "C" fn hipMemGetInfo(free: *mut usize, total: *mut usize) -> hipError_t {
    let real = real!(hipMemGetInfo: hipMemGetInfo_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(free, total) };
    let Some(state) = state::enforcing() else {
        return rc;
    };
    if rc != hipSuccess || free.is_null() || total.is_null() {
        return rc;
    }
    let Ok(device) = current_device() else {
        return rc;
    };
    // SAFETY: the runtime just wrote both (non-NULL) out-pointers.
    let (real_free, real_total) = unsafe { (*free as u64, *total as u64) };
    let Some(limit) = state.allowance(device) else {
        return rc;
    };
    let usage = if (0..MAX_DEVICES as c_int).contains(&device) {
        container_usage(state, device as u32)
    } else {
        u64::MAX
    };
    let (free_bytes, total_bytes) = virtual_info(limit, usage, real_free, real_total);
    // SAFETY: both out-pointers are non-NULL and were just written by the runtime.
    unsafe {
        *free = free_bytes as usize;
        *total = total_bytes as usize;
    }
    rc
}

/// `hipDeviceTotalMem`.
///
/// # Safety
/// HIP's contract for `hipDeviceTotalMem`.
pub unsafe extern "C" fn hipDeviceTotalMem(bytes: *mut usize, device: hipDevice_t) -> hipError_t {
    let real = real!(hipDeviceTotalMem: hipDeviceTotalMem_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(bytes, device) };
    let Some(state) = state::enforcing() else {
        return rc;
    };
    if rc == hipSuccess && !bytes.is_null() {
        // SAFETY: non-NULL and just written by the runtime.
        let real_total = unsafe { *bytes } as u64;
        if let Some(total) = virtual_total(state, device, real_total) {
            // SAFETY: as above.
            unsafe { *bytes = total as usize };
        }
    }
    rc
}

/// `hipDeviceGetAttribute`: only `hipDeviceAttributeTotalGlobalMem` changes (an `int`, clamped
/// to `INT32_MAX` like the runtime's own answer).
///
/// # Safety
/// HIP's contract for `hipDeviceGetAttribute`.
pub unsafe extern "C" fn hipDeviceGetAttribute(
    value: *mut c_int,
    attr: hipDeviceAttribute_t,
    device: c_int,
) -> hipError_t {
    let real = real!(hipDeviceGetAttribute: hipDeviceGetAttribute_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(value, attr, device) };
    if attr != hipDeviceAttributeTotalGlobalMem || rc != hipSuccess || value.is_null() {
        return rc;
    }
    let Some(state) = state::enforcing() else {
        return rc;
    };
    // SAFETY: non-NULL and just written by the runtime.
    let real_total = u64::try_from(unsafe { *value }).unwrap_or(0);
    if let Some(total) = virtual_total(state, device, real_total) {
        // SAFETY: as above.
        unsafe { *value = total.min(i32::MAX as u64) as c_int };
    }
    rc
}

/// Patches `totalGlobalMem` of a property struct the runtime filled.
///
/// # Safety
/// `total` must point to the `totalGlobalMem` field of a property struct just written.
unsafe fn patch_total(device: c_int, total: *mut usize) {
    let Some(state) = state::enforcing() else {
        return;
    };
    // SAFETY: caller guarantee.
    let real_total = unsafe { *total } as u64;
    if let Some(bytes) = virtual_total(state, device, real_total) {
        // SAFETY: caller guarantee.
        unsafe { *total = bytes as usize };
    }
}

/// `hipGetDeviceProperties` (the plain export fills the legacy R0000 layout).
///
/// # Safety
/// HIP's contract for `hipGetDeviceProperties`.
pub unsafe extern "C" fn hipGetDeviceProperties(
    prop: *mut hipDeviceProp_tR0000,
    device: c_int,
) -> hipError_t {
    let real = real!(hipGetDeviceProperties: hipGetDeviceProperties_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(prop, device) };
    if rc == hipSuccess && !prop.is_null() {
        // SAFETY: the runtime filled `*prop`; the field offset is checked in hip-sys.
        unsafe { patch_total(device, core::ptr::addr_of_mut!((*prop).totalGlobalMem)) };
    }
    rc
}

/// `hipGetDevicePropertiesR0000` (legacy layout).
///
/// # Safety
/// HIP's contract for `hipGetDevicePropertiesR0000`.
pub unsafe extern "C" fn hipGetDevicePropertiesR0000(
    prop: *mut hipDeviceProp_tR0000,
    device: c_int,
) -> hipError_t {
    let real = real!(hipGetDevicePropertiesR0000: hipGetDevicePropertiesR0000_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(prop, device) };
    if rc == hipSuccess && !prop.is_null() {
        // SAFETY: the runtime filled `*prop`; the field offset is checked in hip-sys.
        unsafe { patch_total(device, core::ptr::addr_of_mut!((*prop).totalGlobalMem)) };
    }
    rc
}

/// `hipGetDevicePropertiesR0600` (ROCm 6 layout; what `hipGetDeviceProperties` means in
/// programs built against ROCm 6+ headers).
///
/// # Safety
/// HIP's contract for `hipGetDevicePropertiesR0600`.
pub unsafe extern "C" fn hipGetDevicePropertiesR0600(
    prop: *mut hipDeviceProp_tR0600,
    device: c_int,
) -> hipError_t {
    let real = real!(hipGetDevicePropertiesR0600: hipGetDevicePropertiesR0600_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(prop, device) };
    if rc == hipSuccess && !prop.is_null() {
        // SAFETY: the runtime filled `*prop`; the field offset is checked in hip-sys.
        unsafe { patch_total(device, core::ptr::addr_of_mut!((*prop).totalGlobalMem)) };
    }
    rc
}

// The offsets the patches rely on, restated where they are used.
const _: () = assert!(
    core::mem::offset_of!(hipDeviceProp_tR0000, totalGlobalMem)
        == HIP_DEVICE_PROP_R0000_TOTAL_GLOBAL_MEM_OFFSET
);
const _: () = assert!(
    core::mem::offset_of!(hipDeviceProp_tR0600, totalGlobalMem)
        == HIP_DEVICE_PROP_R0600_TOTAL_GLOBAL_MEM_OFFSET
);

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn free_is_what_the_limit_leaves_and_the_device_has() {
        assert_eq!(
            virtual_info(16 * GIB, 4 * GIB, 60 * GIB, 64 * GIB),
            (12 * GIB, 16 * GIB)
        );
        // Another tenant filled the card: the device's own free memory caps the answer.
        assert_eq!(
            virtual_info(16 * GIB, 4 * GIB, GIB, 64 * GIB),
            (GIB, 16 * GIB)
        );
        // A limit above the card: every door reports the card.
        assert_eq!(
            virtual_info(128 * GIB, 0, 64 * GIB, 64 * GIB),
            (64 * GIB, 64 * GIB)
        );
        // Usage momentarily above the limit (a reservation being withdrawn): 0, not a wrap.
        assert_eq!(virtual_info(GIB, 2 * GIB, 60 * GIB, 64 * GIB), (0, GIB));
        // An invalid or zero limit reports nothing at all.
        assert_eq!(virtual_info(0, 0, 60 * GIB, 64 * GIB), (0, 0));
    }

    #[test]
    fn totals_follow_the_limit_of_the_device_asked_about() {
        let state = super::super::tests::state_with_limit(GIB);
        assert_eq!(virtual_total(&state, 0, 64 * GIB), Some(GIB));
        assert_eq!(virtual_total(&state, 0, GIB / 2), Some(GIB / 2));
        assert_eq!(virtual_total(&state, 1, 64 * GIB), None);
        // Out of the accounted range while a limit exists: nothing may be used there.
        assert_eq!(virtual_total(&state, 99, 64 * GIB), Some(0));
    }
}
