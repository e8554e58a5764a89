//! The HSA side of streams: with `HIPSIM_HSA` naming a `libhsa-runtime64` (the `hsasim` crate
//! builds one), every stream gets an HSA queue, created and destroyed through that library as
//! the real runtime does, so that a hook sitting between HIP and HSA can be tested.
//!
//! The real `libamdhip64` links `libhsa-runtime64` (`DT_NEEDED`); the simulator `dlopen`s it
//! instead, on the first stream creation and only when `HIPSIM_HSA` is set, so that everything
//! else keeps working without it (and never loads a real ROCr that may be installed).
//! `hsa_queue_create` / `hsa_queue_destroy` are found with `dlsym` called from this library
//! (an audit module that redirects the definition hands out its wrapper). A library that cannot be opened, or lacks either function, is reported
//! once on stderr and streams are then created without queues.

use std::ffi::{c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

/// `hsa_agent_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct HsaAgent {
    handle: u64,
}

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
type QueueDestroyFn = unsafe extern "C" fn(*mut c_void) -> u32;

struct Hsa {
    create: QueueCreateFn,
    destroy: QueueDestroyFn,
}

static HSA: OnceLock<Option<Hsa>> = OnceLock::new();

fn open() -> Option<Hsa> {
    let path = std::env::var_os("HIPSIM_HSA")?;
    let shown = path.to_string_lossy().into_owned();
    let Ok(c_path) = CString::new(path.as_bytes()) else {
        eprintln!("hipsim: HIPSIM_HSA={shown:?}: contains a NUL byte; streams get no HSA queue");
        return None;
    };
    // SAFETY: a NUL-terminated path; the handle is kept for the life of the process.
    let lib = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        eprintln!("hipsim: HIPSIM_HSA={shown:?}: cannot be opened; streams get no HSA queue");
        return None;
    }
    // SAFETY: `lib` is a live handle; names are NUL-terminated literals.
    let (create, destroy) = unsafe {
        (
            libc::dlsym(lib, c"hsa_queue_create".as_ptr()),
            libc::dlsym(lib, c"hsa_queue_destroy".as_ptr()),
        )
    };
    if create.is_null() || destroy.is_null() {
        eprintln!(
            "hipsim: HIPSIM_HSA={shown:?}: no hsa_queue_create/hsa_queue_destroy; streams get \
             no HSA queue"
        );
        return None;
    }
    // SAFETY: the exports of those names have HSA's C signatures (hsa.h).
    unsafe {
        Some(Hsa {
            create: core::mem::transmute::<*mut c_void, QueueCreateFn>(create),
            destroy: core::mem::transmute::<*mut c_void, QueueDestroyFn>(destroy),
        })
    }
}

/// Creates the HSA queue of a new stream on `device`; 0 without HSA or if creation failed.
pub fn create_queue(device: usize) -> usize {
    let Some(hsa) = HSA.get_or_init(open) else {
        return 0;
    };
    let mut queue: *mut c_void = std::ptr::null_mut();
    let agent = HsaAgent {
        handle: device as u64 + 1,
    };
    // SAFETY: HSA's contract: a power-of-two size, no callback, a valid out-pointer.
    let status = unsafe {
        (hsa.create)(
            agent,
            1024,
            0,
            std::ptr::null(),
            std::ptr::null_mut(),
            0,
            0,
            &mut queue,
        )
    };
    if status != 0 {
        eprintln!("hipsim: hsa_queue_create failed with status {status:#x}");
        return 0;
    }
    queue as usize
}

/// Destroys a stream's queue (0: none).
pub fn destroy_queue(queue: usize) {
    if queue == 0 {
        return;
    }
    if let Some(Some(hsa)) = HSA.get() {
        // SAFETY: a queue `create_queue` made and nobody destroyed.
        unsafe { (hsa.destroy)(queue as *mut c_void) };
    }
}
