//! Virtual memory management: physical handles, reservations, mappings.
//!
//! hipMemCreate charges the device at once. The bytes come back only when the handle has been
//! released (hipMemRelease) AND every mapping of it is gone (hipMemUnmap), in either order, as
//! on real HIP/CUDA. Each handle is a memfd, so two mappings of one handle share bytes.

use super::{input, out, status, HipResult};
use crate::memory;
use crate::sim::{self, Mapping, Sim, VmmHandle};
use hip_sys::sim::VMM_GRANULARITY;
use hip_sys::*;
use std::ffi::{c_ulonglong, c_void};

/// Reads a `hipMemAllocationProp` in the layout of the ABI this build imitates (ROCm 5 put the
/// fields in another order) and returns the device it names.
fn prop_device(sim: &Sim, prop: *const hipMemAllocationProp) -> HipResult<usize> {
    let (type_, location) = if crate::ABI_MAJOR == 5 {
        let p: hipMemAllocationProp_R5 = input!(prop as *const hipMemAllocationProp_R5)?;
        (p.type_, p.location)
    } else {
        let p: hipMemAllocationProp = input!(prop)?;
        (p.type_, p.location)
    };
    if type_ != hipMemAllocationTypePinned || location.type_ != hipMemLocationTypeDevice {
        return Err(hipErrorInvalidValue);
    }
    sim.device(location.id)
}

fn granular(size: usize) -> bool {
    size != 0 && size % VMM_GRANULARITY == 0
}

/// # Safety
/// HIP contract: `handle` is NULL or valid for writes, `prop` NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemCreate(
    handle: *mut hipMemGenericAllocationHandle_t,
    size: usize,
    prop: *const hipMemAllocationProp,
    flags: c_ulonglong,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(handle)?;
        let device = prop_device(sim, prop)?;
        if flags != 0 || !granular(size) {
            return Err(hipErrorInvalidValue);
        }
        if !sim.usage.reserve(device, size as u64) {
            return Err(hipErrorOutOfMemory);
        }
        let Some(fd) = memory::create_memfd(size) else {
            sim.usage.release(device, size as u64);
            return Err(hipErrorOutOfMemory);
        };
        let token = Box::new(0u64);
        let key = sim::token_addr(&token);
        sim.registry().vmm.insert(
            key,
            VmmHandle {
                _token: token,
                fd,
                bytes: size,
                device,
                released: false,
                mappings: 0,
            },
        );
        out.set(key as hipMemGenericAllocationHandle_t);
        Ok(())
    }))
}

/// Drops a handle that is released and unmapped, returning its bytes to the device.
fn reap(sim: &Sim, reg: &mut sim::Registry, key: usize) {
    let done = reg
        .vmm
        .get(&key)
        .is_some_and(|h| h.released && h.mappings == 0);
    if done {
        let h = reg.vmm.remove(&key).expect("checked above");
        memory::close_fd(h.fd);
        sim.usage.release(h.device, h.bytes as u64);
    }
}

/// # Safety
/// HIP contract (the handle is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemRelease(
    handle: hipMemGenericAllocationHandle_t,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let key = handle as usize;
        let mut reg = sim.registry();
        let h = reg
            .vmm
            .get_mut(&key)
            .filter(|h| !h.released)
            .ok_or(hipErrorInvalidValue)?;
        h.released = true;
        reap(sim, &mut reg, key);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `ptr` is NULL or valid for writes (`addr` is a hint and ignored).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemAddressReserve(
    ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    _addr: *mut c_void,
    flags: c_ulonglong,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(ptr)?;
        if flags != 0 || !granular(size) || (alignment != 0 && !alignment.is_power_of_two()) {
            return Err(hipErrorInvalidValue);
        }
        let align = alignment.max(VMM_GRANULARITY);
        let base = memory::map_aligned(size, align, libc::PROT_NONE).ok_or(hipErrorOutOfMemory)?;
        sim.registry().reservations.insert(base, size);
        out.set(base as *mut c_void);
        Ok(())
    }))
}

/// # Safety
/// HIP contract (the range is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemAddressFree(
    ptr: *mut c_void,
    size: usize,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let base = ptr as usize;
        let mut reg = sim.registry();
        if reg.reservations.get(&base) != Some(&size) {
            return Err(hipErrorInvalidValue);
        }
        if reg.mappings.range(base..base + size).next().is_some() {
            return Err(hipErrorInvalidValue); // still mapped: unmap first
        }
        reg.reservations.remove(&base);
        drop(reg);
        memory::unmap(base, size);
        Ok(())
    }))
}

fn inside_reservation(reg: &sim::Registry, addr: usize, size: usize) -> bool {
    reg.reservations
        .range(..=addr)
        .next_back()
        .is_some_and(|(&base, &len)| addr + size <= base + len)
}

/// # Safety
/// HIP contract (the range and handle are only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemMap(
    ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: hipMemGenericAllocationHandle_t,
    flags: c_ulonglong,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (addr, key) = (ptr as usize, handle as usize);
        if flags != 0
            || !granular(size)
            || offset % VMM_GRANULARITY != 0
            || addr.checked_add(size).is_none()
        {
            return Err(hipErrorInvalidValue);
        }
        let mut reg = sim.registry();
        let h = reg
            .vmm
            .get(&key)
            .filter(|h| !h.released)
            .ok_or(hipErrorInvalidValue)?;
        if offset.checked_add(size).map_or(true, |end| end > h.bytes) {
            return Err(hipErrorInvalidValue);
        }
        let fd = h.fd;
        if !inside_reservation(&reg, addr, size) {
            return Err(hipErrorInvalidValue);
        }
        let overlaps = reg
            .mappings
            .range(..addr + size)
            .next_back()
            .is_some_and(|(&b, m)| b + m.bytes > addr);
        if overlaps {
            return Err(hipErrorAlreadyMapped);
        }
        if !memory::map_handle_at(addr, size, fd, offset) {
            return Err(hipErrorOutOfMemory);
        }
        reg.mappings.insert(
            addr,
            Mapping {
                bytes: size,
                handle: key,
                prot: libc::PROT_NONE,
            },
        );
        reg.vmm.get_mut(&key).expect("checked above").mappings += 1;
        Ok(())
    }))
}

/// # Safety
/// HIP contract (the range is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemUnmap(ptr: *mut c_void, size: usize) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let addr = ptr as usize;
        let end = addr.checked_add(size).ok_or(hipErrorInvalidValue)?;
        let mut reg = sim.registry();
        let victims: Vec<(usize, Mapping)> = reg
            .mappings
            .range(addr..end)
            .map(|(&b, &m)| (b, m))
            .collect();
        // Only whole mappings can be unmapped, and the range must hold at least one.
        if victims.is_empty() || victims.iter().any(|(b, m)| b + m.bytes > end) {
            return Err(hipErrorInvalidValue);
        }
        for (base, m) in victims {
            reg.mappings.remove(&base);
            memory::reset_to_reserved(base, m.bytes);
            if let Some(h) = reg.vmm.get_mut(&m.handle) {
                h.mappings -= 1;
            }
            reap(sim, &mut reg, m.handle);
        }
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `desc` is NULL or valid for reads of `count` descriptors.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemSetAccess(
    ptr: *mut c_void,
    size: usize,
    desc: *const hipMemAccessDesc,
    count: usize,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        if desc.is_null() || count == 0 {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: HIP contract: `desc` points at `count` readable descriptors (non-null checked).
        let descs = unsafe { std::slice::from_raw_parts(desc, count) };
        let mut prot = libc::PROT_NONE;
        for d in descs {
            if d.location.type_ != hipMemLocationTypeDevice {
                return Err(hipErrorInvalidValue);
            }
            sim.device(d.location.id)?;
            prot |= match d.flags {
                hipMemAccessFlagsProtNone => libc::PROT_NONE,
                hipMemAccessFlagsProtRead => libc::PROT_READ,
                hipMemAccessFlagsProtReadWrite => libc::PROT_READ | libc::PROT_WRITE,
                _ => return Err(hipErrorInvalidValue),
            };
        }
        let addr = ptr as usize;
        let end = addr.checked_add(size).ok_or(hipErrorInvalidValue)?;
        let mut reg = sim.registry();
        // The range must be exactly covered by mappings.
        let mut cursor = addr;
        let mut covered = Vec::new();
        while cursor < end {
            let (&base, m) = reg
                .mappings
                .range(..=cursor)
                .next_back()
                .ok_or(hipErrorInvalidValue)?;
            if cursor != base || base + m.bytes > end {
                return Err(hipErrorInvalidValue);
            }
            covered.push(base);
            cursor = base + m.bytes;
        }
        if covered.is_empty() || !memory::protect(addr, size, prot) {
            return Err(hipErrorInvalidValue);
        }
        for base in covered {
            reg.mappings.get_mut(&base).expect("collected above").prot = prot;
        }
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `granularity` is NULL or valid for writes, `prop` NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemGetAllocationGranularity(
    granularity: *mut usize,
    prop: *const hipMemAllocationProp,
    option: hipMemAllocationGranularity_flags,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(granularity)?;
        prop_device(sim, prop)?;
        if option != hipMemAllocationGranularityMinimum
            && option != hipMemAllocationGranularityRecommended
        {
            return Err(hipErrorInvalidValue);
        }
        out.set(VMM_GRANULARITY);
        Ok(())
    }))
}
