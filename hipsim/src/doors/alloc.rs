//! Doors that take device memory.

use super::{input, out, status, HipResult, Out};
use crate::sim::{self, Alloc, AllocKind, DevArray, Sim};
use hip_sys::sim::{array_bytes, linear_bytes, mipmapped_bytes, pitch_for};
use hip_sys::*;
use std::ffi::{c_uint, c_void};

extern "C" {
    /// C shim (`c/shim.c`): calls the exported `hipMalloc` through the PLT, as the real runtime
    /// can when one door is built on another.
    fn hipsim_shim_malloc_via_plt(ptr: *mut *mut c_void, size: usize) -> hipError_t;
}

/// `hipMalloc` on the current device: the one place linear device memory is created.
pub fn malloc(sim: &Sim, ptr: Out<*mut c_void>, size: usize) -> HipResult {
    let device = sim.current_device()?;
    if size == 0 {
        ptr.set(std::ptr::null_mut());
        return Ok(());
    }
    let bytes = linear_bytes(size).ok_or(hipErrorOutOfMemory)?;
    // Only the shard the block comes from is locked (see `crate::sim`), so threads scale.
    let addr = sim.take_device_memory(device, bytes, |shard, addr| {
        let linear = Alloc {
            bytes,
            device,
            kind: AllocKind::Linear,
        };
        shard.allocs.insert(addr, linear);
    })?;
    ptr.set(addr as *mut c_void);
    Ok(())
}

/// Allocates `size` bytes through the PLT-bound `hipMalloc` (so an audit hook sees a nested call).
fn malloc_via_plt(size: usize) -> HipResult<*mut c_void> {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: `p` is a valid out-pointer for the call; the shim only forwards to hipMalloc.
    let rc = unsafe { hipsim_shim_malloc_via_plt(&mut p, size) };
    if rc == hipSuccess {
        Ok(p)
    } else {
        Err(rc)
    }
}

/// # Safety
/// HIP contract: `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMalloc(ptr: *mut *mut c_void, size: usize) -> hipError_t {
    status(sim::get().and_then(|sim| malloc(sim, out!(ptr)?, size)))
}

/// # Safety
/// HIP contract: `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipExtMallocWithFlags(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let ptr = out!(ptr)?;
        if flags > hipDeviceMallocUncached {
            return Err(hipErrorInvalidValue);
        }
        malloc(sim, ptr, size)
    }))
}

/// # Safety
/// HIP contract: `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMallocManaged(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let ptr = out!(ptr)?;
        if flags != hipMemAttachGlobal && flags != hipMemAttachHost {
            return Err(hipErrorInvalidValue);
        }
        let device = sim.current_device()?;
        if size == 0 {
            ptr.set(std::ptr::null_mut());
            return Ok(());
        }
        let bytes = linear_bytes(size).ok_or(hipErrorOutOfMemory)?;
        // Managed memory is host-backed and migrates on demand: it is never charged to a
        // device, so it can exceed VRAM (what HIP_OVERSUBSCRIBE relies on).
        let addr = crate::memory::map_device(bytes).ok_or(hipErrorOutOfMemory)?;
        let mut shard = sim.shard_for(addr);
        shard.allocs.insert(
            addr,
            Alloc {
                bytes,
                device,
                kind: AllocKind::Managed,
            },
        );
        shard.managed_count += 1;
        shard.managed_bytes += bytes;
        ptr.set(addr as *mut c_void);
        Ok(())
    }))
}

fn pitched(pitch_out: &Out<usize>, width: usize, rows: usize) -> HipResult<*mut c_void> {
    let pitch = pitch_for(width).ok_or(hipErrorOutOfMemory)?;
    let bytes = pitch.checked_mul(rows).ok_or(hipErrorOutOfMemory)?;
    let p = if bytes == 0 {
        std::ptr::null_mut()
    } else {
        malloc_via_plt(bytes)?
    };
    pitch_out.set(pitch);
    Ok(p)
}

/// # Safety
/// HIP contract: `ptr` and `pitch` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMallocPitch(
    ptr: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    height: usize,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (ptr, pitch) = (out!(ptr)?, out!(pitch)?);
        sim.current_device()?;
        ptr.set(pitched(&pitch, width, height)?);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `dptr` and `pitch` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemAllocPitch(
    dptr: *mut hipDeviceptr_t,
    pitch: *mut usize,
    width_bytes: usize,
    height: usize,
    element_size_bytes: c_uint,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (dptr, pitch) = (out!(dptr)?, out!(pitch)?);
        if !matches!(element_size_bytes, 4 | 8 | 16) {
            return Err(hipErrorInvalidValue);
        }
        sim.current_device()?;
        dptr.set(pitched(&pitch, width_bytes, height)?);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `pitched_ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMalloc3D(
    pitched_ptr: *mut hipPitchedPtr,
    extent: hipExtent,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(pitched_ptr)?;
        sim.current_device()?;
        let rows = extent
            .height
            .checked_mul(extent.depth)
            .ok_or(hipErrorOutOfMemory)?;
        let mut pitch = 0usize;
        let p = pitched(&out!(&mut pitch as *mut usize)?, extent.width, rows)?;
        out.set(hipPitchedPtr {
            ptr: p,
            pitch,
            xsize: extent.width,
            ysize: extent.height,
        });
        Ok(())
    }))
}

/// Bytes per element of a channel descriptor (sum of channel bits, whole bytes only).
fn channel_bytes(desc: &hipChannelFormatDesc) -> HipResult<usize> {
    let bits = [desc.x, desc.y, desc.z, desc.w];
    if bits.iter().any(|&b| b < 0) {
        return Err(hipErrorInvalidValue);
    }
    let total: i64 = bits.iter().map(|&b| i64::from(b)).sum();
    if total == 0 || total % 8 != 0 {
        return Err(hipErrorInvalidValue);
    }
    Ok((total / 8) as usize)
}

fn format_bytes(format: hipArray_Format, channels: c_uint) -> HipResult<usize> {
    let per = array_format_bytes(format).ok_or(hipErrorInvalidValue)?;
    if !matches!(channels, 1 | 2 | 4) {
        return Err(hipErrorInvalidValue);
    }
    Ok(per * channels as usize)
}

/// Creates an array-like object of `bytes` on the current device and returns its handle.
fn new_array(sim: &Sim, bytes: Option<usize>, mipmapped: bool) -> HipResult<usize> {
    let device = sim.current_device()?;
    let bytes = bytes.ok_or(hipErrorOutOfMemory)?;
    let mut reg = sim.registry();
    let base = sim.take_device_memory(device, bytes, |_, _| {})?;
    let token = Box::new(0u64);
    let handle = sim::token_addr(&token);
    let array = DevArray {
        _token: token,
        base,
        bytes,
        device,
    };
    if mipmapped {
        reg.mipmaps.insert(handle, array);
    } else {
        reg.arrays.insert(handle, array);
    }
    Ok(handle)
}

/// # Safety
/// HIP contract: `array` is NULL or valid for writes, `desc` NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMallocArray(
    array: *mut hipArray_t,
    desc: *const hipChannelFormatDesc,
    width: usize,
    height: usize,
    _flags: c_uint,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (array, desc) = (out!(array)?, input!(desc)?);
        if width == 0 {
            return Err(hipErrorInvalidValue);
        }
        let elem = channel_bytes(&desc)?;
        let handle = new_array(sim, array_bytes(elem, width, height, 0), false)?;
        array.set(handle as hipArray_t);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `array` is NULL or valid for writes, `desc` NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMalloc3DArray(
    array: *mut hipArray_t,
    desc: *const hipChannelFormatDesc,
    extent: hipExtent,
    _flags: c_uint,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (array, desc) = (out!(array)?, input!(desc)?);
        if extent.width == 0 {
            return Err(hipErrorInvalidValue);
        }
        let elem = channel_bytes(&desc)?;
        let bytes = array_bytes(elem, extent.width, extent.height, extent.depth);
        array.set(new_array(sim, bytes, false)? as hipArray_t);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `array` is NULL or valid for writes, `desc` NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipArrayCreate(
    array: *mut hipArray_t,
    desc: *const HIP_ARRAY_DESCRIPTOR,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (array, desc) = (out!(array)?, input!(desc)?);
        if desc.Width == 0 {
            return Err(hipErrorInvalidValue);
        }
        let elem = format_bytes(desc.Format, desc.NumChannels)?;
        let bytes = array_bytes(elem, desc.Width, desc.Height, 0);
        array.set(new_array(sim, bytes, false)? as hipArray_t);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `array` is NULL or valid for writes, `desc` NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipArray3DCreate(
    array: *mut hipArray_t,
    desc: *const HIP_ARRAY3D_DESCRIPTOR,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (array, desc) = (out!(array)?, input!(desc)?);
        if desc.Width == 0 {
            return Err(hipErrorInvalidValue);
        }
        let elem = format_bytes(desc.Format, desc.NumChannels)?;
        let bytes = array_bytes(elem, desc.Width, desc.Height, desc.Depth);
        array.set(new_array(sim, bytes, false)? as hipArray_t);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `array` is NULL or valid for writes, `desc` NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMallocMipmappedArray(
    array: *mut hipMipmappedArray_t,
    desc: *const hipChannelFormatDesc,
    extent: hipExtent,
    num_levels: c_uint,
    _flags: c_uint,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (array, desc) = (out!(array)?, input!(desc)?);
        if extent.width == 0 {
            return Err(hipErrorInvalidValue);
        }
        let elem = channel_bytes(&desc)?;
        let bytes = mipmapped_bytes(elem, extent.width, extent.height, extent.depth, num_levels);
        array.set(new_array(sim, bytes, true)? as hipMipmappedArray_t);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `array` is NULL or valid for writes, `desc` NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMipmappedArrayCreate(
    array: *mut hipMipmappedArray_t,
    desc: *mut HIP_ARRAY3D_DESCRIPTOR,
    num_levels: c_uint,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (array, desc) = (out!(array)?, input!(desc as *const HIP_ARRAY3D_DESCRIPTOR)?);
        if desc.Width == 0 {
            return Err(hipErrorInvalidValue);
        }
        let elem = format_bytes(desc.Format, desc.NumChannels)?;
        let bytes = mipmapped_bytes(elem, desc.Width, desc.Height, desc.Depth, num_levels);
        array.set(new_array(sim, bytes, true)? as hipMipmappedArray_t);
        Ok(())
    }))
}
