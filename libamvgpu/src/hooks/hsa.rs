//! `AMD_TASK_PRIORITY`: every HSA queue created in the process gets the pod's priority.
//!
//! `la_objopen` redirects `libhsa-runtime64`'s definition of `hsa_queue_create` to
//! [`hsa_queue_create`] ([`crate::redirect`]), so the HIP runtime's binding to it (PLT, GOT or
//! `dlsym`) gets the wrapper; `libhsa-runtime64`'s references to its own export are pointed
//! back at the real function once it is relocated. After the real call succeeds, the wrapper
//! calls `hsa_amd_queue_set_priority(queue, priority)`, found in `libhsa-runtime64`'s own
//! dynamic symbol table (the hook never links HSA). A program that uses HSA directly gets the
//! pod's priority on its queues too: the priority is the pod's, whoever creates the queue.
//!
//! | `AMD_TASK_PRIORITY` | queue priority |
//! |---|---|
//! | `0` | `HSA_AMD_QUEUE_PRIORITY_HIGH` (2) |
//! | a positive decimal integer (`1`, `5`, `0010`) | `HSA_AMD_QUEUE_PRIORITY_LOW` (0) |
//! | unset | the runtime's default (nothing is called) |
//! | anything else (`-1`, `high`, empty) | the runtime's default, with a warning naming the value |
//!
//! A failing `hsa_amd_queue_set_priority` is logged; the queue is still returned (the
//! program's stream works, only at the default priority).
#![allow(non_snake_case)]

use crate::elf::DynamicTables;
use crate::log;
use crate::snapshot::Snapshot;
use core::ffi::c_void;
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};

/// The variable read.
pub const PRIORITY_VAR: &[u8] = b"AMD_TASK_PRIORITY";

/// `hsa_amd_queue_priority_t` (hsa_ext_amd.h).
pub const HSA_AMD_QUEUE_PRIORITY_LOW: u32 = 0;
/// `hsa_amd_queue_priority_t` (hsa_ext_amd.h).
pub const HSA_AMD_QUEUE_PRIORITY_HIGH: u32 = 2;

/// `hsa_agent_t`: an opaque handle passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsaAgent {
    pub handle: u64,
}

/// `hsa_status_t hsa_queue_create(hsa_agent_t, uint32_t size, hsa_queue_type32_t,
/// void (*callback)(hsa_status_t, hsa_queue_t *, void *), void *data,
/// uint32_t private_segment_size, uint32_t group_segment_size, hsa_queue_t **queue)`.
type QueueCreateFn = unsafe extern "C" fn(
    HsaAgent,
    u32,
    u32,
    *const c_void,
    *mut c_void,
    u32,
    u32,
    *mut *mut c_void,
) -> u32;

/// `hsa_status_t hsa_amd_queue_set_priority(hsa_queue_t *, hsa_amd_queue_priority_t)`.
type SetPriorityFn = unsafe extern "C" fn(*mut c_void, u32) -> u32;

/// The queue priority `value` asks for; `Err(())` for a value that is neither `0` nor a
/// positive integer.
pub fn parse_priority(value: &[u8]) -> Result<u32, ()> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(());
    }
    Ok(if value.iter().all(|&b| b == b'0') {
        HSA_AMD_QUEUE_PRIORITY_HIGH
    } else {
        HSA_AMD_QUEUE_PRIORITY_LOW
    })
}

static REAL_QUEUE_CREATE: AtomicUsize = AtomicUsize::new(0);
static HSA_DYNAMIC: AtomicPtr<crate::elf::Elf64Dyn> = AtomicPtr::new(core::ptr::null_mut());
static HSA_BASE: AtomicUsize = AtomicUsize::new(0);
static SET_PRIORITY: AtomicUsize = AtomicUsize::new(0);

/// Remembers where `libhsa-runtime64` is (loader callback: stores only).
pub fn set_library(base: usize, dynamic: *mut crate::elf::Elf64Dyn) {
    HSA_BASE.store(base, Ordering::Relaxed);
    // Release: a reader that sees the pointer sees the base.
    HSA_DYNAMIC.store(dynamic, Ordering::Release);
}

/// `libhsa-runtime64` is being unloaded (loader callback: stores only).
pub fn forget_library() {
    HSA_DYNAMIC.store(core::ptr::null_mut(), Ordering::Release);
    REAL_QUEUE_CREATE.store(0, Ordering::Relaxed);
    SET_PRIORITY.store(0, Ordering::Relaxed);
}

/// The function whose definition [`crate::redirect`] points at [`hsa_queue_create`].
pub const QUEUE_CREATE: &[u8] = b"hsa_queue_create";

/// The wrapper's address.
pub fn wrapper() -> usize {
    hsa_queue_create as *const () as usize
}

/// Records `libhsa-runtime64`'s real `hsa_queue_create` (loader callback: one store).
pub fn note_real(real: usize) {
    REAL_QUEUE_CREATE.store(real, Ordering::Relaxed);
}

/// The real `hsa_queue_create`, 0 if unknown.
pub fn real_queue_create() -> usize {
    REAL_QUEUE_CREATE.load(Ordering::Relaxed)
}

/// 0 unknown, 1 leave the default, 2 + priority.
static PRIORITY: AtomicU8 = AtomicU8::new(0);

/// The priority to apply, read once from the snapshot.
fn priority() -> Option<u32> {
    // Relaxed: derived from the immutable snapshot; racing threads store the same value.
    match PRIORITY.load(Ordering::Relaxed) {
        0 => {
            let wanted = match Snapshot::take().0.get(PRIORITY_VAR) {
                None => None,
                Some(value) => match parse_priority(value) {
                    Ok(priority) => Some(priority),
                    Err(()) => {
                        log::warn!(
                            "{}=\"{}\": not 0 (high) or a positive integer (low); HSA queues \
                             keep the runtime's default priority",
                            log::Bytes(PRIORITY_VAR),
                            log::Bytes(value)
                        );
                        None
                    }
                },
            };
            PRIORITY.store(wanted.map_or(1, |p| 2 + p as u8), Ordering::Relaxed);
            wanted
        }
        1 => None,
        stored => Some(u32::from(stored - 2)),
    }
}

fn set_priority_fn() -> Option<SetPriorityFn> {
    let mut addr = SET_PRIORITY.load(Ordering::Relaxed);
    if addr == 0 {
        let dynamic = HSA_DYNAMIC.load(Ordering::Acquire);
        if dynamic.is_null() {
            return None;
        }
        let base = HSA_BASE.load(Ordering::Relaxed);
        // SAFETY: `dynamic` is libhsa-runtime64's l_ld as passed to la_objopen; the library is
        // mapped while its hsa_queue_create (our caller) runs.
        let tables = unsafe { DynamicTables::read(base, dynamic) }?;
        // SAFETY: as above.
        addr = unsafe { tables.lookup(b"hsa_amd_queue_set_priority") }?;
        SET_PRIORITY.store(addr, Ordering::Relaxed);
    }
    // SAFETY: the address is libhsa-runtime64's export of that name, whose C signature is
    // `SetPriorityFn` (hsa_ext_amd.h).
    Some(unsafe { core::mem::transmute::<usize, SetPriorityFn>(addr) })
}

/// `hsa_queue_create`, as the HIP runtime calls it.
///
/// # Safety
/// HSA's contract for `hsa_queue_create`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hsa_queue_create(
    agent: HsaAgent,
    size: u32,
    queue_type: u32,
    callback: *const c_void,
    data: *mut c_void,
    private_segment_size: u32,
    group_segment_size: u32,
    queue: *mut *mut c_void,
) -> u32 {
    // HSA_STATUS_ERROR (hsa.h): the generic failure.
    const HSA_STATUS_ERROR: u32 = 0x1000;
    let real = match REAL_QUEUE_CREATE.load(Ordering::Relaxed) {
        0 => return HSA_STATUS_ERROR,
        // SAFETY: the address is libhsa-runtime64's hsa_queue_create (stored by `note_real`).
        addr => unsafe { core::mem::transmute::<usize, QueueCreateFn>(addr) },
    };
    // SAFETY: forwarding the caller's arguments unchanged.
    let status = unsafe {
        real(
            agent,
            size,
            queue_type,
            callback,
            data,
            private_segment_size,
            group_segment_size,
            queue,
        )
    };
    if status != 0 || queue.is_null() {
        return status;
    }
    let Some(priority) = priority() else {
        return status;
    };
    // SAFETY: the real call succeeded, so it wrote the new queue to `*queue`.
    let created = unsafe { *queue };
    match set_priority_fn() {
        None => log::warn!(
            "libhsa-runtime64 exports no hsa_amd_queue_set_priority; AMD_TASK_PRIORITY not applied"
        ),
        Some(set) => {
            // SAFETY: `created` is a live queue the runtime just made; priority is a valid
            // hsa_amd_queue_priority_t value.
            let rc = unsafe { set(created, priority) };
            if rc != 0 {
                log::warn!("hsa_amd_queue_set_priority({priority}) failed with status {rc:#x}");
            } else {
                log::debug!("HSA queue {created:p}: priority {priority}");
            }
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_high_positive_is_low_rest_is_rejected() {
        assert_eq!(parse_priority(b"0"), Ok(HSA_AMD_QUEUE_PRIORITY_HIGH));
        assert_eq!(parse_priority(b"00"), Ok(HSA_AMD_QUEUE_PRIORITY_HIGH));
        assert_eq!(parse_priority(b"1"), Ok(HSA_AMD_QUEUE_PRIORITY_LOW));
        assert_eq!(parse_priority(b"5"), Ok(HSA_AMD_QUEUE_PRIORITY_LOW));
        assert_eq!(
            parse_priority(b"99999999999999999999999"),
            Ok(HSA_AMD_QUEUE_PRIORITY_LOW)
        );
        for bad in [&b""[..], b"-1", b"+1", b"high", b"1 ", b"0x1"] {
            assert_eq!(
                parse_priority(bad),
                Err(()),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
