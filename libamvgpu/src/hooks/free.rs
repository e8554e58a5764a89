//! Doors that give device memory back.
#![allow(non_snake_case)]

use super::{hook, real};
use core::ffi::c_void;
use hip_sys::*;

/// `hipFree`.
pub unsafe extern "C" fn hipFree(ptr: *mut c_void) -> hipError_t {
    let real = real!(hipFree: hipFree_fn);
    let Some(_active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr) };
    };
    // SAFETY: as above.
    unsafe { real(ptr) }
}
