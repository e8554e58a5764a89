//! Doors that give device memory back.

use super::status;
use crate::arena::shard_of;
use crate::sim::{self, AllocKind, Sim, SHARDS};
use hip_sys::*;
use std::ffi::c_void;

/// Frees an address-keyed allocation (`hipFree`, and `hipFreeAsync` of non-pool memory).
pub fn free(sim: &Sim, ptr: *mut c_void) -> Result<(), hipError_t> {
    sim.current_device()?; // a machine without devices refuses even hipFree(NULL), as ROCm does
    if ptr.is_null() {
        return Ok(());
    }
    let addr = ptr as usize;
    // Only the allocation's shard is locked (see `crate::sim`), so threads scale.
    let mut shard = sim.shard_for(addr);
    let alloc = shard.allocs.remove(&addr).ok_or(hipErrorInvalidValue)?;
    match alloc.kind {
        AllocKind::Managed => {
            shard.managed_count -= 1;
            shard.managed_bytes -= alloc.bytes;
            drop(shard);
            crate::memory::unmap(addr, alloc.bytes);
        }
        AllocKind::Linear | AllocKind::Pool(_) => {
            sim.unplace_in(&mut shard, alloc.device, addr, alloc.bytes);
            drop(shard);
            sim.usage.release(alloc.device, alloc.bytes as u64);
        }
    }
    Ok(())
}

/// # Safety
/// HIP contract (no pointer is dereferenced: `ptr` is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipFree(ptr: *mut c_void) -> hipError_t {
    status(sim::get().and_then(|sim| free(sim, ptr)))
}

fn free_array(handle: usize, mipmapped: bool) -> hipError_t {
    status(sim::get().and_then(|sim| {
        if handle == 0 {
            return Ok(());
        }
        let mut reg = sim.registry();
        let table = if mipmapped {
            &mut reg.mipmaps
        } else {
            &mut reg.arrays
        };
        let array = table.remove(&handle).ok_or(hipErrorInvalidValue)?;
        drop(reg);
        sim.give_back_device_memory(array.device, array.base, array.bytes);
        Ok(())
    }))
}

/// # Safety
/// HIP contract (the handle is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipFreeArray(array: hipArray_t) -> hipError_t {
    free_array(array as usize, false)
}

/// # Safety
/// HIP contract (the handle is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipArrayDestroy(array: hipArray_t) -> hipError_t {
    free_array(array as usize, false)
}

/// # Safety
/// HIP contract (the handle is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipFreeMipmappedArray(
    array: hipMipmappedArray_t,
) -> hipError_t {
    free_array(array as usize, true)
}

/// # Safety
/// HIP contract (the handle is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMipmappedArrayDestroy(
    array: hipMipmappedArray_t,
) -> hipError_t {
    free_array(array as usize, true)
}

/// Frees everything this process holds on `device` (hipDeviceReset).
pub fn reset_device(sim: &Sim, device: usize) {
    // The registry and every shard, so that the device is seen empty at one instant.
    let mut reg = sim.registry();
    let mut shards = sim.all_shards();
    let mut give_back = Vec::new();
    let mut unmap_only = Vec::new();
    for shard in shards.iter_mut() {
        let mut managed = (0, 0);
        shard.allocs.retain(|&base, a| {
            if a.device != device {
                return true;
            }
            if a.kind == AllocKind::Managed {
                unmap_only.push((base, a.bytes));
                managed = (managed.0 + 1, managed.1 + a.bytes);
            } else {
                give_back.push((base, a.bytes));
            }
            false
        });
        shard.managed_count -= managed.0;
        shard.managed_bytes -= managed.1;
    }
    let reg_ref = &mut *reg;
    for table in [&mut reg_ref.arrays, &mut reg_ref.mipmaps] {
        table.retain(|_, a| {
            if a.device == device {
                give_back.push((a.base, a.bytes));
                false
            } else {
                true
            }
        });
    }
    for pool in reg.pools.values_mut().filter(|p| p.device == device) {
        give_back.append(&mut pool.cache);
    }
    reg.pools.retain(|_, p| p.device != device || p.is_default);
    reg.streams.retain(|_, s| s.device != device);
    // VMM: unmap every mapping of this device's handles and release the handles.
    let doomed: Vec<usize> = reg
        .vmm
        .iter()
        .filter(|(_, h)| h.device == device)
        .map(|(&k, _)| k)
        .collect();
    let mapped: Vec<(usize, usize)> = reg
        .mappings
        .iter()
        .filter(|(_, m)| doomed.contains(&m.handle))
        .map(|(&b, m)| (b, m.bytes))
        .collect();
    for (base, bytes) in &mapped {
        reg.mappings.remove(base);
        crate::memory::reset_to_reserved(*base, *bytes);
    }
    let mut vmm_bytes = 0usize;
    for key in doomed {
        if let Some(h) = reg.vmm.remove(&key) {
            crate::memory::close_fd(h.fd);
            vmm_bytes += h.bytes;
        }
    }
    for (base, bytes) in give_back {
        let shard = &mut shards[shard_of(base, SHARDS)];
        sim.unplace_in(shard, device, base, bytes);
        sim.usage.release(device, bytes as u64);
    }
    sim.reset_small_if_empty(&mut shards, device);
    drop(shards);
    drop(reg);
    for (base, bytes) in unmap_only {
        crate::memory::unmap(base, bytes);
    }
    sim.usage.release(device, vmm_bytes as u64);
}

/// # Safety
/// Takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipDeviceReset() -> hipError_t {
    status(sim::get().and_then(|sim| {
        let device = sim.current_device()?;
        reset_device(sim, device);
        Ok(())
    }))
}
