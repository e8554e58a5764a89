//! Devices, contexts and versions.

use super::{out, status};
use crate::sim;
use hip_sys::*;
use std::ffi::{c_int, c_uint};

/// The version the simulator claims (HIP_VERSION encoding: major * 10^7 + minor * 10^5).
pub fn runtime_version() -> c_int {
    match crate::ABI_MAJOR {
        5 => 50_200_000,
        6 => 60_200_000,
        _ => 70_100_000,
    }
}

/// # Safety
/// Takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipInit(flags: c_uint) -> hipError_t {
    status(sim::get().and_then(|sim| {
        if flags != 0 {
            return Err(hipErrorInvalidValue);
        }
        sim.current_device().map(drop)
    }))
}

/// # Safety
/// HIP contract: `version` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipRuntimeGetVersion(version: *mut c_int) -> hipError_t {
    status(out!(version).map(|v| v.set(runtime_version())))
}

/// # Safety
/// HIP contract: `version` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipDriverGetVersion(version: *mut c_int) -> hipError_t {
    status(out!(version).map(|v| v.set(runtime_version())))
}

/// # Safety
/// HIP contract: `device` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipGetDevice(device: *mut c_int) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(device)?;
        out.set(sim.current_device()? as c_int);
        Ok(())
    }))
}

/// # Safety
/// Takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipSetDevice(device: c_int) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let device = sim.device(device)?;
        sim.set_current_device(device);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `count` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipGetDeviceCount(count: *mut c_int) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(count)?;
        out.set(sim.devices() as c_int);
        if sim.devices() == 0 {
            return Err(hipErrorNoDevice);
        }
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `ctx` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipCtxGetCurrent(ctx: *mut hipCtx_t) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(ctx)?;
        out.set(sim::context_handle(sim.current_device()?));
        Ok(())
    }))
}

/// # Safety
/// HIP contract (the context handle is only compared, never dereferenced).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipCtxSetCurrent(ctx: hipCtx_t) -> hipError_t {
    status(sim::get().and_then(|sim| {
        if ctx.is_null() {
            return Ok(()); // unbinding leaves the thread on its device, as HIP does
        }
        let device = sim::context_device(ctx)
            .filter(|&d| d < sim.devices())
            .ok_or(hipErrorInvalidContext)?;
        sim.set_current_device(device);
        Ok(())
    }))
}

/// # Safety
/// Takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipDeviceSynchronize() -> hipError_t {
    status(sim::get().and_then(|sim| {
        let device = sim.current_device()?;
        super::pool::release_caches(sim, device);
        Ok(())
    }))
}
