//! Non-HIP exports for tests (`hipsim*`): the simulator's own view, to compare a hook against.

use super::{out, status};
use crate::sim;
use hip_sys::*;
use std::ffi::c_int;

/// Device-wide live and peak bytes (across every process sharing `HIPSIM_STATE`).
///
/// # Safety
/// `live` and `peak` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsimGetUsage(
    device: c_int,
    live: *mut usize,
    peak: *mut usize,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (live, peak) = (out!(live)?, out!(peak)?);
        let device = sim.device(device)?;
        live.set(sim.usage.live(device) as usize);
        peak.set(sim.usage.peak(device) as usize);
        Ok(())
    }))
}

/// Bytes this process holds on `device` (allocations, arrays, pool caches, VMM handles).
///
/// # Safety
/// `bytes` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsimGetProcessUsage(device: c_int, bytes: *mut usize) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(bytes)?;
        let device = sim.device(device)?;
        out.set(sim.held_per_device()[device]);
        Ok(())
    }))
}

/// Live managed allocations of this process and their bytes (never charged to a device).
///
/// # Safety
/// `count` and `bytes` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsimGetManagedCount(count: *mut usize, bytes: *mut usize) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (count, bytes) = (out!(count)?, out!(bytes)?);
        let (mut n, mut b) = (0, 0);
        for shard in sim.all_shards() {
            n += shard.managed_count;
            b += shard.managed_bytes;
        }
        count.set(n);
        bytes.set(b);
        Ok(())
    }))
}

/// Live address-keyed allocations plus arrays plus mipmapped arrays of this process.
///
/// # Safety
/// `count` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsimGetAllocationCount(count: *mut usize) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(count)?;
        let reg = sim.registry();
        let allocs: usize = sim.all_shards().iter().map(|s| s.allocs.len()).sum();
        out.set(allocs + reg.arrays.len() + reg.mipmaps.len());
        Ok(())
    }))
}

/// Bytes cached (freed but still charged) in `device`'s pools.
///
/// # Safety
/// `bytes` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsimGetPoolCachedBytes(device: c_int, bytes: *mut usize) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(bytes)?;
        let device = sim.device(device)?;
        let reg = sim.registry();
        let cached = reg
            .pools
            .values()
            .filter(|p| p.device == device)
            .flat_map(|p| p.cache.iter().map(|&(_, b)| b))
            .sum();
        out.set(cached);
        Ok(())
    }))
}

/// The CU mask of the last stream created with hipExtStreamCreateWithCUMask: copies up to
/// `capacity` words into `words` and stores the mask's full length in `len` (0 if none yet).
///
/// # Safety
/// `words` is NULL or valid for writes of `capacity` u32; `len` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsimGetLastCuMask(
    words: *mut u32,
    capacity: u32,
    len: *mut u32,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let len = out!(len)?;
        let reg = sim.registry();
        let mask = reg.last_cu_mask.as_deref().unwrap_or(&[]);
        if !words.is_null() {
            let n = mask.len().min(capacity as usize);
            // SAFETY: caller contract: `words` is valid for `capacity` writes; n <= capacity.
            unsafe { std::ptr::copy_nonoverlapping(mask.as_ptr(), words, n) };
        }
        len.set(mask.len() as u32);
        Ok(())
    }))
}

/// The CU mask `stream` was created with (see [`hipsimGetLastCuMask`] for the arguments); a
/// stream made by hipStreamCreate has an empty mask; an unknown stream gives
/// hipErrorInvalidHandle.
///
/// # Safety
/// `words` is NULL or valid for writes of `capacity` u32; `len` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsimGetStreamCuMask(
    stream: hipStream_t,
    words: *mut u32,
    capacity: u32,
    len: *mut u32,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let len = out!(len)?;
        let reg = sim.registry();
        let s = reg
            .streams
            .get(&(stream as usize))
            .ok_or(hipErrorInvalidHandle)?;
        let mask = s.cu_mask.as_deref().unwrap_or(&[]);
        if !words.is_null() {
            let n = mask.len().min(capacity as usize);
            // SAFETY: caller contract: `words` is valid for `capacity` writes; n <= capacity.
            unsafe { std::ptr::copy_nonoverlapping(mask.as_ptr(), words, n) };
        }
        len.set(mask.len() as u32);
        Ok(())
    }))
}

/// The ROCm ABI (5, 6 or 7) this library was built with (`HIPSIM_ABI` at build time).
#[no_mangle]
pub extern "C" fn hipsimGetAbiMajor() -> c_int {
    crate::ABI_MAJOR
}

extern "C" {
    /// `getenv` called from this library through its PLT (c/shim.c).
    fn hipsim_shim_getenv_via_plt(name: *const std::ffi::c_char) -> *const std::ffi::c_char;
}

/// What the runtime's own `getenv(name)` returns (a PLT call from `libamdhip64`, as ROCr and
/// HIP read their variables), so a test can see the environment as the runtime sees it.
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hipsimRuntimeGetenv(
    name: *const std::ffi::c_char,
) -> *const std::ffi::c_char {
    if name.is_null() {
        return std::ptr::null();
    }
    // SAFETY: a NUL-terminated name (caller contract).
    unsafe { hipsim_shim_getenv_via_plt(name) }
}

extern "C" {
    /// `hipMalloc` called from this library through its PLT (c/shim.c).
    fn hipsim_shim_malloc_via_plt(ptr: *mut *mut std::ffi::c_void, size: usize) -> hipError_t;
}

/// An allocation the runtime makes for itself outside any HIP door (as the real runtime does
/// for code objects or staging buffers), through its own PLT-bound `hipMalloc`: a hook must
/// let it pass uncounted, as it is not the program's call. Freed with `hipFree` like any other.
///
/// # Safety
/// `ptr` is NULL or valid for writes (hipMalloc's contract).
#[no_mangle]
pub unsafe extern "C" fn hipsimInternalMalloc(
    ptr: *mut *mut std::ffi::c_void,
    size: usize,
) -> hipError_t {
    // SAFETY: forwarding the caller's arguments (same contract).
    unsafe { hipsim_shim_malloc_via_plt(ptr, size) }
}
