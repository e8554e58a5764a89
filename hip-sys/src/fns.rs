//! One function-pointer type per door, and the table of doors with their symbol-version nodes.
//!
//! # Sources of the version nodes
//! - ROCm 5 column: `objdump -T /usr/lib/x86_64-linux-gnu/libamdhip64.so.5` of Debian's
//!   `libamdhip64-5` 5.2.3-8 on this machine (measured).
//! - ROCm 7 column: `hipamd/src/hip_hcc.map.in` in ROCm/clr (develop) and
//!   `projects/clr/hipamd/src/hip_hcc.map.in` in ROCm/rocm-systems (ROCm 7.2 era), read with the
//!   search tool. The nodes are append-only (`hip_4.2` ... `hip_7.2`, each inheriting the last);
//!   no door moved between nodes across those versions.
//! - ROCm 6 column: **inferred** from the same map by dropping the `hip_7.*` nodes (so
//!   `hipGetDriverEntryPoint`, node `hip_7.1`, is absent from ROCm 6). `hipGetDevicePropertiesR0000`
//!   sits in node `hip_4.2` in the map but is absent from the ROCm 5.2 binary: it was added with
//!   the R0600 split in ROCm 6.0 (inferred from the 6.0 node holding `hipGetDevicePropertiesR0600`).
//!   "ROCm 6" means the last 6.x (chain up to `hip_6.5`): a ROCm 6.0 library lacks
//!   `hipGetProcAddress` (node `hip_6.1`). "ROCm 7" means 7.2 (chain up to `hip_7.2`); ROCm 7.0
//!   lacks `hipGetDriverEntryPoint` (node `hip_7.1`).

use crate::attr::hipDeviceAttribute_t;
use crate::error::hipError_t;
use crate::props::{hipDeviceProp_tR0000, hipDeviceProp_tR0600};
use crate::types::*;
use core::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

pub type hipMalloc_fn = unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize) -> hipError_t;
pub type hipExtMallocWithFlags_fn =
    unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> hipError_t;
pub type hipMallocManaged_fn =
    unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> hipError_t;
pub type hipMallocPitch_fn = unsafe extern "C" fn(
    ptr: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    height: usize,
) -> hipError_t;
pub type hipMemAllocPitch_fn = unsafe extern "C" fn(
    dptr: *mut hipDeviceptr_t,
    pitch: *mut usize,
    width_bytes: usize,
    height: usize,
    element_size_bytes: c_uint,
) -> hipError_t;
pub type hipMalloc3D_fn =
    unsafe extern "C" fn(pitched: *mut hipPitchedPtr, extent: hipExtent) -> hipError_t;
pub type hipMallocArray_fn = unsafe extern "C" fn(
    array: *mut hipArray_t,
    desc: *const hipChannelFormatDesc,
    width: usize,
    height: usize,
    flags: c_uint,
) -> hipError_t;
pub type hipMalloc3DArray_fn = unsafe extern "C" fn(
    array: *mut hipArray_t,
    desc: *const hipChannelFormatDesc,
    extent: hipExtent,
    flags: c_uint,
) -> hipError_t;
pub type hipArrayCreate_fn =
    unsafe extern "C" fn(array: *mut hipArray_t, desc: *const HIP_ARRAY_DESCRIPTOR) -> hipError_t;
pub type hipArray3DCreate_fn =
    unsafe extern "C" fn(array: *mut hipArray_t, desc: *const HIP_ARRAY3D_DESCRIPTOR) -> hipError_t;
pub type hipMallocMipmappedArray_fn = unsafe extern "C" fn(
    array: *mut hipMipmappedArray_t,
    desc: *const hipChannelFormatDesc,
    extent: hipExtent,
    num_levels: c_uint,
    flags: c_uint,
) -> hipError_t;
pub type hipMipmappedArrayCreate_fn = unsafe extern "C" fn(
    array: *mut hipMipmappedArray_t,
    desc: *mut HIP_ARRAY3D_DESCRIPTOR,
    num_levels: c_uint,
) -> hipError_t;
pub type hipMallocAsync_fn =
    unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize, stream: hipStream_t) -> hipError_t;
pub type hipMallocFromPoolAsync_fn = unsafe extern "C" fn(
    ptr: *mut *mut c_void,
    size: usize,
    pool: hipMemPool_t,
    stream: hipStream_t,
) -> hipError_t;
pub type hipMemCreate_fn = unsafe extern "C" fn(
    handle: *mut hipMemGenericAllocationHandle_t,
    size: usize,
    prop: *const hipMemAllocationProp,
    flags: c_ulonglong,
) -> hipError_t;
pub type hipMemRelease_fn =
    unsafe extern "C" fn(handle: hipMemGenericAllocationHandle_t) -> hipError_t;
pub type hipMemAddressReserve_fn = unsafe extern "C" fn(
    ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    addr: *mut c_void,
    flags: c_ulonglong,
) -> hipError_t;
pub type hipMemAddressFree_fn = unsafe extern "C" fn(ptr: *mut c_void, size: usize) -> hipError_t;
pub type hipMemMap_fn = unsafe extern "C" fn(
    ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: hipMemGenericAllocationHandle_t,
    flags: c_ulonglong,
) -> hipError_t;
pub type hipMemUnmap_fn = unsafe extern "C" fn(ptr: *mut c_void, size: usize) -> hipError_t;
pub type hipMemSetAccess_fn = unsafe extern "C" fn(
    ptr: *mut c_void,
    size: usize,
    desc: *const hipMemAccessDesc,
    count: usize,
) -> hipError_t;
pub type hipMemGetAllocationGranularity_fn = unsafe extern "C" fn(
    granularity: *mut usize,
    prop: *const hipMemAllocationProp,
    option: hipMemAllocationGranularity_flags,
) -> hipError_t;
pub type hipFree_fn = unsafe extern "C" fn(ptr: *mut c_void) -> hipError_t;
pub type hipFreeAsync_fn =
    unsafe extern "C" fn(ptr: *mut c_void, stream: hipStream_t) -> hipError_t;
pub type hipFreeArray_fn = unsafe extern "C" fn(array: hipArray_t) -> hipError_t;
pub type hipArrayDestroy_fn = unsafe extern "C" fn(array: hipArray_t) -> hipError_t;
pub type hipFreeMipmappedArray_fn = unsafe extern "C" fn(array: hipMipmappedArray_t) -> hipError_t;
pub type hipMipmappedArrayDestroy_fn =
    unsafe extern "C" fn(array: hipMipmappedArray_t) -> hipError_t;
pub type hipMemPoolTrimTo_fn =
    unsafe extern "C" fn(pool: hipMemPool_t, min_bytes_to_hold: usize) -> hipError_t;
pub type hipDeviceReset_fn = unsafe extern "C" fn() -> hipError_t;
pub type hipGetDevice_fn = unsafe extern "C" fn(device: *mut c_int) -> hipError_t;
pub type hipSetDevice_fn = unsafe extern "C" fn(device: c_int) -> hipError_t;
pub type hipGetDeviceCount_fn = unsafe extern "C" fn(count: *mut c_int) -> hipError_t;
pub type hipCtxGetCurrent_fn = unsafe extern "C" fn(ctx: *mut hipCtx_t) -> hipError_t;
pub type hipCtxSetCurrent_fn = unsafe extern "C" fn(ctx: hipCtx_t) -> hipError_t;
pub type hipDeviceSynchronize_fn = unsafe extern "C" fn() -> hipError_t;
pub type hipStreamCreate_fn = unsafe extern "C" fn(stream: *mut hipStream_t) -> hipError_t;
pub type hipStreamDestroy_fn = unsafe extern "C" fn(stream: hipStream_t) -> hipError_t;
pub type hipStreamSynchronize_fn = unsafe extern "C" fn(stream: hipStream_t) -> hipError_t;
pub type hipExtStreamCreateWithCUMask_fn = unsafe extern "C" fn(
    stream: *mut hipStream_t,
    cu_mask_size: u32,
    cu_mask: *const u32,
) -> hipError_t;
pub type hipMemcpy_fn = unsafe extern "C" fn(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
) -> hipError_t;
pub type hipMemset_fn =
    unsafe extern "C" fn(dst: *mut c_void, value: c_int, size: usize) -> hipError_t;
pub type hipMemPoolCreate_fn =
    unsafe extern "C" fn(pool: *mut hipMemPool_t, props: *const hipMemPoolProps) -> hipError_t;
pub type hipMemPoolDestroy_fn = unsafe extern "C" fn(pool: hipMemPool_t) -> hipError_t;
pub type hipDeviceGetDefaultMemPool_fn =
    unsafe extern "C" fn(pool: *mut hipMemPool_t, device: c_int) -> hipError_t;
/// HIP 6.1 signature.
pub type hipGetProcAddress_fn = unsafe extern "C" fn(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    hip_version: c_int,
    flags: u64,
    status: *mut hipDriverProcAddressQueryResult,
) -> hipError_t;
pub type hipGetDriverEntryPoint_fn = unsafe extern "C" fn(
    symbol: *const c_char,
    func_ptr: *mut *mut c_void,
    flags: c_ulonglong,
    status: *mut hipDriverEntryPointQueryResult,
) -> hipError_t;
pub type hipDeviceGetAttribute_fn = unsafe extern "C" fn(
    value: *mut c_int,
    attr: hipDeviceAttribute_t,
    device: c_int,
) -> hipError_t;
pub type hipDeviceTotalMem_fn =
    unsafe extern "C" fn(bytes: *mut usize, device: hipDevice_t) -> hipError_t;
pub type hipMemGetInfo_fn = unsafe extern "C" fn(free: *mut usize, total: *mut usize) -> hipError_t;
/// The plain `hipGetDeviceProperties` export fills the legacy (R0000) layout.
pub type hipGetDeviceProperties_fn =
    unsafe extern "C" fn(prop: *mut hipDeviceProp_tR0000, device: c_int) -> hipError_t;
pub type hipGetDevicePropertiesR0000_fn =
    unsafe extern "C" fn(prop: *mut hipDeviceProp_tR0000, device: c_int) -> hipError_t;
pub type hipGetDevicePropertiesR0600_fn =
    unsafe extern "C" fn(prop: *mut hipDeviceProp_tR0600, device: c_int) -> hipError_t;
pub type hipMemPtrGetInfo_fn =
    unsafe extern "C" fn(ptr: *mut c_void, size: *mut usize) -> hipError_t;
pub type hipGetErrorString_fn = unsafe extern "C" fn(code: hipError_t) -> *const c_char;
pub type hipGetErrorName_fn = unsafe extern "C" fn(code: hipError_t) -> *const c_char;
pub type hipInit_fn = unsafe extern "C" fn(flags: c_uint) -> hipError_t;
pub type hipRuntimeGetVersion_fn = unsafe extern "C" fn(version: *mut c_int) -> hipError_t;
pub type hipDriverGetVersion_fn = unsafe extern "C" fn(version: *mut c_int) -> hipError_t;

/// A ROCm major-version ABI: which symbols `libamdhip64` exports and under which nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RocmAbi {
    Rocm5,
    Rocm6,
    Rocm7,
}

impl RocmAbi {
    pub const ALL: [RocmAbi; 3] = [RocmAbi::Rocm5, RocmAbi::Rocm6, RocmAbi::Rocm7];

    /// The major version number (5, 6 or 7).
    pub const fn major(self) -> u32 {
        match self {
            RocmAbi::Rocm5 => 5,
            RocmAbi::Rocm6 => 6,
            RocmAbi::Rocm7 => 7,
        }
    }

    /// Parses `"5"`, `"6"` or `"7"`.
    pub fn from_major(text: &str) -> Option<RocmAbi> {
        match text.trim() {
            "5" => Some(RocmAbi::Rocm5),
            "6" => Some(RocmAbi::Rocm6),
            "7" => Some(RocmAbi::Rocm7),
            _ => None,
        }
    }
}

/// What family a door belongs to (what the hook does with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DoorKind {
    /// Takes device memory.
    Alloc,
    /// Gives device memory back (possibly deferred, e.g. VMM release while mapped).
    Free,
    /// Reports memory sizes or device properties.
    Query,
    /// Hands out function pointers (from the runtime's own tables, not a symbol lookup).
    Lookup,
    /// Device/context/stream management and everything else.
    Other,
}

/// One exported HIP function with its symbol-version node per ABI (`None`: not exported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Door {
    pub name: &'static str,
    pub kind: DoorKind,
    pub rocm5: Option<&'static str>,
    pub rocm6: Option<&'static str>,
    pub rocm7: Option<&'static str>,
}

impl Door {
    /// The version node of this door in `abi`, or `None` if that ABI does not export it.
    pub const fn node(&self, abi: RocmAbi) -> Option<&'static str> {
        match abi {
            RocmAbi::Rocm5 => self.rocm5,
            RocmAbi::Rocm6 => self.rocm6,
            RocmAbi::Rocm7 => self.rocm7,
        }
    }
}

const fn all(name: &'static str, kind: DoorKind, node: &'static str) -> Door {
    Door {
        name,
        kind,
        rocm5: Some(node),
        rocm6: Some(node),
        rocm7: Some(node),
    }
}

/// Every HIP function the simulator exports, with its node in ROCm 5, 6 and 7.
pub const DOORS: &[Door] = &[
    all("hipMalloc", DoorKind::Alloc, "hip_4.2"),
    all("hipExtMallocWithFlags", DoorKind::Alloc, "hip_4.2"),
    all("hipMallocManaged", DoorKind::Alloc, "hip_4.2"),
    all("hipMallocPitch", DoorKind::Alloc, "hip_4.2"),
    all("hipMemAllocPitch", DoorKind::Alloc, "hip_4.2"),
    all("hipMalloc3D", DoorKind::Alloc, "hip_4.2"),
    all("hipMallocArray", DoorKind::Alloc, "hip_4.2"),
    all("hipMalloc3DArray", DoorKind::Alloc, "hip_4.2"),
    all("hipArrayCreate", DoorKind::Alloc, "hip_4.2"),
    all("hipArray3DCreate", DoorKind::Alloc, "hip_4.2"),
    all("hipMallocMipmappedArray", DoorKind::Alloc, "hip_4.2"),
    all("hipMipmappedArrayCreate", DoorKind::Alloc, "hip_4.2"),
    all("hipMallocAsync", DoorKind::Alloc, "hip_5.1"),
    all("hipMallocFromPoolAsync", DoorKind::Alloc, "hip_5.1"),
    all("hipMemCreate", DoorKind::Alloc, "hip_5.1"),
    all("hipMemAddressReserve", DoorKind::Other, "hip_5.1"),
    all("hipMemAddressFree", DoorKind::Other, "hip_5.1"),
    all("hipMemMap", DoorKind::Other, "hip_5.1"),
    all("hipMemUnmap", DoorKind::Free, "hip_5.1"),
    all("hipMemSetAccess", DoorKind::Other, "hip_5.1"),
    all("hipMemGetAllocationGranularity", DoorKind::Query, "hip_5.1"),
    all("hipMemRelease", DoorKind::Free, "hip_5.1"),
    all("hipFree", DoorKind::Free, "hip_4.2"),
    all("hipFreeAsync", DoorKind::Free, "hip_5.1"),
    all("hipFreeArray", DoorKind::Free, "hip_4.2"),
    all("hipArrayDestroy", DoorKind::Free, "hip_4.3"),
    all("hipFreeMipmappedArray", DoorKind::Free, "hip_4.2"),
    all("hipMipmappedArrayDestroy", DoorKind::Free, "hip_4.2"),
    all("hipMemPoolTrimTo", DoorKind::Free, "hip_5.1"),
    all("hipDeviceReset", DoorKind::Free, "hip_4.2"),
    all("hipGetDevice", DoorKind::Other, "hip_4.2"),
    all("hipSetDevice", DoorKind::Other, "hip_4.2"),
    all("hipGetDeviceCount", DoorKind::Other, "hip_4.2"),
    all("hipCtxGetCurrent", DoorKind::Other, "hip_4.2"),
    all("hipCtxSetCurrent", DoorKind::Other, "hip_4.2"),
    all("hipDeviceSynchronize", DoorKind::Other, "hip_4.2"),
    all("hipStreamCreate", DoorKind::Other, "hip_4.2"),
    all("hipStreamDestroy", DoorKind::Other, "hip_4.2"),
    all("hipStreamSynchronize", DoorKind::Other, "hip_4.2"),
    all("hipExtStreamCreateWithCUMask", DoorKind::Other, "hip_4.2"),
    all("hipMemcpy", DoorKind::Other, "hip_4.2"),
    all("hipMemset", DoorKind::Other, "hip_4.2"),
    all("hipMemPoolCreate", DoorKind::Other, "hip_5.1"),
    all("hipMemPoolDestroy", DoorKind::Free, "hip_5.1"),
    all("hipDeviceGetDefaultMemPool", DoorKind::Other, "hip_5.1"),
    Door {
        name: "hipGetProcAddress",
        kind: DoorKind::Lookup,
        rocm5: None,
        rocm6: Some("hip_6.1"),
        rocm7: Some("hip_6.1"),
    },
    Door {
        name: "hipGetDriverEntryPoint",
        kind: DoorKind::Lookup,
        rocm5: None,
        rocm6: None,
        rocm7: Some("hip_7.1"),
    },
    all("hipDeviceGetAttribute", DoorKind::Query, "hip_4.2"),
    all("hipDeviceTotalMem", DoorKind::Query, "hip_4.2"),
    all("hipMemGetInfo", DoorKind::Query, "hip_4.2"),
    all("hipGetDeviceProperties", DoorKind::Query, "hip_4.2"),
    Door {
        name: "hipGetDevicePropertiesR0000",
        kind: DoorKind::Query,
        rocm5: None,
        rocm6: Some("hip_4.2"),
        rocm7: Some("hip_4.2"),
    },
    Door {
        name: "hipGetDevicePropertiesR0600",
        kind: DoorKind::Query,
        rocm5: None,
        rocm6: Some("hip_6.0"),
        rocm7: Some("hip_6.0"),
    },
    all("hipMemPtrGetInfo", DoorKind::Query, "hip_4.2"),
    all("hipGetErrorString", DoorKind::Other, "hip_4.2"),
    all("hipGetErrorName", DoorKind::Other, "hip_4.2"),
    all("hipInit", DoorKind::Other, "hip_4.2"),
    all("hipRuntimeGetVersion", DoorKind::Other, "hip_4.2"),
    all("hipDriverGetVersion", DoorKind::Other, "hip_4.2"),
];

/// The door named `name`, if the table has it.
pub fn door(name: &str) -> Option<&'static Door> {
    DOORS.iter().find(|d| d.name == name)
}

/// The version nodes of `abi` in definition order (each inherits the previous one), as the
/// real `hip_hcc.map.in` chains them. Nodes no simulated door uses are still listed so that a
/// version script built from this reproduces the real chain.
pub const fn version_chain(abi: RocmAbi) -> &'static [&'static str] {
    const R5: &[&str] = &[
        "hip_4.2", "hip_4.3", "hip_4.4", "hip_4.5", "hip_5.0", "hip_5.1", "hip_5.2",
    ];
    const R6: &[&str] = &[
        "hip_4.2", "hip_4.3", "hip_4.4", "hip_4.5", "hip_5.0", "hip_5.1", "hip_5.2", "hip_5.3",
        "hip_5.5", "hip_5.6", "hip_6.0", "hip_6.1", "hip_6.2", "hip_6.4", "hip_6.5",
    ];
    const R7: &[&str] = &[
        "hip_4.2", "hip_4.3", "hip_4.4", "hip_4.5", "hip_5.0", "hip_5.1", "hip_5.2", "hip_5.3",
        "hip_5.5", "hip_5.6", "hip_6.0", "hip_6.1", "hip_6.2", "hip_6.4", "hip_6.5", "hip_7.1",
        "hip_7.2",
    ];
    match abi {
        RocmAbi::Rocm5 => R5,
        RocmAbi::Rocm6 => R6,
        RocmAbi::Rocm7 => R7,
    }
}
