//! Doors that give device memory back.
//!
//! A free releases exactly what its allocation reserved, on the device recorded at allocation
//! (whatever the calling thread's current device), and only if the runtime's free succeeded.
//! Unknown pointers and handles pass through untouched and release nothing.
//!
//! Pools follow the runtime's model (release threshold 0): `hipFreeAsync` of pool memory puts
//! the block in its pool's cache, still charged; `hipMemPoolTrimTo(pool, keep)` returns cached
//! blocks most recently freed first until at most `keep` bytes stay cached;
//! `hipMemPoolDestroy`, `hipDeviceSynchronize` and a synchronisation of a stream whose device
//! is known return them all. VMM: a handle's bytes return when it is released *and* every
//! mapping of it is unmapped, in either order.
#![allow(non_snake_case, non_upper_case_globals)]

use super::alloc::{default_pool, pool_device};
use super::{current_device, door, free_tracked, hook, real};
use crate::state::State;
use crate::symbols::{self, Sym};
use amvgpu_ledger::Entry;
use core::ffi::{c_int, c_void};
use core::sync::atomic::Ordering;
use hip_sys::*;

/// Releases a freed entry's bytes (or caches a pool block, see the module docs).
fn settle(state: &State, key: usize, entry: Entry) {
    if entry.door == door::POOL {
        if let Some(origin) = state.async_pool.remove(key) {
            let pool = origin.bytes as usize;
            let pool_alive = state.pools.get(pool).is_some()
                || default_pool(entry.device as c_int) == Some(pool);
            if pool_alive && cache(state, key, entry, pool) {
                return;
            }
        }
    }
    state.ledger.release(entry.device, entry.bytes);
}

/// Records a block its pool now caches; false if it could not be recorded.
fn cache(state: &State, key: usize, entry: Entry, pool: usize) -> bool {
    let seq = state.cache_seq.fetch_add(1, Ordering::Relaxed);
    let order = Entry {
        bytes: pool as u64,
        device: seq,
        door: 0,
    };
    if state.cache_order.insert(key, order).is_err() {
        return false;
    }
    if state.pool_cache.insert(key, entry).is_err() {
        state.cache_order.remove(key);
        return false;
    }
    state.pool_cache_used.store(true, Ordering::Relaxed);
    true
}

/// Which cached blocks a release concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cached {
    /// Those of one pool.
    Pool(usize),
    /// Those a synchronisation returns: every pool of the device whose release threshold is 0
    /// (a pool with a threshold keeps up to that much cached; the hook keeps all of it
    /// charged, erring on the safe side).
    Synchronised,
}

/// Returns cached blocks on `device` selected by `which`, most recently freed first, until at
/// most `keep` bytes of them stay cached. Returns the bytes released.
fn release_cached(state: &State, device: c_int, which: Cached, keep: u64) -> u64 {
    let Ok(device) = u32::try_from(device) else {
        return 0;
    };
    // (key, entry, pool, sequence). Cold path: a program-wide pool trim or synchronisation.
    let mut blocks: Vec<(usize, Entry, usize, u32)> = Vec::new();
    state.pool_cache.drain_device(device, |key, entry| {
        let (owner, seq) = state
            .cache_order
            .get(key)
            .map_or((0, 0), |o| (o.bytes as usize, o.device));
        blocks.push((key, entry, owner, seq));
    });
    let selects = |owner: usize| match which {
        Cached::Pool(pool) => owner == pool,
        Cached::Synchronised => !super::alloc::pool_retains_cache(state, owner),
    };
    let mut cached: u64 = blocks
        .iter()
        .filter(|b| selects(b.2))
        .map(|b| b.1.bytes)
        .sum();
    // Most recently freed first (wrapping sequence numbers compare by distance from now).
    let now = state.cache_seq.load(Ordering::Relaxed);
    blocks.sort_by_key(|b| now.wrapping_sub(b.3));
    let mut released = 0;
    for (key, entry, owner, _) in blocks {
        let selected = selects(owner);
        if selected && cached > keep {
            cached -= entry.bytes;
            released += entry.bytes;
            state.cache_order.remove(key);
            state.ledger.release(entry.device, entry.bytes);
        } else if state.pool_cache.insert(key, entry).is_err() {
            // Cannot keep tracking it: it stays charged in the ledger until the process ends.
            state.cache_order.remove(key);
        }
    }
    released
}

/// Returns every pool cache on `device` to the device (the runtime's trim to 0 of each pool
/// that caches something), mirroring it in the ledger. Used when a stream-ordered allocation
/// is refused: cached blocks are invisible to the program, so giving them back first is what
/// the runtime's own release threshold would do. Returns the bytes released.
pub(crate) fn trim_device_caches(state: &State, device: c_int) -> u64 {
    let Some(addr) = symbols::real(Sym::hipMemPoolTrimTo) else {
        return 0;
    };
    // SAFETY: the runtime's hipMemPoolTrimTo has this signature.
    let trim: hipMemPoolTrimTo_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
    let Ok(dev) = u32::try_from(device) else {
        return 0;
    };
    let mut pools: Vec<usize> = Vec::new();
    let mut blocks: Vec<(usize, Entry)> = Vec::new();
    state
        .pool_cache
        .drain_device(dev, |key, entry| blocks.push((key, entry)));
    for &(key, entry) in &blocks {
        if let Some(order) = state.cache_order.get(key) {
            if !pools.contains(&(order.bytes as usize)) {
                pools.push(order.bytes as usize);
            }
        }
        let _ = state.pool_cache.insert(key, entry);
    }
    let mut released = 0;
    for pool in pools {
        // SAFETY: `pool` is a pool the runtime handed out; trimming to 0 returns its cache.
        if unsafe { trim(pool as hipMemPool_t, 0) } == hipSuccess {
            released += release_cached(state, device, Cached::Pool(pool), 0);
        }
    }
    released
}

/// `hipFree`.
///
/// # Safety
/// HIP's contract for `hipFree`.
pub unsafe extern "C" fn hipFree(ptr: *mut c_void) -> hipError_t {
    let real = real!(hipFree: hipFree_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr) };
    };
    let state = active.state;
    // SAFETY: forwarding the caller's argument.
    let (rc, freed) = free_tracked(state, ptr as usize, || unsafe { real(ptr) });
    if let Some(entry) = freed {
        if entry.door == door::POOL {
            state.async_pool.remove(ptr as usize);
        }
        state.ledger.release(entry.device, entry.bytes);
    }
    rc
}

/// `hipFreeAsync`: pool memory goes to its pool's cache (still charged), other memory is freed.
///
/// # Safety
/// HIP's contract for `hipFreeAsync`.
pub unsafe extern "C" fn hipFreeAsync(ptr: *mut c_void, stream: hipStream_t) -> hipError_t {
    let real = real!(hipFreeAsync: hipFreeAsync_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr, stream) };
    };
    let state = active.state;
    // SAFETY: forwarding the caller's arguments.
    let (rc, freed) = free_tracked(state, ptr as usize, || unsafe { real(ptr, stream) });
    if let Some(entry) = freed {
        settle(state, ptr as usize, entry);
    }
    rc
}

/// A free door for arrays and mipmapped arrays.
fn free_key(key: usize, call: impl FnOnce() -> hipError_t) -> hipError_t {
    let Some(active) = hook() else {
        return call();
    };
    let (rc, freed) = free_tracked(active.state, key, call);
    if let Some(entry) = freed {
        active.state.ledger.release(entry.device, entry.bytes);
    }
    rc
}

/// `hipFreeArray`.
///
/// # Safety
/// HIP's contract for `hipFreeArray`.
pub unsafe extern "C" fn hipFreeArray(array: hipArray_t) -> hipError_t {
    let real = real!(hipFreeArray: hipFreeArray_fn);
    // SAFETY: forwarding the caller's argument.
    free_key(array as usize, || unsafe { real(array) })
}

/// `hipArrayDestroy`.
///
/// # Safety
/// HIP's contract for `hipArrayDestroy`.
pub unsafe extern "C" fn hipArrayDestroy(array: hipArray_t) -> hipError_t {
    let real = real!(hipArrayDestroy: hipArrayDestroy_fn);
    // SAFETY: forwarding the caller's argument.
    free_key(array as usize, || unsafe { real(array) })
}

/// `hipFreeMipmappedArray`.
///
/// # Safety
/// HIP's contract for `hipFreeMipmappedArray`.
pub unsafe extern "C" fn hipFreeMipmappedArray(array: hipMipmappedArray_t) -> hipError_t {
    let real = real!(hipFreeMipmappedArray: hipFreeMipmappedArray_fn);
    // SAFETY: forwarding the caller's argument.
    free_key(array as usize, || unsafe { real(array) })
}

/// `hipMipmappedArrayDestroy`.
///
/// # Safety
/// HIP's contract for `hipMipmappedArrayDestroy`.
pub unsafe extern "C" fn hipMipmappedArrayDestroy(array: hipMipmappedArray_t) -> hipError_t {
    let real = real!(hipMipmappedArrayDestroy: hipMipmappedArrayDestroy_fn);
    // SAFETY: forwarding the caller's argument.
    free_key(array as usize, || unsafe { real(array) })
}

/// Returns a VMM handle's bytes once it is released and unmapped everywhere.
fn finish_handle_if_done(state: &State, handle: usize) {
    let Some(refs) = state.vmm_refs.get(handle) else {
        return;
    };
    if refs.bytes == 0 && refs.door == 1 {
        state.vmm_refs.remove(handle);
        if let Some(entry) = state.live.remove(handle) {
            state.ledger.release(entry.device, entry.bytes);
        }
    }
}

/// `hipMemRelease`.
///
/// # Safety
/// HIP's contract for `hipMemRelease`.
pub unsafe extern "C" fn hipMemRelease(handle: hipMemGenericAllocationHandle_t) -> hipError_t {
    let real = real!(hipMemRelease: hipMemRelease_fn);
    // SAFETY: forwarding the caller's argument unchanged.
    let rc = unsafe { real(handle) };
    let Some(active) = hook() else {
        return rc;
    };
    let state = active.state;
    let key = handle as usize;
    if rc != hipSuccess {
        return rc;
    }
    let Some(owner) = state.live.get(key) else {
        return rc;
    };
    let refs = state.vmm_refs.get(key).unwrap_or(Entry {
        bytes: 0,
        device: owner.device,
        door: 0,
    });
    if state
        .vmm_refs
        .insert(key, Entry { door: 1, ..refs })
        .is_err()
    {
        // Cannot remember the pending release: count the bytes as returned now.
        state.vmm_refs.remove(key);
        if let Some(entry) = state.live.remove(key) {
            state.ledger.release(entry.device, entry.bytes);
        }
        return rc;
    }
    finish_handle_if_done(state, key);
    rc
}

/// `hipMemUnmap`.
///
/// # Safety
/// HIP's contract for `hipMemUnmap`.
pub unsafe extern "C" fn hipMemUnmap(ptr: *mut c_void, size: usize) -> hipError_t {
    let real = real!(hipMemUnmap: hipMemUnmap_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(ptr, size) };
    let Some(active) = hook() else {
        return rc;
    };
    let state = active.state;
    if rc != hipSuccess {
        return rc;
    }
    let Some(mapping) = state.vmm_maps.remove(ptr as usize) else {
        return rc;
    };
    let handle = mapping.bytes as usize;
    if let Some(refs) = state.vmm_refs.get(handle) {
        let _ = state.vmm_refs.insert(
            handle,
            Entry {
                bytes: refs.bytes.saturating_sub(1),
                ..refs
            },
        );
        finish_handle_if_done(state, handle);
    }
    rc
}

/// `hipMemPoolTrimTo`.
///
/// # Safety
/// HIP's contract for `hipMemPoolTrimTo`.
pub unsafe extern "C" fn hipMemPoolTrimTo(
    pool: hipMemPool_t,
    min_bytes_to_hold: usize,
) -> hipError_t {
    let real = real!(hipMemPoolTrimTo: hipMemPoolTrimTo_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(pool, min_bytes_to_hold) };
    let Some(active) = hook() else {
        return rc;
    };
    if rc == hipSuccess {
        if let Some(device) = pool_device(active.state, pool as usize) {
            release_cached(
                active.state,
                device,
                Cached::Pool(pool as usize),
                min_bytes_to_hold as u64,
            );
        }
    }
    rc
}

/// `hipMemPoolDestroy`: its cache returns to the device.
///
/// # Safety
/// HIP's contract for `hipMemPoolDestroy`.
pub unsafe extern "C" fn hipMemPoolDestroy(pool: hipMemPool_t) -> hipError_t {
    let real = real!(hipMemPoolDestroy: hipMemPoolDestroy_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's argument unchanged.
        return unsafe { real(pool) };
    };
    let device = pool_device(active.state, pool as usize);
    // SAFETY: forwarding the caller's argument unchanged.
    let rc = unsafe { real(pool) };
    if rc == hipSuccess {
        if let Some(device) = device {
            release_cached(active.state, device, Cached::Pool(pool as usize), 0);
        }
        active.state.pools.remove(pool as usize);
    }
    rc
}

/// `hipDeviceSynchronize`: the runtime returns every pool cache of the current device.
///
/// # Safety
/// HIP's contract for `hipDeviceSynchronize`.
pub unsafe extern "C" fn hipDeviceSynchronize() -> hipError_t {
    let real = real!(hipDeviceSynchronize: hipDeviceSynchronize_fn);
    // SAFETY: no arguments.
    let rc = unsafe { real() };
    let Some(active) = hook() else {
        return rc;
    };
    if rc == hipSuccess && active.state.pool_cache_may_hold() {
        if let Ok(device) = current_device() {
            release_cached(active.state, device, Cached::Synchronised, 0);
        }
    }
    rc
}

/// `hipStreamSynchronize`: as `hipDeviceSynchronize` for the stream's device, when the hook
/// knows which device that is (see `stream`); otherwise the mirror keeps the blocks charged
/// until a trim, a refusal-driven trim, a device synchronisation or a reset.
///
/// # Safety
/// HIP's contract for `hipStreamSynchronize`.
pub unsafe extern "C" fn hipStreamSynchronize(stream: hipStream_t) -> hipError_t {
    let real = real!(hipStreamSynchronize: hipStreamSynchronize_fn);
    // SAFETY: forwarding the caller's argument unchanged.
    let rc = unsafe { real(stream) };
    let Some(active) = hook() else {
        return rc;
    };
    if rc == hipSuccess && active.state.pool_cache_may_hold() {
        // Only a device the hook knows for sure: releasing another device's mirror would
        // under-count.
        if let Ok((device, true)) = super::stream::stream_device(stream) {
            release_cached(active.state, device, Cached::Synchronised, 0);
        }
    }
    rc
}

/// `hipDeviceReset`: the runtime frees everything this process holds on the current device.
///
/// # Safety
/// HIP's contract for `hipDeviceReset`.
pub unsafe extern "C" fn hipDeviceReset() -> hipError_t {
    let real = real!(hipDeviceReset: hipDeviceReset_fn);
    let Some(active) = hook() else {
        // SAFETY: no arguments.
        return unsafe { real() };
    };
    let state = active.state;
    let device = current_device();
    // SAFETY: no arguments.
    let rc = unsafe { real() };
    let (hipSuccess, Ok(device)) = (rc, device) else {
        return rc;
    };
    let Ok(device) = u32::try_from(device) else {
        return rc;
    };
    state.live.drain_device(device, |key, entry| {
        state.async_pool.remove(key);
        state.ledger.release(entry.device, entry.bytes);
    });
    state.pool_cache.drain_device(device, |key, entry| {
        state.cache_order.remove(key);
        state.ledger.release(entry.device, entry.bytes);
    });
    state.async_pool.drain_device(device, |_, _| {});
    state.vmm_maps.drain_device(device, |_, _| {});
    state.vmm_refs.drain_device(device, |_, _| {});
    state.pools.drain_device(device, |_, _| {});
    state.streams.drain_device(device, |_, _| {});
    rc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::tests::state_with_limit;

    fn cached_block(state: &State, key: usize, bytes: u64, pool: usize) {
        state
            .ledger
            .reserve(0, bytes, 1 << 30)
            .expect("within the limit");
        let entry = Entry {
            bytes,
            device: 0,
            door: door::POOL,
        };
        assert!(cache(state, key, entry, pool));
    }

    #[test]
    fn trims_return_the_most_recently_freed_blocks_first() {
        let state = state_with_limit(1 << 30);
        let (pool, other) = (0x100, 0x200);
        cached_block(&state, 0x1000, 1 << 20, pool); // oldest
        cached_block(&state, 0x2000, 2 << 20, pool);
        cached_block(&state, 0x3000, 4 << 20, other);
        cached_block(&state, 0x4000, 3 << 20, pool); // newest

        // Keep at most 2 MiB of `pool`'s 6: the newest (3 MiB) goes, then the 2 MiB block,
        // leaving the oldest 1 MiB.
        let released = release_cached(&state, 0, Cached::Pool(pool), 2 << 20);
        assert_eq!(released, 5 << 20);
        assert!(state.pool_cache.get(0x1000).is_some());
        assert!(state.pool_cache.get(0x2000).is_none());
        assert!(state.pool_cache.get(0x4000).is_none());
        assert!(
            state.pool_cache.get(0x3000).is_some(),
            "another pool is untouched"
        );
        assert_eq!(state.ledger.container_usage(0), 5 << 20);
        // A synchronisation returns the rest of every pool without a threshold.
        assert_eq!(release_cached(&state, 0, Cached::Synchronised, 0), 5 << 20);
        assert_eq!(state.ledger.container_usage(0), 0);
    }

    #[test]
    fn a_vmm_handle_returns_only_when_released_and_unmapped() {
        let state = state_with_limit(1 << 30);
        let handle = 0xa000;
        state
            .ledger
            .reserve(0, 2 << 20, 1 << 30)
            .expect("within the limit");
        let owner = Entry {
            bytes: 2 << 20,
            device: 0,
            door: door::VMM,
        };
        state.live.insert(handle, owner).expect("tracker memory");
        let refs = |count: u64, released: u8| Entry {
            bytes: count,
            device: 0,
            door: released,
        };
        // Mapped once, then released: still charged.
        state
            .vmm_refs
            .insert(handle, refs(1, 1))
            .expect("tracker memory");
        finish_handle_if_done(&state, handle);
        assert_eq!(state.ledger.container_usage(0), 2 << 20);
        // The last mapping goes: now it returns.
        state
            .vmm_refs
            .insert(handle, refs(0, 1))
            .expect("tracker memory");
        finish_handle_if_done(&state, handle);
        assert_eq!(state.ledger.container_usage(0), 0);
        assert!(state.live.get(handle).is_none());
    }
}
