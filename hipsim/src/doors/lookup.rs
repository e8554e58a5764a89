//! hipGetProcAddress and hipGetDriverEntryPoint: function pointers that bypass symbol lookup.
//!
//! Both hand out the addresses of the simulator's *exported* symbols (the versioned
//! trampolines), and only of symbols the built ABI exports.

use super::{out, status, HipResult};
use crate::exports::EXPORTS;
use crate::sim;
use hip_sys::*;
use std::ffi::{c_char, c_int, c_ulonglong, c_void, CStr};

/// `hip_6.1` -> 601.
fn node_version(node: &str) -> Option<c_int> {
    let (major, minor) = node.strip_prefix("hip_")?.split_once('.')?;
    Some(major.parse::<c_int>().ok()? * 100 + minor.parse::<c_int>().ok()?)
}

/// Accepts `major * 100 + minor` (601) or the full HIP_VERSION encoding (60100000).
fn requested_version(hip_version: c_int) -> c_int {
    if hip_version >= 1_000_000 {
        (hip_version / 10_000_000) * 100 + (hip_version / 100_000) % 100
    } else {
        hip_version
    }
}

fn find(name: &str) -> Option<(&'static str, *mut c_void)> {
    EXPORTS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, node, f)| (node, f as *mut c_void))
}

fn symbol_name<'a>(symbol: *const c_char) -> HipResult<&'a str> {
    if symbol.is_null() {
        return Err(hipErrorInvalidValue);
    }
    // SAFETY: HIP contract: a non-null symbol is a NUL-terminated string valid for the call.
    let name = unsafe { CStr::from_ptr(symbol) };
    name.to_str()
        .ok()
        .filter(|n| !n.is_empty())
        .ok_or(hipErrorInvalidValue)
}

/// # Safety
/// HIP contract: `symbol` is NULL or NUL-terminated; `pfn` and `status` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    hip_version: c_int,
    flags: u64,
    symbol_status: *mut hipDriverProcAddressQueryResult,
) -> hipError_t {
    status(sim::get().and_then(|_| {
        let pfn = out!(pfn)?;
        let status_out = out!(symbol_status).ok();
        let name = symbol_name(symbol)?;
        if flags > HIP_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM {
            return Err(hipErrorInvalidValue);
        }
        let version = requested_version(hip_version);
        // ROCm 6 headers redirect hipGetDeviceProperties to the R0600 export; a caller asking
        // for HIP >= 6.0 means that one.
        let name = if name == "hipGetDeviceProperties" && version >= 600 {
            "hipGetDevicePropertiesR0600"
        } else {
            name
        };
        let set_status = |s| {
            if let Some(o) = &status_out {
                o.set(s)
            }
        };
        pfn.set(std::ptr::null_mut());
        let Some((node, addr)) = find(name) else {
            set_status(HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
            return Err(hipErrorInvalidValue);
        };
        if node_version(node).is_some_and(|needed| version < needed) {
            set_status(HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
            return Err(hipErrorInvalidValue);
        }
        pfn.set(addr);
        set_status(HIP_GET_PROC_ADDRESS_SUCCESS);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `symbol` is NULL or NUL-terminated; `func_ptr` and `status` NULL or valid for
/// writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipGetDriverEntryPoint(
    symbol: *const c_char,
    func_ptr: *mut *mut c_void,
    flags: c_ulonglong,
    entry_status: *mut hipDriverEntryPointQueryResult,
) -> hipError_t {
    status(sim::get().and_then(|_| {
        let func_ptr = out!(func_ptr)?;
        let status_out = out!(entry_status).ok();
        let name = symbol_name(symbol)?;
        if flags > 2 {
            return Err(hipErrorInvalidValue);
        }
        func_ptr.set(std::ptr::null_mut());
        match find(name) {
            Some((_, addr)) => {
                func_ptr.set(addr);
                if let Some(o) = &status_out {
                    o.set(hipDriverEntryPointSuccess);
                }
                Ok(())
            }
            None => {
                if let Some(o) = &status_out {
                    o.set(hipDriverEntryPointSymbolNotFound);
                }
                Err(hipErrorInvalidValue)
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_accept_both_encodings() {
        assert_eq!(node_version("hip_6.1"), Some(601));
        assert_eq!(node_version("hip_4.2"), Some(402));
        assert_eq!(requested_version(601), 601);
        assert_eq!(requested_version(60_100_000), 601);
        assert_eq!(requested_version(70_200_000), 702);
    }
}
