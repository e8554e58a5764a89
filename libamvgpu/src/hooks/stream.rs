//! Streams: which device each one runs on, so that stream-ordered allocations are charged to
//! the device they land on (the stream's, not the calling thread's current device) and a
//! stream synchronisation can release the pool blocks the runtime returns then.
//!
//! A stream belongs to the device that was current when it was created. The hook records that
//! at creation and forgets it at destruction; a stream it never saw created (made before a
//! limit applied, or by a creation door it does not wrap) is asked of the runtime through
//! `hipStreamGetDevice` when exported, else taken to be on the current device.
#![allow(non_snake_case, non_upper_case_globals)]

use super::{current_device, hook, read_in, real};
use crate::symbols::{self, Sym};
use amvgpu_ledger::Entry;
use core::ffi::{c_int, c_uint};
use hip_sys::*;

/// `hipStreamPerThread`: the calling thread's default stream, on its current device.
const PER_THREAD_STREAM: usize = 2;

/// The device `stream` runs on, and whether the hook knows it for sure.
pub(crate) fn stream_device(stream: hipStream_t) -> Result<(c_int, bool), hipError_t> {
    let key = stream as usize;
    if key == 0 || key == PER_THREAD_STREAM {
        return current_device().map(|d| (d, true));
    }
    if let Some(state) = crate::state::enforcing() {
        if let Some(entry) = state.streams.get(key) {
            return Ok((entry.device as c_int, true));
        }
    }
    if let Some(addr) = symbols::real(Sym::hipStreamGetDevice) {
        type StreamGetDevice = unsafe extern "C" fn(hipStream_t, *mut c_int) -> hipError_t;
        // SAFETY: hipStreamGetDevice(hipStream_t, hipDevice_t*) per the HIP headers.
        let get: StreamGetDevice = unsafe { core::mem::transmute::<usize, _>(addr) };
        let mut device: c_int = -1;
        // SAFETY: `device` is a valid out-pointer; the stream is the caller's.
        return match unsafe { get(stream, &mut device) } {
            hipSuccess => Ok((device, true)),
            rc => Err(rc),
        };
    }
    current_device().map(|d| (d, false))
}

/// Records a stream the runtime just created on the current device.
///
/// # Safety
/// `stream` must be NULL or valid for reads.
unsafe fn remember(stream: *mut hipStream_t) {
    let Some(active) = hook() else {
        return;
    };
    // SAFETY: caller guarantee.
    let Some(handle) = (unsafe { read_in(stream) }) else {
        return;
    };
    if let Ok(device) = current_device() {
        let entry = Entry {
            bytes: 0,
            device: device as u32,
            door: 0,
        };
        let _ = active.state.streams.insert(handle as usize, entry);
    }
}

/// `hipStreamCreate`.
///
/// # Safety
/// HIP's contract for `hipStreamCreate`.
pub unsafe extern "C" fn hipStreamCreate(stream: *mut hipStream_t) -> hipError_t {
    let real = real!(hipStreamCreate: hipStreamCreate_fn);
    // SAFETY: forwarding the caller's argument unchanged.
    let rc = unsafe { real(stream) };
    if rc == hipSuccess {
        // SAFETY: the runtime accepted and wrote `stream`.
        unsafe { remember(stream) };
    }
    rc
}

/// `hipStreamCreateWithFlags`.
///
/// # Safety
/// HIP's contract for `hipStreamCreateWithFlags`.
pub unsafe extern "C" fn hipStreamCreateWithFlags(
    stream: *mut hipStream_t,
    flags: c_uint,
) -> hipError_t {
    type CreateWithFlags = unsafe extern "C" fn(*mut hipStream_t, c_uint) -> hipError_t;
    let real = real!(hipStreamCreateWithFlags: CreateWithFlags);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(stream, flags) };
    if rc == hipSuccess {
        // SAFETY: the runtime accepted and wrote `stream`.
        unsafe { remember(stream) };
    }
    rc
}

/// `hipStreamCreateWithPriority`.
///
/// # Safety
/// HIP's contract for `hipStreamCreateWithPriority`.
pub unsafe extern "C" fn hipStreamCreateWithPriority(
    stream: *mut hipStream_t,
    flags: c_uint,
    priority: c_int,
) -> hipError_t {
    type CreateWithPriority = unsafe extern "C" fn(*mut hipStream_t, c_uint, c_int) -> hipError_t;
    let real = real!(hipStreamCreateWithPriority: CreateWithPriority);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(stream, flags, priority) };
    if rc == hipSuccess {
        // SAFETY: the runtime accepted and wrote `stream`.
        unsafe { remember(stream) };
    }
    rc
}

/// `hipExtStreamCreateWithCUMask`.
///
/// # Safety
/// HIP's contract for `hipExtStreamCreateWithCUMask`.
pub unsafe extern "C" fn hipExtStreamCreateWithCUMask(
    stream: *mut hipStream_t,
    cu_mask_size: u32,
    cu_mask: *const u32,
) -> hipError_t {
    let real = real!(hipExtStreamCreateWithCUMask: hipExtStreamCreateWithCUMask_fn);
    // Narrowed to the pod's CUs on the current device (see `crate::cucheck`).
    let narrowed = match (cu_mask.is_null() || cu_mask_size == 0, current_device()) {
        (false, Ok(device)) => {
            // SAFETY: HIP's contract: `cu_mask` points at `cu_mask_size` readable words.
            let request = unsafe { core::slice::from_raw_parts(cu_mask, cu_mask_size as usize) };
            crate::cucheck::narrow(device, request)
        }
        _ => crate::cucheck::Narrowed::Unchanged,
    };
    let rc = match &narrowed {
        crate::cucheck::Narrowed::Empty => return hipErrorInvalidValue,
        // SAFETY: `words` lives across the call; the stream out-pointer is the caller's.
        crate::cucheck::Narrowed::Words(words) => unsafe {
            real(stream, words.len() as u32, words.as_ptr())
        },
        // SAFETY: forwarding the caller's arguments unchanged.
        crate::cucheck::Narrowed::Unchanged => unsafe { real(stream, cu_mask_size, cu_mask) },
    };
    if rc == hipSuccess {
        // SAFETY: the runtime accepted and wrote `stream`.
        unsafe { remember(stream) };
    }
    rc
}

/// `hipStreamDestroy`.
///
/// # Safety
/// HIP's contract for `hipStreamDestroy`.
pub unsafe extern "C" fn hipStreamDestroy(stream: hipStream_t) -> hipError_t {
    let real = real!(hipStreamDestroy: hipStreamDestroy_fn);
    // SAFETY: forwarding the caller's argument unchanged.
    let rc = unsafe { real(stream) };
    if rc == hipSuccess {
        if let Some(active) = hook() {
            active.state.streams.remove(stream as usize);
        }
    }
    rc
}
