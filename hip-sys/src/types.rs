//! Structs and handles of the allocation doors.
//!
//! Layouts are x86-64 SysV (LP64). Each struct has compile-time size/offset checks; the values
//! were measured with `cc` against Debian's ROCm 5.2 headers (see `tests/layout.rs`, which also
//! compares them with the bindgen output in [`crate::generated`]) or, for ROCm 6+ layouts, read
//! from ROCm 7.x's `hip_runtime_api.h` / `driver_types.h`.

use core::ffi::{c_int, c_uint, c_void};
use core::mem::{offset_of, size_of};

/// A device ordinal (`typedef int hipDevice_t`).
pub type hipDevice_t = c_int;
/// A device pointer in the driver-style API (`typedef void* hipDeviceptr_t`).
pub type hipDeviceptr_t = *mut c_void;

macro_rules! opaque_handle {
    ($(#[$doc:meta])* $target:ident, $handle:ident) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Debug)]
        pub struct $target {
            _private: [u8; 0],
        }
        /// Handle type: a pointer the runtime owns and the caller never dereferences.
        pub type $handle = *mut $target;
    };
}

opaque_handle!(
    /// Stream object (`struct ihipStream_t`). The null handle is the default stream.
    ihipStream_t,
    hipStream_t
);
opaque_handle!(
    /// Context object (`struct ihipCtx_t`).
    ihipCtx_t,
    hipCtx_t
);
opaque_handle!(
    /// Memory pool object (`struct ihipMemPoolHandle_t`).
    ihipMemPoolHandle_t,
    hipMemPool_t
);
opaque_handle!(
    /// VMM physical allocation (`struct ihipMemGenericAllocationHandle`).
    ihipMemGenericAllocationHandle,
    hipMemGenericAllocationHandle_t
);
opaque_handle!(
    /// Array object. ROCm 5 exposes its fields (`struct hipArray { void* data; ... }`), ROCm 6+
    /// keeps them private; callers only ever hold the pointer, so it is opaque here.
    hipArray,
    hipArray_t
);
opaque_handle!(
    /// Mipmapped array object; opaque for the same reason as [`hipArray`].
    hipMipmappedArray,
    hipMipmappedArray_t
);

/// `hipMemcpyKind`.
pub type hipMemcpyKind = c_int;
pub const hipMemcpyHostToHost: hipMemcpyKind = 0;
pub const hipMemcpyHostToDevice: hipMemcpyKind = 1;
pub const hipMemcpyDeviceToHost: hipMemcpyKind = 2;
pub const hipMemcpyDeviceToDevice: hipMemcpyKind = 3;
pub const hipMemcpyDefault: hipMemcpyKind = 4;

/// Flags of `hipMallocManaged`.
pub const hipMemAttachGlobal: c_uint = 0x01;
pub const hipMemAttachHost: c_uint = 0x02;

/// `hipExtent`: width in bytes for linear memory, in elements for arrays.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct hipExtent {
    pub width: usize,
    pub height: usize,
    pub depth: usize,
}
const _: () = assert!(size_of::<hipExtent>() == 24);

/// `hipPitchedPtr`, filled by `hipMalloc3D`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipPitchedPtr {
    pub ptr: *mut c_void,
    pub pitch: usize,
    pub xsize: usize,
    pub ysize: usize,
}
const _: () = assert!(size_of::<hipPitchedPtr>() == 32);
const _: () = assert!(offset_of!(hipPitchedPtr, pitch) == 8);

/// `hipChannelFormatKind`.
pub type hipChannelFormatKind = c_int;
pub const hipChannelFormatKindSigned: hipChannelFormatKind = 0;
pub const hipChannelFormatKindUnsigned: hipChannelFormatKind = 1;
pub const hipChannelFormatKindFloat: hipChannelFormatKind = 2;
pub const hipChannelFormatKindNone: hipChannelFormatKind = 3;

/// `hipChannelFormatDesc`: bits per channel x, y, z, w.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct hipChannelFormatDesc {
    pub x: c_int,
    pub y: c_int,
    pub z: c_int,
    pub w: c_int,
    pub f: hipChannelFormatKind,
}
const _: () = assert!(size_of::<hipChannelFormatDesc>() == 20);

/// `hipArray_Format` (driver-style element formats).
pub type hipArray_Format = c_int;
pub const HIP_AD_FORMAT_UNSIGNED_INT8: hipArray_Format = 0x01;
pub const HIP_AD_FORMAT_UNSIGNED_INT16: hipArray_Format = 0x02;
pub const HIP_AD_FORMAT_UNSIGNED_INT32: hipArray_Format = 0x03;
pub const HIP_AD_FORMAT_SIGNED_INT8: hipArray_Format = 0x08;
pub const HIP_AD_FORMAT_SIGNED_INT16: hipArray_Format = 0x09;
pub const HIP_AD_FORMAT_SIGNED_INT32: hipArray_Format = 0x0a;
pub const HIP_AD_FORMAT_HALF: hipArray_Format = 0x10;
pub const HIP_AD_FORMAT_FLOAT: hipArray_Format = 0x20;

/// Bytes per channel of a `hipArray_Format`, or `None` for an unknown format.
pub const fn array_format_bytes(format: hipArray_Format) -> Option<usize> {
    match format {
        HIP_AD_FORMAT_UNSIGNED_INT8 | HIP_AD_FORMAT_SIGNED_INT8 => Some(1),
        HIP_AD_FORMAT_UNSIGNED_INT16 | HIP_AD_FORMAT_SIGNED_INT16 | HIP_AD_FORMAT_HALF => Some(2),
        HIP_AD_FORMAT_UNSIGNED_INT32 | HIP_AD_FORMAT_SIGNED_INT32 | HIP_AD_FORMAT_FLOAT => Some(4),
        _ => None,
    }
}

/// `HIP_ARRAY_DESCRIPTOR` (`hipArrayCreate`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HIP_ARRAY_DESCRIPTOR {
    pub Width: usize,
    pub Height: usize,
    pub Format: hipArray_Format,
    pub NumChannels: c_uint,
}
const _: () = assert!(size_of::<HIP_ARRAY_DESCRIPTOR>() == 24);
const _: () = assert!(offset_of!(HIP_ARRAY_DESCRIPTOR, Format) == 16);

/// `HIP_ARRAY3D_DESCRIPTOR` (`hipArray3DCreate`, `hipMipmappedArrayCreate`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HIP_ARRAY3D_DESCRIPTOR {
    pub Width: usize,
    pub Height: usize,
    pub Depth: usize,
    pub Format: hipArray_Format,
    pub NumChannels: c_uint,
    pub Flags: c_uint,
}
const _: () = assert!(size_of::<HIP_ARRAY3D_DESCRIPTOR>() == 40);
const _: () = assert!(offset_of!(HIP_ARRAY3D_DESCRIPTOR, Format) == 24);

/// `hipMemLocationType`.
pub type hipMemLocationType = c_int;
pub const hipMemLocationTypeInvalid: hipMemLocationType = 0;
pub const hipMemLocationTypeDevice: hipMemLocationType = 1;

/// `hipMemLocation`: `id` is the device ordinal when `type_` is `hipMemLocationTypeDevice`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct hipMemLocation {
    pub type_: hipMemLocationType,
    pub id: c_int,
}
const _: () = assert!(size_of::<hipMemLocation>() == 8);

/// `hipMemAllocationType`.
pub type hipMemAllocationType = c_int;
pub const hipMemAllocationTypeInvalid: hipMemAllocationType = 0;
pub const hipMemAllocationTypePinned: hipMemAllocationType = 1;

/// `hipMemAllocationHandleType`.
pub type hipMemAllocationHandleType = c_int;
pub const hipMemHandleTypeNone: hipMemAllocationHandleType = 0;
pub const hipMemHandleTypePosixFileDescriptor: hipMemAllocationHandleType = 1;

/// `hipMemAllocationGranularity_flags`.
pub type hipMemAllocationGranularity_flags = c_int;
pub const hipMemAllocationGranularityMinimum: hipMemAllocationGranularity_flags = 0;
pub const hipMemAllocationGranularityRecommended: hipMemAllocationGranularity_flags = 1;

/// The `allocFlags` member of ROCm 6+'s [`hipMemAllocationProp`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct hipMemAllocationPropFlags {
    pub compressionType: u8,
    pub gpuDirectRDMACapable: u8,
    pub usage: u16,
}

/// `hipMemAllocationProp` as ROCm 6 and 7 define it (`hipMemCreate`,
/// `hipMemGetAllocationGranularity`). The device is `location.id`, at offset 12.
///
/// ROCm 5 used a different order; see [`hipMemAllocationProp_R5`]. The simulator implements
/// this (ROCm 6+) layout.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemAllocationProp {
    pub type_: hipMemAllocationType,
    pub requestedHandleType: hipMemAllocationHandleType,
    pub location: hipMemLocation,
    pub win32HandleMetaData: *mut c_void,
    pub allocFlags: hipMemAllocationPropFlags,
}
const _: () = assert!(size_of::<hipMemAllocationProp>() == 32);
const _: () = assert!(offset_of!(hipMemAllocationProp, location) == 8);
const _: () = assert!(offset_of!(hipMemAllocationProp, win32HandleMetaData) == 16);

/// `hipMemAllocationProp` as ROCm 5.2 defines it (Debian's `libamdhip64-dev`): the device is
/// `location.id` at offset 8, not 12. A hook reading the device of a `hipMemCreate` call must
/// know which ABI the program was built against.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemAllocationProp_R5 {
    pub compressionType: u8,
    pub location: hipMemLocation,
    pub requestedHandleType: hipMemAllocationHandleType,
    pub type_: hipMemAllocationType,
    pub usage: u16,
    pub win32HandleMetaData: *mut c_void,
}
const _: () = assert!(size_of::<hipMemAllocationProp_R5>() == 32);
const _: () = assert!(offset_of!(hipMemAllocationProp_R5, location) == 4);

/// `hipMemAccessFlags`.
pub type hipMemAccessFlags = c_int;
pub const hipMemAccessFlagsProtNone: hipMemAccessFlags = 0;
pub const hipMemAccessFlagsProtRead: hipMemAccessFlags = 1;
pub const hipMemAccessFlagsProtReadWrite: hipMemAccessFlags = 3;

/// `hipMemAccessDesc` (`hipMemSetAccess`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct hipMemAccessDesc {
    pub location: hipMemLocation,
    pub flags: hipMemAccessFlags,
}
const _: () = assert!(size_of::<hipMemAccessDesc>() == 12);

/// `hipMemPoolProps` (`hipMemPoolCreate`). ROCm 6.x split 8 bytes of `reserved` off into
/// `maxSize`; the size (88) and the offset of `location` (8) are the same in ROCm 5, 6 and 7.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemPoolProps {
    pub allocType: hipMemAllocationType,
    pub handleTypes: hipMemAllocationHandleType,
    pub location: hipMemLocation,
    pub win32SecurityAttributes: *mut c_void,
    pub maxSize: usize,
    pub reserved: [u8; 56],
}
const _: () = assert!(size_of::<hipMemPoolProps>() == 88);
const _: () = assert!(offset_of!(hipMemPoolProps, location) == 8);

/// `hipDriverProcAddressQueryResult` (`hipGetProcAddress`, HIP 6.1+).
pub type hipDriverProcAddressQueryResult = c_int;
pub const HIP_GET_PROC_ADDRESS_SUCCESS: hipDriverProcAddressQueryResult = 0;
pub const HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND: hipDriverProcAddressQueryResult = 1;
pub const HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT: hipDriverProcAddressQueryResult = 2;

/// `hipDriverEntryPointQueryResult` (`hipGetDriverEntryPoint`, ROCm 7.1+ export).
pub type hipDriverEntryPointQueryResult = c_int;
pub const hipDriverEntryPointSuccess: hipDriverEntryPointQueryResult = 0;
pub const hipDriverEntryPointSymbolNotFound: hipDriverEntryPointQueryResult = 1;
pub const hipDriverEntryPointVersionNotSufficent: hipDriverEntryPointQueryResult = 2;

/// `hipGetProcAddress` flags.
pub const HIP_GET_PROC_ADDRESS_DEFAULT: u64 = 0;
pub const HIP_GET_PROC_ADDRESS_LEGACY_STREAM: u64 = 1;
pub const HIP_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: u64 = 2;

/// `hipExtMallocWithFlags` flags.
pub const hipDeviceMallocDefault: c_uint = 0x0;
pub const hipDeviceMallocFinegrained: c_uint = 0x1;
pub const hipMallocSignalMemory: c_uint = 0x2;
pub const hipDeviceMallocUncached: c_uint = 0x3;
