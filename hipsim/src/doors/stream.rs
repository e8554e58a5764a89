//! Streams (synchronous in the simulator).

use super::{out, status};
use crate::sim::{self, Sim, Stream};
use hip_sys::*;

fn create(sim: &Sim, cu_mask: Option<Vec<u32>>) -> Result<hipStream_t, hipError_t> {
    let device = sim.current_device()?;
    // Outside the registry lock: the HSA library (or a hook in front of it) may take its own.
    let queue = crate::hsa::create_queue(device);
    let token = Box::new(0u64);
    let handle = sim::token_addr(&token);
    let mut reg = sim.registry();
    if cu_mask.is_some() {
        reg.last_cu_mask.clone_from(&cu_mask);
    }
    reg.streams.insert(
        handle,
        Stream {
            _token: token,
            device,
            cu_mask,
            queue,
        },
    );
    Ok(handle as hipStream_t)
}

/// # Safety
/// HIP contract: `stream` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipStreamCreate(stream: *mut hipStream_t) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(stream)?;
        out.set(create(sim, None)?);
        Ok(())
    }))
}

/// # Safety
/// HIP contract: `stream` is NULL or valid for writes; `cu_mask` is NULL or valid for reads
/// of `cu_mask_size` 32-bit words.
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipExtStreamCreateWithCUMask(
    stream: *mut hipStream_t,
    cu_mask_size: u32,
    cu_mask: *const u32,
) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let out = out!(stream)?;
        if cu_mask.is_null() || cu_mask_size == 0 {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: HIP contract: cu_mask points at cu_mask_size readable u32 words (non-null
        // checked above); we copy them before returning.
        let mask = unsafe { std::slice::from_raw_parts(cu_mask, cu_mask_size as usize) }.to_vec();
        out.set(create(sim, Some(mask))?);
        Ok(())
    }))
}

/// # Safety
/// HIP contract (the handle is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipStreamDestroy(stream: hipStream_t) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let removed = sim.registry().streams.remove(&(stream as usize));
        let removed = removed.ok_or(hipErrorInvalidHandle)?;
        crate::hsa::destroy_queue(removed.queue);
        Ok(())
    }))
}

/// # Safety
/// HIP contract (the handle is only looked up).
#[no_mangle]
pub unsafe extern "C" fn hipsim_impl_hipStreamSynchronize(stream: hipStream_t) -> hipError_t {
    status(sim::get().and_then(|sim| {
        let device = super::pool::stream_device(sim, stream)?;
        super::pool::release_caches(sim, device);
        Ok(())
    }))
}
