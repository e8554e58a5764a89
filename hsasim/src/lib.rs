//! `hsasim`: a minimal simulated `libhsa-runtime64.so` (the ROCr HSA runtime), just enough for
//! the HIP simulator (`hipsim`) to create a queue per stream and for a test to see which queue
//! priority a hook set.
//!
//! Building this crate leaves `target/<profile>/libhsa_runtime64.so` whose `DT_SONAME` is
//! `libhsa-runtime64.so.1`. `hipsim` opens it with `dlopen` (path in `HIPSIM_HSA`, see hipsim's
//! docs) and finds `hsa_queue_create`/`hsa_queue_destroy` with `dlsym`.
//!
//! # Exports (HSA's C signatures and values, from `hsa.h` / `hsa_ext_amd.h`)
//!
//! - `hsa_status_t hsa_queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
//!   void (*callback)(hsa_status_t, hsa_queue_t *, void *), void *data,
//!   uint32_t private_segment_size, uint32_t group_segment_size, hsa_queue_t **queue)`:
//!   `size` must be a power of two (else `HSA_STATUS_ERROR_INVALID_ARGUMENT`, 0x1001), `queue`
//!   non-NULL (same error). The new queue has `HSA_AMD_QUEUE_PRIORITY_NORMAL` (1), as ROCr's
//!   queues do by default. The queue is an opaque, never-dereferenced token.
//! - `hsa_status_t hsa_queue_destroy(hsa_queue_t *queue)`: an unknown queue gives
//!   `HSA_STATUS_ERROR_INVALID_QUEUE` (0x1007).
//! - `hsa_status_t hsa_amd_queue_set_priority(hsa_queue_t *queue, hsa_amd_queue_priority_t p)`:
//!   `p` is `HSA_AMD_QUEUE_PRIORITY_LOW` (0), `NORMAL` (1) or `HIGH` (2), anything else
//!   `HSA_STATUS_ERROR_INVALID_ARGUMENT`; an unknown queue `HSA_STATUS_ERROR_INVALID_QUEUE`.
//!
//! # Introspection (not HSA)
//!
//! - `hsa_status_t hsasimGetLastQueuePriority(int32_t *priority)`: the current priority of the
//!   most recently created queue (even if destroyed since), or -1 if no queue was created.
//! - `hsa_status_t hsasimGetQueueCount(uint32_t *live)`: queues created and not destroyed.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;

/// `HSA_STATUS_SUCCESS`.
pub const HSA_STATUS_SUCCESS: u32 = 0;
/// `HSA_STATUS_ERROR_INVALID_ARGUMENT`.
pub const HSA_STATUS_ERROR_INVALID_ARGUMENT: u32 = 0x1001;
/// `HSA_STATUS_ERROR_INVALID_QUEUE`.
pub const HSA_STATUS_ERROR_INVALID_QUEUE: u32 = 0x1007;
/// `HSA_AMD_QUEUE_PRIORITY_NORMAL`, the default of a new queue.
pub const HSA_AMD_QUEUE_PRIORITY_NORMAL: u32 = 1;
/// `HSA_AMD_QUEUE_PRIORITY_HIGH`, the largest valid priority.
pub const HSA_AMD_QUEUE_PRIORITY_HIGH: u32 = 2;

/// `hsa_agent_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsaAgent {
    pub handle: u64,
}

#[derive(Debug, Default)]
struct Queues {
    /// Queue token address -> (token, priority).
    live: HashMap<usize, (Box<u64>, u32)>,
    /// The most recently created queue and its priority (kept after destruction).
    last: Option<(usize, u32)>,
}

static QUEUES: Mutex<Option<Queues>> = Mutex::new(None);

fn with_queues<R>(f: impl FnOnce(&mut Queues) -> R) -> R {
    // A panic while holding the lock cannot happen (panic = abort), so poisoning is moot.
    let mut guard = QUEUES.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Queues::default))
}

/// `hsa_queue_create`.
///
/// # Safety
/// HSA contract: `queue` is NULL or valid for writes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hsa_queue_create(
    _agent: HsaAgent,
    size: u32,
    _queue_type: u32,
    _callback: *const c_void,
    _data: *mut c_void,
    _private_segment_size: u32,
    _group_segment_size: u32,
    queue: *mut *mut c_void,
) -> u32 {
    if queue.is_null() || !size.is_power_of_two() {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    let token = Box::new(0u64);
    let handle = &*token as *const u64 as usize;
    with_queues(|q| {
        q.live
            .insert(handle, (token, HSA_AMD_QUEUE_PRIORITY_NORMAL));
        q.last = Some((handle, HSA_AMD_QUEUE_PRIORITY_NORMAL));
    });
    // SAFETY: non-NULL and valid for writes (HSA contract).
    unsafe { queue.write(handle as *mut c_void) };
    HSA_STATUS_SUCCESS
}

/// `hsa_queue_destroy`.
///
/// # Safety
/// None beyond HSA's: the queue is only looked up, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn hsa_queue_destroy(queue: *mut c_void) -> u32 {
    with_queues(|q| match q.live.remove(&(queue as usize)) {
        Some(_) => HSA_STATUS_SUCCESS,
        None => HSA_STATUS_ERROR_INVALID_QUEUE,
    })
}

/// `hsa_amd_queue_set_priority`.
///
/// # Safety
/// None beyond HSA's: the queue is only looked up, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn hsa_amd_queue_set_priority(queue: *mut c_void, priority: u32) -> u32 {
    if priority > HSA_AMD_QUEUE_PRIORITY_HIGH {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    with_queues(|q| {
        let key = queue as usize;
        let Some(entry) = q.live.get_mut(&key) else {
            return HSA_STATUS_ERROR_INVALID_QUEUE;
        };
        entry.1 = priority;
        if let Some(last) = q.last.as_mut().filter(|(h, _)| *h == key) {
            last.1 = priority;
        }
        HSA_STATUS_SUCCESS
    })
}

/// See the crate docs.
///
/// # Safety
/// `priority` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hsasimGetLastQueuePriority(priority: *mut i32) -> u32 {
    if priority.is_null() {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    let last = with_queues(|q| q.last.map_or(-1, |(_, p)| p as i32));
    // SAFETY: non-NULL and valid for writes (caller contract).
    unsafe { priority.write(last) };
    HSA_STATUS_SUCCESS
}

/// See the crate docs.
///
/// # Safety
/// `live` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hsasimGetQueueCount(live: *mut u32) -> u32 {
    if live.is_null() {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    let count = with_queues(|q| q.live.len() as u32);
    // SAFETY: non-NULL and valid for writes (caller contract).
    unsafe { live.write(count) };
    HSA_STATUS_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_start_normal_take_valid_priorities_and_reject_the_rest() {
        let mut queue: *mut c_void = std::ptr::null_mut();
        let agent = HsaAgent { handle: 1 };
        let null = std::ptr::null_mut();
        // SAFETY: valid out-pointers; the queue is a token.
        unsafe {
            assert_eq!(
                hsa_queue_create(agent, 1000, 0, std::ptr::null(), null, 0, 0, &mut queue),
                HSA_STATUS_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                hsa_queue_create(agent, 1024, 0, std::ptr::null(), null, 0, 0, &mut queue),
                HSA_STATUS_SUCCESS
            );
            let mut prio = -2;
            hsasimGetLastQueuePriority(&mut prio);
            assert_eq!(prio, 1);
            assert_eq!(hsa_amd_queue_set_priority(queue, 2), HSA_STATUS_SUCCESS);
            hsasimGetLastQueuePriority(&mut prio);
            assert_eq!(prio, 2);
            assert_eq!(
                hsa_amd_queue_set_priority(queue, 3),
                HSA_STATUS_ERROR_INVALID_ARGUMENT
            );
            let mut live = 0;
            hsasimGetQueueCount(&mut live);
            assert_eq!(live, 1);
            assert_eq!(hsa_queue_destroy(queue), HSA_STATUS_SUCCESS);
            assert_eq!(hsa_queue_destroy(queue), HSA_STATUS_ERROR_INVALID_QUEUE);
            assert_eq!(
                hsa_amd_queue_set_priority(queue, 0),
                HSA_STATUS_ERROR_INVALID_QUEUE
            );
        }
    }
}
