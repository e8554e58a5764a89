//! Doors that report memory sizes.
#![allow(non_snake_case)]

use super::{hook, real};
use hip_sys::*;

/// `hipMemGetInfo`.
pub unsafe extern "C" fn hipMemGetInfo(free: *mut usize, total: *mut usize) -> hipError_t {
    let real = real!(hipMemGetInfo: hipMemGetInfo_fn);
    let Some(_active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(free, total) };
    };
    // SAFETY: as above.
    unsafe { real(free, total) }
}
