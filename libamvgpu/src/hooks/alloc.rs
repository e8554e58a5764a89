//! Doors that take device memory.
//!
//! Sizes are charged as the runtime takes them (`hip_sys::sim`, the simulator's documented
//! rules, which follow the real runtime's page and pitch granularity): linear doors exactly;
//! pitched doors with the pitch rule, corrected to `pitch * rows` once the runtime reports the
//! pitch; arrays and mipmapped arrays by the padded-row rule (the runtime reports no size for
//! them). A size whose arithmetic overflows is refused with `hipErrorOutOfMemory` before the
//! runtime is called, and nothing is recorded.
#![allow(non_snake_case, non_upper_case_globals)]

use super::{allocate, current_device, door, hook, read_in, real, track, Charge, NO_DEVICE};
use crate::log;
use crate::state::State;
use crate::symbols::{self, Sym};
use core::ffi::{c_int, c_uint, c_ulonglong, c_void};
use hip_sys::sim::{array_bytes, linear_bytes, mipmapped_bytes, pitched_bytes};
use hip_sys::*;

/// Frees a pointer the hook must take back (tracking failed or the limit refused the real
/// size after the fact).
fn undo_pointer(key: usize) {
    if let Some(addr) = symbols::real(Sym::hipFree) {
        // SAFETY: the runtime's hipFree has the hipFree_fn signature; `key` is a pointer it
        // just returned.
        let free: hipFree_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
        // SAFETY: as above.
        unsafe { free(key as *mut c_void) };
    }
}

fn undo_array(key: usize) {
    if let Some(addr) = symbols::real(Sym::hipFreeArray) {
        // SAFETY: the runtime's hipFreeArray has this signature; `key` is an array it created.
        let free: hipFreeArray_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
        // SAFETY: as above.
        unsafe { free(key as hipArray_t) };
    }
}

fn undo_mipmapped(key: usize) {
    if let Some(addr) = symbols::real(Sym::hipFreeMipmappedArray) {
        // SAFETY: the runtime's hipFreeMipmappedArray has this signature.
        let free: hipFreeMipmappedArray_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
        // SAFETY: as above.
        unsafe { free(key as hipMipmappedArray_t) };
    }
}

fn undo_vmm(key: usize) {
    if let Some(addr) = symbols::real(Sym::hipMemRelease) {
        // SAFETY: the runtime's hipMemRelease has this signature.
        let release: hipMemRelease_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
        // SAFETY: as above; `key` is a handle it just created.
        unsafe { release(key as hipMemGenericAllocationHandle_t) };
    }
}

/// Logs and refuses a request whose size arithmetic overflows.
fn overflow(name: &str, what: core::fmt::Arguments<'_>) -> hipError_t {
    log::warn!("{name}({what}): size overflows; refused with hipErrorOutOfMemory");
    hipErrorOutOfMemory
}

/// A pointer-returning door that charges a linear size on the current device.
///
/// # Safety
/// `ptr` is the caller's out-pointer (NULL or valid for writes), `call` the real door.
unsafe fn linear(
    state: &State,
    name: &'static str,
    door: u8,
    ptr: *mut *mut c_void,
    size: usize,
    call: impl FnOnce() -> hipError_t,
) -> hipError_t {
    // Without a device the runtime answers (see `allocate` for a device it cannot name).
    let device = current_device().unwrap_or(NO_DEVICE);
    let Some(bytes) = linear_bytes(size) else {
        return overflow(name, format_args!("{size} bytes"));
    };
    let charge = Charge {
        device,
        bytes: bytes as u64,
        door,
        name,
    };
    let result = || {
        // SAFETY: the runtime writes this out-pointer on success; it is the caller's (NULL or valid).
        unsafe { read_in(ptr) }
            .filter(|p| !p.is_null())
            .map(|p| (p as usize, bytes as u64))
    };
    allocate(state, charge, call, result, undo_pointer)
}

/// `hipMalloc`.
///
/// # Safety
/// HIP's contract for `hipMalloc`.
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> hipError_t {
    if super::env::oversubscribe() {
        // HIP_OVERSUBSCRIBE: served from managed memory, counted like any allocation.
        // SAFETY: same contract as hipMalloc; hipMemAttachGlobal is always a valid flag.
        return unsafe { hipMallocManaged(ptr, size, hipMemAttachGlobal) };
    }
    let real = real!(hipMalloc: hipMalloc_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr, size) };
    };
    // SAFETY: forwarding the caller's arguments; `ptr` is the caller's out-pointer.
    unsafe {
        linear(active.state, "hipMalloc", door::LINEAR, ptr, size, || {
            real(ptr, size)
        })
    }
}

/// `hipExtMallocWithFlags`.
///
/// # Safety
/// HIP's contract for `hipExtMallocWithFlags`.
pub unsafe extern "C" fn hipExtMallocWithFlags(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    let real = real!(hipExtMallocWithFlags: hipExtMallocWithFlags_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr, size, flags) };
    };
    // SAFETY: as in hipMalloc.
    unsafe {
        linear(
            active.state,
            "hipExtMallocWithFlags",
            door::LINEAR,
            ptr,
            size,
            || real(ptr, size, flags),
        )
    }
}

/// `hipMallocManaged`: counted like device memory (it can occupy VRAM), on the current device.
///
/// # Safety
/// HIP's contract for `hipMallocManaged`.
pub unsafe extern "C" fn hipMallocManaged(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    let real = real!(hipMallocManaged: hipMallocManaged_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr, size, flags) };
    };
    // SAFETY: as in hipMalloc.
    unsafe {
        linear(
            active.state,
            "hipMallocManaged",
            door::MANAGED,
            ptr,
            size,
            || real(ptr, size, flags),
        )
    }
}

/// A pitched door: charge the pitch rule's size, then correct to `pitch * rows`.
///
/// # Safety
/// `ptr` and `pitch` are the caller's out-pointers; `call` the real door.
unsafe fn pitched(
    state: &State,
    name: &'static str,
    ptr: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    rows: usize,
    call: impl FnOnce() -> hipError_t,
) -> hipError_t {
    // Without a device the runtime answers (see `allocate` for a device it cannot name).
    let device = current_device().unwrap_or(NO_DEVICE);
    let Some(bytes) = pitched_bytes(width, rows, 1) else {
        return overflow(name, format_args!("width {width}, height {rows}"));
    };
    let charge = Charge {
        device,
        bytes: bytes as u64,
        door: door::PITCHED,
        name,
    };
    let result = || {
        // SAFETY: after a successful call the runtime has written both out-pointers.
        let (p, pitch) = unsafe { (read_in(ptr)?, read_in(pitch)?) };
        let real = pitch.checked_mul(rows).and_then(linear_bytes)?;
        (!p.is_null()).then_some((p as usize, real as u64))
    };
    allocate(state, charge, call, result, undo_pointer)
}

/// `hipMallocPitch`.
///
/// # Safety
/// HIP's contract for `hipMallocPitch`.
pub unsafe extern "C" fn hipMallocPitch(
    ptr: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    height: usize,
) -> hipError_t {
    let real = real!(hipMallocPitch: hipMallocPitch_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr, pitch, width, height) };
    };
    // SAFETY: forwarding the caller's arguments; out-pointers are the caller's.
    unsafe {
        pitched(
            active.state,
            "hipMallocPitch",
            ptr,
            pitch,
            width,
            height,
            || real(ptr, pitch, width, height),
        )
    }
}

/// `hipMemAllocPitch`.
///
/// # Safety
/// HIP's contract for `hipMemAllocPitch`.
pub unsafe extern "C" fn hipMemAllocPitch(
    dptr: *mut hipDeviceptr_t,
    pitch: *mut usize,
    width_bytes: usize,
    height: usize,
    element_size_bytes: c_uint,
) -> hipError_t {
    let real = real!(hipMemAllocPitch: hipMemAllocPitch_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(dptr, pitch, width_bytes, height, element_size_bytes) };
    };
    // SAFETY: forwarding the caller's arguments; out-pointers are the caller's.
    unsafe {
        pitched(
            active.state,
            "hipMemAllocPitch",
            dptr,
            pitch,
            width_bytes,
            height,
            || real(dptr, pitch, width_bytes, height, element_size_bytes),
        )
    }
}

/// `hipMalloc3D`.
///
/// # Safety
/// HIP's contract for `hipMalloc3D`.
pub unsafe extern "C" fn hipMalloc3D(
    pitched_ptr: *mut hipPitchedPtr,
    extent: hipExtent,
) -> hipError_t {
    let real = real!(hipMalloc3D: hipMalloc3D_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(pitched_ptr, extent) };
    };
    // Without a device the runtime answers (see `allocate` for a device it cannot name).
    let device = current_device().unwrap_or(NO_DEVICE);
    let name = "hipMalloc3D";
    let Some(bytes) = pitched_bytes(extent.width, extent.height, extent.depth) else {
        return overflow(name, format_args!("{extent:?}"));
    };
    let charge = Charge {
        device,
        bytes: bytes as u64,
        door: door::PITCHED,
        name,
    };
    let result = || {
        // SAFETY: after a successful call the runtime has filled `*pitched_ptr`.
        let p = unsafe { read_in(pitched_ptr) }?;
        let real = p
            .pitch
            .checked_mul(extent.height)
            .and_then(|b| b.checked_mul(extent.depth))
            .and_then(linear_bytes)?;
        (!p.ptr.is_null()).then_some((p.ptr as usize, real as u64))
    };
    // SAFETY: forwarding the caller's arguments.
    let call = || unsafe { real(pitched_ptr, extent) };
    allocate(active.state, charge, call, result, undo_pointer)
}

/// Bytes per element of a channel descriptor (sum of the channel bits), if sensible.
fn channel_bytes(desc: &hipChannelFormatDesc) -> Option<usize> {
    let bits = [desc.x, desc.y, desc.z, desc.w]
        .iter()
        .try_fold(0usize, |sum, &b| sum.checked_add(usize::try_from(b).ok()?))?;
    (bits > 0 && bits % 8 == 0).then_some(bits / 8)
}

/// Bytes per element of a driver-style array descriptor.
fn format_bytes(format: hipArray_Format, channels: c_uint) -> Option<usize> {
    let channels = match channels {
        1 | 2 | 4 => channels as usize,
        _ => return None,
    };
    array_format_bytes(format)?.checked_mul(channels)
}

/// An array door: the element size and dimensions give the charge; nothing reports the real
/// size afterwards, so the charge stands. A descriptor the hook cannot size is handed to the
/// runtime, which rejects it (the allocation is refused if the runtime accepts it anyway).
fn array_door(
    state: &State,
    name: &'static str,
    door: u8,
    bytes: Option<ArraySize>,
    call: impl FnOnce() -> hipError_t,
    out: impl FnOnce() -> Option<usize>,
    undo: fn(usize),
) -> hipError_t {
    // Without a device the runtime answers (see `allocate` for a device it cannot name).
    let device = current_device().unwrap_or(NO_DEVICE);
    let bytes = match bytes {
        // NULL descriptor: the runtime reports its own error.
        None => return call(),
        Some(ArraySize::Overflow) => {
            return overflow(name, format_args!("array descriptor"));
        }
        Some(ArraySize::Unsizable) => {
            if state.allowance(device).is_none() {
                return call();
            }
            let rc = call();
            if rc == hipSuccess {
                if let Some(key) = out() {
                    undo(key);
                }
                log::warn!("{name}: cannot size this array descriptor; refused");
                return hipErrorOutOfMemory;
            }
            return rc;
        }
        Some(ArraySize::Bytes(bytes)) => bytes,
    };
    let charge = Charge {
        device,
        bytes: bytes as u64,
        door,
        name,
    };
    allocate(
        state,
        charge,
        call,
        || out().map(|k| (k, bytes as u64)),
        undo,
    )
}

/// What an array descriptor costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArraySize {
    Bytes(usize),
    /// An element format or width the runtime rejects (it gives its own error).
    Unsizable,
    /// The size does not fit in `usize`: `hipErrorOutOfMemory`, the runtime is not called.
    Overflow,
}

fn sized(
    element: Option<usize>,
    width: usize,
    size: impl FnOnce(usize) -> Option<usize>,
) -> ArraySize {
    match element {
        Some(element) if width > 0 => size(element).map_or(ArraySize::Overflow, ArraySize::Bytes),
        _ => ArraySize::Unsizable,
    }
}

fn array_size(element: Option<usize>, w: usize, h: usize, d: usize) -> ArraySize {
    sized(element, w, |e| array_bytes(e, w, h, d))
}

/// `hipMallocArray`.
///
/// # Safety
/// HIP's contract for `hipMallocArray`.
pub unsafe extern "C" fn hipMallocArray(
    array: *mut hipArray_t,
    desc: *const hipChannelFormatDesc,
    width: usize,
    height: usize,
    flags: c_uint,
) -> hipError_t {
    let real = real!(hipMallocArray: hipMallocArray_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(array, desc, width, height, flags) };
    };
    // SAFETY: `desc` is NULL or points to a descriptor (HIP contract).
    let bytes = unsafe { read_in(desc) }.map(|d| array_size(channel_bytes(&d), width, height, 0));
    array_door(
        active.state,
        "hipMallocArray",
        door::ARRAY,
        bytes,
        // SAFETY: forwarding the caller's arguments.
        || unsafe { real(array, desc, width, height, flags) },
        || {
            // SAFETY: the runtime writes this out-pointer on success; it is the caller's (NULL or valid).
            unsafe { read_in(array) }
                .filter(|a| !a.is_null())
                .map(|a| a as usize)
        },
        undo_array,
    )
}

/// `hipMalloc3DArray`.
///
/// # Safety
/// HIP's contract for `hipMalloc3DArray`.
pub unsafe extern "C" fn hipMalloc3DArray(
    array: *mut hipArray_t,
    desc: *const hipChannelFormatDesc,
    extent: hipExtent,
    flags: c_uint,
) -> hipError_t {
    let real = real!(hipMalloc3DArray: hipMalloc3DArray_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(array, desc, extent, flags) };
    };
    // SAFETY: `desc` is NULL or points to a descriptor (HIP contract).
    let bytes = unsafe { read_in(desc) }
        .map(|d| array_size(channel_bytes(&d), extent.width, extent.height, extent.depth));
    array_door(
        active.state,
        "hipMalloc3DArray",
        door::ARRAY,
        bytes,
        // SAFETY: forwarding the caller's arguments.
        || unsafe { real(array, desc, extent, flags) },
        || {
            // SAFETY: the runtime writes this out-pointer on success; it is the caller's (NULL or valid).
            unsafe { read_in(array) }
                .filter(|a| !a.is_null())
                .map(|a| a as usize)
        },
        undo_array,
    )
}

/// `hipArrayCreate`.
///
/// # Safety
/// HIP's contract for `hipArrayCreate`.
pub unsafe extern "C" fn hipArrayCreate(
    array: *mut hipArray_t,
    desc: *const HIP_ARRAY_DESCRIPTOR,
) -> hipError_t {
    let real = real!(hipArrayCreate: hipArrayCreate_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(array, desc) };
    };
    // SAFETY: `desc` is NULL or points to a descriptor (HIP contract).
    let bytes = unsafe { read_in(desc) }
        .map(|d| array_size(format_bytes(d.Format, d.NumChannels), d.Width, d.Height, 0));
    array_door(
        active.state,
        "hipArrayCreate",
        door::ARRAY,
        bytes,
        // SAFETY: forwarding the caller's arguments.
        || unsafe { real(array, desc) },
        || {
            // SAFETY: the runtime writes this out-pointer on success; it is the caller's (NULL or valid).
            unsafe { read_in(array) }
                .filter(|a| !a.is_null())
                .map(|a| a as usize)
        },
        undo_array,
    )
}

/// `hipArray3DCreate`.
///
/// # Safety
/// HIP's contract for `hipArray3DCreate`.
pub unsafe extern "C" fn hipArray3DCreate(
    array: *mut hipArray_t,
    desc: *const HIP_ARRAY3D_DESCRIPTOR,
) -> hipError_t {
    let real = real!(hipArray3DCreate: hipArray3DCreate_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(array, desc) };
    };
    // SAFETY: `desc` is NULL or points to a descriptor (HIP contract).
    let bytes = unsafe { read_in(desc) }.map(|d| {
        array_size(
            format_bytes(d.Format, d.NumChannels),
            d.Width,
            d.Height,
            d.Depth,
        )
    });
    array_door(
        active.state,
        "hipArray3DCreate",
        door::ARRAY,
        bytes,
        // SAFETY: forwarding the caller's arguments.
        || unsafe { real(array, desc) },
        || {
            // SAFETY: the runtime writes this out-pointer on success; it is the caller's (NULL or valid).
            unsafe { read_in(array) }
                .filter(|a| !a.is_null())
                .map(|a| a as usize)
        },
        undo_array,
    )
}

fn mipmapped_size(element: Option<usize>, extent: hipExtent, levels: c_uint) -> ArraySize {
    sized(element, extent.width, |e| {
        mipmapped_bytes(e, extent.width, extent.height, extent.depth, levels)
    })
}

/// `hipMallocMipmappedArray`.
///
/// # Safety
/// HIP's contract for `hipMallocMipmappedArray`.
pub unsafe extern "C" fn hipMallocMipmappedArray(
    array: *mut hipMipmappedArray_t,
    desc: *const hipChannelFormatDesc,
    extent: hipExtent,
    num_levels: c_uint,
    flags: c_uint,
) -> hipError_t {
    let real = real!(hipMallocMipmappedArray: hipMallocMipmappedArray_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(array, desc, extent, num_levels, flags) };
    };
    // SAFETY: `desc` is NULL or points to a descriptor (HIP contract).
    let bytes =
        unsafe { read_in(desc) }.map(|d| mipmapped_size(channel_bytes(&d), extent, num_levels));
    array_door(
        active.state,
        "hipMallocMipmappedArray",
        door::MIPMAPPED,
        bytes,
        // SAFETY: forwarding the caller's arguments.
        || unsafe { real(array, desc, extent, num_levels, flags) },
        || {
            // SAFETY: the runtime writes this out-pointer on success; it is the caller's (NULL or valid).
            unsafe { read_in(array) }
                .filter(|a| !a.is_null())
                .map(|a| a as usize)
        },
        undo_mipmapped,
    )
}

/// `hipMipmappedArrayCreate`.
///
/// # Safety
/// HIP's contract for `hipMipmappedArrayCreate`.
pub unsafe extern "C" fn hipMipmappedArrayCreate(
    array: *mut hipMipmappedArray_t,
    desc: *mut HIP_ARRAY3D_DESCRIPTOR,
    num_levels: c_uint,
) -> hipError_t {
    let real = real!(hipMipmappedArrayCreate: hipMipmappedArrayCreate_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(array, desc, num_levels) };
    };
    // SAFETY: `desc` is NULL or points to a descriptor (HIP contract).
    let bytes = unsafe { read_in(desc) }.map(|d| {
        let extent = hipExtent {
            width: d.Width,
            height: d.Height,
            depth: d.Depth,
        };
        mipmapped_size(format_bytes(d.Format, d.NumChannels), extent, num_levels)
    });
    array_door(
        active.state,
        "hipMipmappedArrayCreate",
        door::MIPMAPPED,
        bytes,
        // SAFETY: forwarding the caller's arguments.
        || unsafe { real(array, desc, num_levels) },
        || {
            // SAFETY: the runtime writes this out-pointer on success; it is the caller's (NULL or valid).
            unsafe { read_in(array) }
                .filter(|a| !a.is_null())
                .map(|a| a as usize)
        },
        undo_mipmapped,
    )
}

/// The default pool of `device`, from the runtime.
pub(crate) fn default_pool(device: c_int) -> Option<usize> {
    let addr = symbols::real(Sym::hipDeviceGetDefaultMemPool)?;
    // SAFETY: the runtime's hipDeviceGetDefaultMemPool has this signature.
    let get: hipDeviceGetDefaultMemPool_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
    let mut pool: hipMemPool_t = core::ptr::null_mut();
    // SAFETY: `pool` is a valid out-pointer.
    match unsafe { get(&mut pool, device) } {
        hipSuccess if !pool.is_null() => Some(pool as usize),
        _ => None,
    }
}

/// The pool `hipMallocAsync` allocates from on `device`: the one `hipDeviceSetMemPool` chose
/// (asked of the runtime through `hipDeviceGetMemPool` when it exports it), else the default.
fn current_pool(device: c_int) -> Option<usize> {
    if let Some(addr) = symbols::real(Sym::hipDeviceGetMemPool) {
        // SAFETY: hipDeviceGetMemPool(hipMemPool_t*, int) has the same signature as
        // hipDeviceGetDefaultMemPool (HIP headers).
        let get: hipDeviceGetDefaultMemPool_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
        let mut pool: hipMemPool_t = core::ptr::null_mut();
        // SAFETY: `pool` is a valid out-pointer.
        if unsafe { get(&mut pool, device) } == hipSuccess && !pool.is_null() {
            return Some(pool as usize);
        }
    }
    default_pool(device)
}

/// The device of a pool: remembered from `hipMemPoolCreate`, or found among the devices'
/// default pools (and then remembered).
pub(crate) fn pool_device(state: &State, pool: usize) -> Option<c_int> {
    if let Some(entry) = state.pools.get(pool) {
        return Some(entry.device as c_int);
    }
    for device in 0..crate::config::MAX_DEVICES as c_int {
        let Some(default) = default_pool(device) else {
            break;
        };
        if default == pool {
            let entry = amvgpu_ledger::Entry {
                bytes: 0,
                device: device as u32,
                door: 2,
            };
            let _ = state.pools.insert(pool, entry);
            return Some(device);
        }
    }
    None
}

/// A stream-ordered door. Mirrors the pool model of the runtime: a block the pool cached at
/// `hipFreeAsync` is still charged, so when the runtime hands a cached block back out, the
/// fresh reservation made for this call is returned and the cached charge becomes live again.
///
/// # Safety
/// `ptr` is the caller's out-pointer; `call` the real door.
unsafe fn pool_allocation(
    state: &State,
    name: &'static str,
    ptr: *mut *mut c_void,
    size: usize,
    device: c_int,
    pool: usize,
    call: impl FnOnce() -> hipError_t,
) -> hipError_t {
    let Some(bytes) = linear_bytes(size) else {
        return overflow(name, format_args!("{size} bytes"));
    };
    let charge = Charge {
        device,
        bytes: bytes as u64,
        door: door::POOL,
        name,
    };
    let Some(limit) = state.allowance(device) else {
        return call();
    };
    if bytes == 0 || !(0..crate::config::MAX_DEVICES as c_int).contains(&device) {
        return allocate(
            state,
            charge,
            call,
            || {
                // SAFETY: the runtime writes this out-pointer on success; it is the caller's (NULL or valid).
                unsafe { read_in(ptr) }
                    .filter(|p| !p.is_null())
                    .map(|p| (p as usize, bytes as u64))
            },
            undo_pointer,
        );
    }
    if let Err(refused) = state.ledger.reserve(device as u32, bytes as u64, limit) {
        // The pools' caches may be what fills the limit: return them to the device (what a
        // synchronisation would do; invisible to the program) and try once more.
        if super::free::trim_device_caches(state, device) == 0 {
            super::log_refusal(state, &charge, &refused);
            return hipErrorOutOfMemory;
        }
        if !super::reserve(state, &charge, bytes as u64, limit) {
            return hipErrorOutOfMemory;
        }
    }
    let rc = call();
    // SAFETY: written by the runtime on success.
    let out = unsafe { read_in(ptr) }.filter(|p| !p.is_null());
    let (hipSuccess, Some(p)) = (rc, out) else {
        state.ledger.release(device as u32, bytes as u64);
        return rc;
    };
    let key = p as usize;
    let mut charged = bytes as u64;
    if let Some(cached) = state.pool_cache.remove(key) {
        // A cached block was reused: it is already charged.
        state.cache_order.remove(key);
        state.ledger.release(device as u32, bytes as u64);
        charged = cached.bytes;
    }
    let origin = amvgpu_ledger::Entry {
        bytes: pool as u64,
        device: device as u32,
        door: 0,
    };
    let _ = state.async_pool.insert(key, origin);
    track(state, &charge, key, charged, undo_pointer)
}

/// `hipMallocAsync`: from the default pool of the stream's device.
///
/// # Safety
/// HIP's contract for `hipMallocAsync`.
pub unsafe extern "C" fn hipMallocAsync(
    ptr: *mut *mut c_void,
    size: usize,
    stream: hipStream_t,
) -> hipError_t {
    let real = real!(hipMallocAsync: hipMallocAsync_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr, size, stream) };
    };
    // A bad stream: the runtime gives its own error (see `allocate`).
    let device = super::stream::stream_device(stream).map_or(NO_DEVICE, |(device, _)| device);
    let pool = current_pool(device).unwrap_or(0);
    // SAFETY: forwarding the caller's arguments.
    unsafe {
        pool_allocation(
            active.state,
            "hipMallocAsync",
            ptr,
            size,
            device,
            pool,
            || real(ptr, size, stream),
        )
    }
}

/// `hipMallocFromPoolAsync`: on the pool's device.
///
/// # Safety
/// HIP's contract for `hipMallocFromPoolAsync`.
pub unsafe extern "C" fn hipMallocFromPoolAsync(
    ptr: *mut *mut c_void,
    size: usize,
    pool: hipMemPool_t,
    stream: hipStream_t,
) -> hipError_t {
    let real = real!(hipMallocFromPoolAsync: hipMallocFromPoolAsync_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(ptr, size, pool, stream) };
    };
    // A pool the hook never saw created (e.g. imported from another process) is charged to
    // the stream's device: the best estimate there is, and never an uncounted allocation.
    // It is remembered, so that its blocks are cached at hipFreeAsync like any pool's.
    let device = match pool_device(active.state, pool as usize) {
        Some(device) => device,
        None => {
            let device =
                super::stream::stream_device(stream).map_or(NO_DEVICE, |(device, _)| device);
            if let Ok(id) = u32::try_from(device) {
                let entry = amvgpu_ledger::Entry {
                    bytes: 0,
                    device: id,
                    door: 1,
                };
                let _ = active.state.pools.insert(pool as usize, entry);
            }
            device
        }
    };
    // SAFETY: forwarding the caller's arguments.
    unsafe {
        pool_allocation(
            active.state,
            "hipMallocFromPoolAsync",
            ptr,
            size,
            device,
            pool as usize,
            || real(ptr, size, pool, stream),
        )
    }
}

/// `hipMemPoolCreate`: remembers the pool's device (not an allocation).
///
/// # Safety
/// HIP's contract for `hipMemPoolCreate`.
pub unsafe extern "C" fn hipMemPoolCreate(
    pool: *mut hipMemPool_t,
    props: *const hipMemPoolProps,
) -> hipError_t {
    let real = real!(hipMemPoolCreate: hipMemPoolCreate_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(pool, props) };
    let Some(active) = hook() else {
        return rc;
    };
    if rc == hipSuccess {
        // SAFETY: both pointers were accepted by the runtime, so they are valid.
        if let (Some(handle), Some(props)) = unsafe { (read_in(pool), read_in(props)) } {
            if props.location.type_ == hipMemLocationTypeDevice && props.location.id >= 0 {
                let entry = amvgpu_ledger::Entry {
                    bytes: 0,
                    device: props.location.id as u32,
                    door: 1,
                };
                let _ = active.state.pools.insert(handle as usize, entry);
            }
        }
    }
    rc
}

/// `hipMemPoolAttrReleaseThreshold`.
const POOL_ATTR_RELEASE_THRESHOLD: c_int = 0x4;
/// Pool-map flag: the pool's release threshold is not 0, so a synchronisation may leave
/// blocks cached.
const POOL_RETAINS: u8 = 0x80;

/// True if `pool` was given a non-zero release threshold.
pub(crate) fn pool_retains_cache(state: &State, pool: usize) -> bool {
    state
        .pools
        .get(pool)
        .is_some_and(|entry| entry.door & POOL_RETAINS != 0)
}

/// `hipMemPoolSetAttribute`: remembers pools whose release threshold is not 0 (see
/// `free::Cached::Synchronised`).
///
/// # Safety
/// HIP's contract for `hipMemPoolSetAttribute`.
pub unsafe extern "C" fn hipMemPoolSetAttribute(
    pool: hipMemPool_t,
    attr: c_int,
    value: *mut c_void,
) -> hipError_t {
    type SetAttribute = unsafe extern "C" fn(hipMemPool_t, c_int, *mut c_void) -> hipError_t;
    let real = real!(hipMemPoolSetAttribute: SetAttribute);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(pool, attr, value) };
    if rc != hipSuccess || attr != POOL_ATTR_RELEASE_THRESHOLD || value.is_null() {
        return rc;
    }
    let Some(active) = hook() else {
        return rc;
    };
    let state = active.state;
    // SAFETY: the runtime read the threshold (a uint64_t) through `value`.
    let threshold = unsafe { value.cast::<u64>().read_unaligned() };
    if let Some(device) = pool_device(state, pool as usize) {
        let door = state.pools.get(pool as usize).map_or(1, |e| e.door);
        let door = if threshold == 0 {
            door & !POOL_RETAINS
        } else {
            door | POOL_RETAINS
        };
        let entry = amvgpu_ledger::Entry {
            bytes: 0,
            device: device as u32,
            door,
        };
        let _ = state.pools.insert(pool as usize, entry);
    }
    rc
}

/// The device named by a `hipMemAllocationProp`, in the layout of the runtime's ABI.
///
/// # Safety
/// `prop` must be NULL or valid for reading 32 bytes (both layouts are 32 bytes).
unsafe fn allocation_prop_device(
    state: &State,
    prop: *const hipMemAllocationProp,
) -> Option<c_int> {
    let location = if state.rocm6_abi {
        // SAFETY: caller guarantee.
        unsafe { read_in(prop) }?.location
    } else {
        // SAFETY: caller guarantee; same size, ROCm 5 field order.
        unsafe { read_in(prop.cast::<hipMemAllocationProp_R5>()) }?.location
    };
    (location.type_ == hipMemLocationTypeDevice).then_some(location.id)
}

/// `hipMemCreate`: charges the handle's size on `prop->location.id`.
///
/// # Safety
/// HIP's contract for `hipMemCreate`.
pub unsafe extern "C" fn hipMemCreate(
    handle: *mut hipMemGenericAllocationHandle_t,
    size: usize,
    prop: *const hipMemAllocationProp,
    flags: c_ulonglong,
) -> hipError_t {
    let real = real!(hipMemCreate: hipMemCreate_fn);
    let Some(active) = hook() else {
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        return unsafe { real(handle, size, prop, flags) };
    };
    // SAFETY: `prop` is NULL or a valid property struct (HIP contract).
    let Some(device) = (unsafe { allocation_prop_device(active.state, prop) }) else {
        // SAFETY: not a device allocation or no properties: the runtime answers.
        return unsafe { real(handle, size, prop, flags) };
    };
    let charge = Charge {
        device,
        bytes: size as u64,
        door: door::VMM,
        name: "hipMemCreate",
    };
    allocate(
        active.state,
        charge,
        // SAFETY: forwarding the caller's arguments.
        || unsafe { real(handle, size, prop, flags) },
        || {
            // SAFETY: the runtime writes this out-pointer on success; it is the caller's (NULL or valid).
            unsafe { read_in(handle) }
                .filter(|h| !h.is_null())
                .map(|h| (h as usize, size as u64))
        },
        undo_vmm,
    )
}

/// `hipMemMap`: counts the handle's live mappings, so its memory returns only when it is both
/// released and unmapped everywhere.
///
/// # Safety
/// HIP's contract for `hipMemMap`.
pub unsafe extern "C" fn hipMemMap(
    ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: hipMemGenericAllocationHandle_t,
    flags: c_ulonglong,
) -> hipError_t {
    let real = real!(hipMemMap: hipMemMap_fn);
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real(ptr, size, offset, handle, flags) };
    let Some(active) = hook() else {
        return rc;
    };
    let state = active.state;
    if rc != hipSuccess {
        return rc;
    }
    let Some(owner) = state.live.get(handle as usize) else {
        return rc;
    };
    let mapping = amvgpu_ledger::Entry {
        bytes: handle as u64,
        device: owner.device,
        door: 0,
    };
    if state.vmm_maps.insert(ptr as usize, mapping).is_err() {
        log::error!("hipMemMap: cannot record the mapping; its handle stays charged until reset");
        return rc;
    }
    let refs = state
        .vmm_refs
        .get(handle as usize)
        .unwrap_or(amvgpu_ledger::Entry {
            bytes: 0,
            device: owner.device,
            door: 0,
        });
    let _ = state.vmm_refs.insert(
        handle as usize,
        amvgpu_ledger::Entry {
            bytes: refs.bytes + 1,
            ..refs
        },
    );
    rc
}

// The C layouts this file reads, restated where they are used (hip-sys checks them against
// the HIP headers; these fail the build if hip-sys ever changes them).
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<hipExtent>() == 24);
    assert!(size_of::<hipPitchedPtr>() == 32 && offset_of!(hipPitchedPtr, pitch) == 8);
    assert!(size_of::<hipChannelFormatDesc>() == 20);
    assert!(size_of::<HIP_ARRAY_DESCRIPTOR>() == 24);
    assert!(offset_of!(HIP_ARRAY_DESCRIPTOR, Format) == 16);
    assert!(size_of::<HIP_ARRAY3D_DESCRIPTOR>() == 40);
    assert!(offset_of!(HIP_ARRAY3D_DESCRIPTOR, Format) == 24);
    assert!(size_of::<hipMemAllocationProp>() == 32);
    assert!(offset_of!(hipMemAllocationProp, location) == 8);
    assert!(size_of::<hipMemAllocationProp_R5>() == 32);
    assert!(offset_of!(hipMemAllocationProp_R5, location) == 4);
    assert!(size_of::<hipMemPoolProps>() == 88 && offset_of!(hipMemPoolProps, location) == 8);
    assert!(size_of::<hipMemLocation>() == 8 && offset_of!(hipMemLocation, id) == 4);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_sizes_follow_the_descriptors() {
        let rgba8 = hipChannelFormatDesc {
            x: 8,
            y: 8,
            z: 8,
            w: 8,
            f: hipChannelFormatKindUnsigned,
        };
        assert_eq!(channel_bytes(&rgba8), Some(4));
        let odd = hipChannelFormatDesc { x: 3, ..rgba8 };
        assert_eq!(channel_bytes(&odd), None);
        let negative = hipChannelFormatDesc { x: -8, ..rgba8 };
        assert_eq!(channel_bytes(&negative), None);
        assert_eq!(format_bytes(HIP_AD_FORMAT_FLOAT, 4), Some(16));
        assert_eq!(format_bytes(HIP_AD_FORMAT_FLOAT, 3), None);
        assert_eq!(format_bytes(0x77, 1), None);
    }

    #[test]
    fn array_sizes_refuse_overflow_and_zero_width() {
        assert_eq!(array_size(Some(4), 1024, 0, 0), ArraySize::Bytes(4096));
        assert_eq!(array_size(Some(4), 0, 10, 0), ArraySize::Unsizable);
        assert_eq!(
            array_size(Some(16), usize::MAX / 2, 2, 0),
            ArraySize::Overflow
        );
        assert_eq!(array_size(None, 16, 16, 0), ArraySize::Unsizable);
        let huge = hipExtent {
            width: usize::MAX / 4,
            height: 4,
            depth: 0,
        };
        assert_eq!(mipmapped_size(Some(4), huge, 2), ArraySize::Overflow);
    }
}
