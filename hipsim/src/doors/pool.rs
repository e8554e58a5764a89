//! Stream-ordered allocation and memory pools.
//!
//! Model (documented in the crate docs): every pool has release threshold 0, and streams are
//! synchronous. hipFreeAsync of pool memory keeps the block in the pool's cache, still charged
//! to the device; hipMallocAsync reuses a cached block of exactly the same rounded size; a
//! synchronisation (hipDeviceSynchronize, hipStreamSynchronize) returns every cached block of
//! that device, and hipMemPoolTrimTo(pool, keep) returns cached blocks (most recently freed
//! first) until at most `keep` bytes stay cached.

use super::{input, out, status, HipResult, Out};
use crate::sim::{self, Alloc, AllocKind, Pool, Sim};
use hip_sys::sim::linear_bytes;
use hip_sys::*;
use std::ffi::{c_int, c_void};

/// The device a stream runs on (`NULL` is the current device's default stream).
pub fn stream_device(sim: &Sim, stream: hipStream_t) -> HipResult<usize> {
    if stream.is_null() {
        return sim.current_device();
    }
    sim.registry()
        .streams
        .get(&(stream as usize))
        .map(|s| s.device)
        .ok_or(hipErrorInvalidHandle)
}

fn pool_alloc(sim: &Sim, ptr: Out<*mut c_void>, size: usize, pool: usize) -> HipResult {
    if size == 0 {
        ptr.set(std::ptr::null_mut());
        return Ok(());
    }
    let bytes = linear_bytes(size).ok_or(hipErrorOutOfMemory)?;
    let mut reg = sim.registry();
    let p = reg.pools.get_mut(&pool).ok_or(hipErrorInvalidValue)?;
    let device = p.device;
    let alloc = Alloc {
        bytes,
        device,
        kind: AllocKind::Pool(pool),
    };
    let addr = match p.cache.iter().rposition(|&(_, b)| b == bytes) {
        Some(i) => {
            let addr = p.cache.swap_remove(i).0;
            sim.shard_for(addr).allocs.insert(addr, alloc);
            addr
        }
        None => sim.take_device_memory(device, bytes, |shard, addr| {
            shard.allocs.insert(addr, alloc);
        })?,
    };
    drop(reg);
    ptr.set(addr as *mut c_void);
    Ok(())
}

/// Returns every cached block of `device`'s pools to the device (a synchronisation point).
pub fn release_caches(sim: &Sim, device: usize) {
    let mut reg = sim.registry();
    let blocks: Vec<(usize, usize)> = reg
        .pools
        .values_mut()
        .filter(|p| p.device == device)
        .flat_map(|p| std::mem::take(&mut p.cache))
        .collect();
    for (base, bytes) in blocks {
        sim.give_back_device_memory(device, base, bytes);
    }
}

/// # Safety
/// HIP contract: `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMallocAsync(
    ptr: *mut *mut c_void,
    size: usize,
    stream: hipStream_t,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let ptr = out!(ptr)?;
        let device = stream_device(sim, stream)?;
        let pool = sim.registry().default_pools[device];
        pool_alloc(sim, ptr, size, pool)
    }))
}

/// # Safety
/// HIP contract: `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMallocFromPoolAsync(
    ptr: *mut *mut c_void,
    size: usize,
    pool: hipMemPool_t,
    stream: hipStream_t,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let ptr = out!(ptr)?;
        stream_device(sim, stream)?;
        pool_alloc(sim, ptr, size, pool as usize)
    }))
}

/// # Safety
/// HIP contract (`ptr` is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipFreeAsync(
    ptr: *mut c_void,
    stream: hipStream_t,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        stream_device(sim, stream)?;
        if ptr.is_null() {
            return Ok(());
        }
        let addr = ptr as usize;
        let mut reg = sim.registry();
        let mut shard = sim.shard_for(addr);
        let alloc = *shard.allocs.get(&addr).ok_or(hipErrorInvalidValue)?;
        match alloc.kind {
            AllocKind::Pool(pool) => {
                shard.allocs.remove(&addr);
                drop(shard);
                match reg.pools.get_mut(&pool) {
                    Some(p) => p.cache.push((addr, alloc.bytes)),
                    None => {
                        // Its pool was destroyed meanwhile: nothing left to cache it in.
                        sim.give_back_device_memory(alloc.device, addr, alloc.bytes);
                    }
                }
                Ok(())
            }
            _ => {
                drop(shard);
                drop(reg);
                super::free::free(sim, ptr)
            }
        }
    }))
}

/// # Safety
/// HIP contract (the pool handle is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemPoolTrimTo(
    pool: hipMemPool_t,
    keep: usize,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let mut reg = sim.registry();
        let p = reg
            .pools
            .get_mut(&(pool as usize))
            .ok_or(hipErrorInvalidValue)?;
        let device = p.device;
        let mut cached: usize = p.cache.iter().map(|&(_, b)| b).sum();
        let mut trimmed = Vec::new();
        while cached > keep {
            let Some(block) = p.cache.pop() else { break };
            cached -= block.1;
            trimmed.push(block);
        }
        for (base, bytes) in trimmed {
            sim.give_back_device_memory(device, base, bytes);
        }
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `pool` is NULL or valid for writes, `props` NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemPoolCreate(
    pool: *mut hipMemPool_t,
    props: *const hipMemPoolProps,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let (pool, props) = (out!(pool)?, input!(props)?);
        if props.allocType != hipMemAllocationTypePinned
            || props.location.type_ != hipMemLocationTypeDevice
        {
            return Err(hipErrorInvalidValue);
        }
        let device = sim.device(props.location.id)?;
        let token = Box::new(0u64);
        let handle = sim::token_addr(&token);
        sim.registry().pools.insert(
            handle,
            Pool {
                _token: token,
                device,
                is_default: false,
                cache: Vec::new(),
            },
        );
        pool.set(handle as hipMemPool_t);
        Ok(())
    }))
}

/// # Safety
/// HIP contract (the pool handle is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipMemPoolDestroy(pool: hipMemPool_t) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let mut reg = sim.registry();
        match reg.pools.get(&(pool as usize)) {
            None => return Err(hipErrorInvalidValue),
            Some(p) if p.is_default => return Err(hipErrorInvalidValue),
            Some(_) => {}
        }
        let p = reg.pools.remove(&(pool as usize)).expect("checked above");
        for (base, bytes) in p.cache {
            sim.give_back_device_memory(p.device, base, bytes);
        }
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `pool` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipDeviceGetDefaultMemPool(
    pool: *mut hipMemPool_t,
    device: c_int,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let pool = out!(pool)?;
        let device = sim.device(device)?;
        pool.set(sim.registry().default_pools[device] as hipMemPool_t);
        Ok(())
    }))
}
