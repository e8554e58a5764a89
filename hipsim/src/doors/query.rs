//! Doors that report memory sizes and device properties; they all agree with each other.

use super::{out, status, HipResult};
use crate::config::Config;
use crate::sim::{self, Sim};
use hip_sys::*;
use std::ffi::{c_char, c_int, c_void, CStr};

/// (major, minor, warp size) implied by a `gfx` architecture name.
pub fn arch_numbers(arch: &str) -> (c_int, c_int, c_int) {
    let digits: String = arch
        .strip_prefix("gfx")
        .unwrap_or("")
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    // Major is decimal (gfx9, gfx11); minor is one hex digit; the last digit is the stepping.
    let major = |s: &str| s.parse::<c_int>().unwrap_or(0);
    let minor = |s: &str| c_int::from_str_radix(s, 16).unwrap_or(0);
    match digits.len() {
        3 => (major(&digits[..1]), minor(&digits[1..2]), 64),
        4 => (major(&digits[..2]), minor(&digits[2..3]), 32),
        _ => (0, 0, 64),
    }
}

fn copy_name(dst: &mut [c_char], text: &str) {
    let n = text.len().min(dst.len() - 1);
    for (d, s) in dst.iter_mut().zip(text.bytes().take(n)) {
        *d = s as c_char;
    }
    dst[n] = 0;
}

fn device_name(c: &Config) -> String {
    format!("hipsim {} ({} CUs)", c.arch, c.cus)
}

pub fn fill_r0600(c: &Config, device: usize) -> hipDeviceProp_tR0600 {
    let (major, minor, warp) = arch_numbers(&c.arch);
    let mut p = hipDeviceProp_tR0600::zeroed();
    copy_name(&mut p.name, &device_name(c));
    copy_name(&mut p.gcnArchName, &c.arch);
    p.totalGlobalMem = c.vram as usize;
    p.sharedMemPerBlock = 64 << 10;
    p.regsPerBlock = 65536;
    p.warpSize = warp;
    p.memPitch = c.vram as usize;
    p.maxThreadsPerBlock = 1024;
    p.maxThreadsDim = [1024, 1024, 1024];
    p.maxGridSize = [i32::MAX, 65536, 65536];
    p.clockRate = 2_100_000;
    p.totalConstMem = 2 << 30;
    p.major = major;
    p.minor = minor;
    p.multiProcessorCount = c.cus as c_int;
    p.l2CacheSize = 4 << 20;
    p.maxThreadsPerMultiProcessor = 2048;
    p.pciBusID = device as c_int;
    p.managedMemory = 1;
    p.concurrentManagedAccess = 1;
    p.memoryPoolsSupported = 1;
    p.maxSharedMemoryPerMultiProcessor = 64 << 10;
    p.isLargeBar = 1;
    p
}

pub fn fill_r0000(c: &Config, device: usize) -> hipDeviceProp_tR0000 {
    let (major, minor, warp) = arch_numbers(&c.arch);
    let mut p = hipDeviceProp_tR0000::zeroed();
    copy_name(&mut p.name, &device_name(c));
    copy_name(&mut p.gcnArchName, &c.arch);
    p.totalGlobalMem = c.vram as usize;
    p.sharedMemPerBlock = 64 << 10;
    p.regsPerBlock = 65536;
    p.warpSize = warp;
    p.maxThreadsPerBlock = 1024;
    p.maxThreadsDim = [1024, 1024, 1024];
    p.maxGridSize = [i32::MAX, 65536, 65536];
    p.clockRate = 2_100_000;
    p.totalConstMem = 2 << 30;
    p.major = major;
    p.minor = minor;
    p.multiProcessorCount = c.cus as c_int;
    p.l2CacheSize = 4 << 20;
    p.maxThreadsPerMultiProcessor = 2048;
    p.pciBusID = device as c_int;
    p.gcnArch = major * 100 + minor * 10;
    p.managedMemory = 1;
    p.concurrentManagedAccess = 1;
    p.maxSharedMemoryPerMultiProcessor = 64 << 10;
    p.isLargeBar = 1;
    p
}

/// # Safety
/// HIP contract: `free` and `total` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemGetInfo(
    free: *mut usize,
    total: *mut usize,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (free, total) = (out!(free)?, out!(total)?);
        let device = sim.current_device()?;
        let size = sim.usage.total(device);
        free.set(size.saturating_sub(sim.usage.live(device)) as usize);
        total.set(size as usize);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `bytes` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipDeviceTotalMem(
    bytes: *mut usize,
    device: hipDevice_t,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(bytes)?;
        let device = sim.device(device)?;
        out.set(sim.usage.total(device) as usize);
        Ok(())
    }))
}

fn attribute(sim: &Sim, attr: hipDeviceAttribute_t, device: usize) -> HipResult<c_int> {
    let p = &sim.props[device].r0600;
    let clamp = |v: usize| v.min(i32::MAX as usize) as c_int;
    Ok(match attr {
        hipDeviceAttributeTotalGlobalMem => clamp(p.totalGlobalMem),
        hipDeviceAttributeMultiprocessorCount => p.multiProcessorCount,
        hipDeviceAttributePhysicalMultiProcessorCount => p.multiProcessorCount,
        hipDeviceAttributeComputeCapabilityMajor => p.major,
        hipDeviceAttributeComputeCapabilityMinor => p.minor,
        hipDeviceAttributeWarpSize => p.warpSize,
        hipDeviceAttributeClockRate => p.clockRate,
        hipDeviceAttributeManagedMemory => p.managedMemory,
        hipDeviceAttributePciBusId => p.pciBusID,
        hipDeviceAttributePciDeviceId => p.pciDeviceID,
        hipDeviceAttributeMemoryPoolsSupported => 1,
        hipDeviceAttributeVirtualMemoryManagementSupported => 1,
        hipDeviceAttributeMaxSharedMemoryPerMultiprocessor => {
            clamp(p.maxSharedMemoryPerMultiProcessor)
        }
        hipDeviceAttributeEccEnabled => p.ECCEnabled,
        _ => return Err(hipErrorInvalidValue),
    })
}

/// # Safety
/// HIP contract: `value` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipDeviceGetAttribute(
    value: *mut c_int,
    attr: hipDeviceAttribute_t,
    device: c_int,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(value)?;
        let device = sim.device(device)?;
        out.set(attribute(sim, attr, device)?);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `prop` is NULL or valid for writes of the legacy (R0000) layout.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipGetDeviceProperties(
    prop: *mut hipDeviceProp_tR0000,
    device: c_int,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(prop)?;
        out.set(sim.props[sim.device(device)?].r0000);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `prop` is NULL or valid for writes of the legacy (R0000) layout.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipGetDevicePropertiesR0000(
    prop: *mut hipDeviceProp_tR0000,
    device: c_int,
) -> hipError_t {
    // SAFETY: same contract as the plain export.
    unsafe { hipsim_impl_hipGetDeviceProperties(prop, device) }
}

/// # Safety
/// HIP contract: `prop` is NULL or valid for writes of the ROCm 6 (R0600) layout.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipGetDevicePropertiesR0600(
    prop: *mut hipDeviceProp_tR0600,
    device: c_int,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(prop)?;
        out.set(sim.props[sim.device(device)?].r0600);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `size` is NULL or valid for writes (`ptr` is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemPtrGetInfo(
    ptr: *mut c_void,
    size: *mut usize,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(size)?;
        let addr = ptr as usize;
        let bytes = sim
            .allocation_containing(addr)
            .ok_or(hipErrorInvalidValue)?;
        out.set(bytes);
        Ok(())
    }))
}

fn error_cstr(code: hipError_t) -> &'static CStr {
    match code {
        hipSuccess => c"hipSuccess",
        hipErrorInvalidValue => c"hipErrorInvalidValue",
        hipErrorOutOfMemory => c"hipErrorOutOfMemory",
        hipErrorNotInitialized => c"hipErrorNotInitialized",
        hipErrorDeinitialized => c"hipErrorDeinitialized",
        hipErrorInvalidPitchValue => c"hipErrorInvalidPitchValue",
        hipErrorInvalidSymbol => c"hipErrorInvalidSymbol",
        hipErrorInvalidDevicePointer => c"hipErrorInvalidDevicePointer",
        hipErrorInvalidMemcpyDirection => c"hipErrorInvalidMemcpyDirection",
        hipErrorInsufficientDriver => c"hipErrorInsufficientDriver",
        hipErrorNoDevice => c"hipErrorNoDevice",
        hipErrorInvalidDevice => c"hipErrorInvalidDevice",
        hipErrorInvalidContext => c"hipErrorInvalidContext",
        hipErrorMapFailed => c"hipErrorMapFailed",
        hipErrorUnmapFailed => c"hipErrorUnmapFailed",
        hipErrorAlreadyMapped => c"hipErrorAlreadyMapped",
        hipErrorNotMapped => c"hipErrorNotMapped",
        hipErrorInvalidHandle => c"hipErrorInvalidHandle",
        hipErrorNotFound => c"hipErrorNotFound",
        hipErrorNotReady => c"hipErrorNotReady",
        hipErrorIllegalAddress => c"hipErrorIllegalAddress",
        hipErrorNotSupported => c"hipErrorNotSupported",
        _ => c"hipErrorUnknown",
    }
}

/// # Safety
/// Takes no pointers; returns a static NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipGetErrorName(code: hipError_t) -> *const c_char {
    error_cstr(code).as_ptr()
}

/// # Safety
/// Takes no pointers; returns a static NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipGetErrorString(code: hipError_t) -> *const c_char {
    error_cstr(code).as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names_give_compute_capability() {
        assert_eq!(arch_numbers("gfx942"), (9, 4, 64));
        assert_eq!(arch_numbers("gfx90a:sramecc+:xnack-"), (9, 0, 64));
        assert_eq!(arch_numbers("gfx1100"), (11, 0, 32));
    }

    #[test]
    fn every_defined_code_has_its_own_name() {
        for code in [0, 1, 2, 3, 100, 101, 400, 801] {
            assert_eq!(
                error_cstr(code).to_str().unwrap(),
                hip_sys::error_name(code).unwrap()
            );
        }
    }
}
