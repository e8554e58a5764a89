//! hipMemcpy / hipMemset: real byte moves, with device-side ranges checked against the registry
//! so a bad pointer yields hipErrorInvalidValue instead of a crash.

use super::status;
use crate::sim::{self, Sim};
use hip_sys::*;
use std::ffi::{c_int, c_void};

fn device_range_ok(sim: &Sim, addr: usize, len: usize, need: libc::c_int) -> bool {
    sim.covers(addr, len, need)
}

/// # Safety
/// HIP contract: host-side pointers are valid for `size` bytes; device-side pointers are checked.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        if size == 0 {
            return Ok(());
        }
        if dst.is_null() || src.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // Only the sides the direction names are looked up: a host address is never found,
        // so looking it up would scan every allocation.
        let dst_dev = || device_range_ok(sim, dst as usize, size, libc::PROT_WRITE);
        let src_dev = || device_range_ok(sim, src as usize, size, libc::PROT_READ);
        let ok = match kind {
            hipMemcpyHostToHost => !dst_dev() && !src_dev(),
            hipMemcpyHostToDevice => dst_dev(),
            hipMemcpyDeviceToHost => src_dev(),
            hipMemcpyDeviceToDevice => dst_dev() && src_dev(),
            hipMemcpyDefault => true,
            _ => return Err(hipErrorInvalidMemcpyDirection),
        };
        if !ok {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: device-side ranges were checked against live mappings; host-side ranges are
        // valid by the HIP contract. `copy` tolerates overlap, as hipMemcpy does.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, size) };
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `dst` is a device pointer (checked against the registry).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemset(
    dst: *mut c_void,
    value: c_int,
    size: usize,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        if size == 0 {
            return Ok(());
        }
        if !device_range_ok(sim, dst as usize, size, libc::PROT_WRITE) {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: the range lies inside a live, writable simulated allocation (checked above).
        unsafe { std::ptr::write_bytes(dst as *mut u8, value as u8, size) };
        Ok(())
    }))
}
