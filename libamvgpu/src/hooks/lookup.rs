//! Doors that hand out function pointers: `hipGetProcAddress` and `hipGetDriverEntryPoint`.
//!
//! Their pointers come from the runtime's own tables, never from a symbol lookup, so they are
//! the real functions even though the definitions are redirected ([`crate::redirect`]); a
//! program (Triton, TransformerEngine) calling through them would bypass every limit. After the real lookup succeeds, a pointer that is the
//! real function of a wrapped symbol is replaced by that symbol's wrapper. The runtime may
//! answer a name with a version-specific variant (`hipGetDeviceProperties` at version >= 600
//! is `hipGetDevicePropertiesR0600`): the replacement is chosen by the address returned, so the
//! wrapper always has the signature of the function the runtime chose.
#![allow(non_snake_case)]

use super::{hook, real};
use crate::symbols;
use core::ffi::{c_char, c_int, c_ulonglong, c_void};
use hip_sys::*;

/// Replaces `*pfn` by a wrapper when it is a wrapped function.
///
/// # Safety
/// `symbol` must be NULL or NUL-terminated; `pfn` NULL or valid for reads and writes.
unsafe fn substitute(symbol: *const c_char, pfn: *mut *mut c_void) {
    if pfn.is_null() {
        return;
    }
    // SAFETY: caller guarantee.
    let Some(sym) = (unsafe { symbols::find_c(symbol) }) else {
        return;
    };
    // SAFETY: caller guarantee.
    let found = unsafe { *pfn };
    if found.is_null() {
        return;
    }
    if let Some(wrapper) = symbols::wrapper_for_real(sym, found as usize) {
        // SAFETY: caller guarantee.
        unsafe { *pfn = wrapper as *mut c_void };
    }
}

/// `hipGetProcAddress` (HIP 6.1 signature).
///
/// # Safety
/// HIP's contract for `hipGetProcAddress`.
pub unsafe extern "C" fn hipGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    hip_version: c_int,
    flags: u64,
    status: *mut hipDriverProcAddressQueryResult,
) -> hipError_t {
    let real = real!(hipGetProcAddress: hipGetProcAddress_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(symbol, pfn, hip_version, flags, status) };
    if rc == hipSuccess && hook().is_some() {
        // SAFETY: the runtime accepted `symbol` and `pfn`, so both are valid.
        unsafe { substitute(symbol, pfn) };
    }
    rc
}

/// `hipGetDriverEntryPoint`.
///
/// # Safety
/// HIP's contract for `hipGetDriverEntryPoint`.
pub unsafe extern "C" fn hipGetDriverEntryPoint(
    symbol: *const c_char,
    func_ptr: *mut *mut c_void,
    flags: c_ulonglong,
    status: *mut hipDriverEntryPointQueryResult,
) -> hipError_t {
    let real = real!(hipGetDriverEntryPoint: hipGetDriverEntryPoint_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(symbol, func_ptr, flags, status) };
    if rc == hipSuccess && hook().is_some() {
        // SAFETY: the runtime accepted `symbol` and `func_ptr`, so both are valid.
        unsafe { substitute(symbol, func_ptr) };
    }
    rc
}
