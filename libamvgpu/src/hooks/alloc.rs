//! Doors that take device memory.
#![allow(non_snake_case)]

use super::{hook, real};
use core::ffi::c_void;
use hip_sys::*;

/// `hipMalloc`.
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> hipError_t {
    let real = real!(hipMalloc: hipMalloc_fn);
    let Some(_active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr, size) };
    };
    // SAFETY: as above.
    unsafe { real(ptr, size) }
}
