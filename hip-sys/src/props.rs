//! The two device-property layouts.
//!
//! - [`hipDeviceProp_tR0000`]: ROCm 5's `hipDeviceProp_t` (Debian's ROCm 5.2 header), filled by
//!   the plain `hipGetDeviceProperties` export of every ROCm and by `hipGetDevicePropertiesR0000`
//!   (exported from ROCm 6.0 on, node `hip_4.2`).
//! - [`hipDeviceProp_tR0600`]: ROCm 6's layout, filled by `hipGetDevicePropertiesR0600` (node
//!   `hip_6.0`). ROCm 6+ headers `#define hipGetDeviceProperties hipGetDevicePropertiesR0600`, so
//!   programs compiled against ROCm 6 call the R0600 symbol.
//!
//! Sizes and `totalGlobalMem` offsets are asserted at compile time; they were measured with `cc`
//! (R0000 against `/usr/include/hip/hip_runtime_api.h` from libamdhip64-dev 5.2.3; R0600 against
//! a transcription of ROCm 7.x's header, whose R0600 struct is unchanged since 6.0).

use core::ffi::{c_char, c_int, c_uint};
use core::mem::{offset_of, size_of};

/// `hipDeviceArch_t`: 17 one-bit flags packed into one `unsigned int`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct hipDeviceArch_t {
    pub bits: c_uint,
}

/// `hipUUID`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct hipUUID {
    pub bytes: [c_char; 16],
}

/// Legacy (ROCm 5) device properties.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipDeviceProp_tR0000 {
    pub name: [c_char; 256],
    pub totalGlobalMem: usize,
    pub sharedMemPerBlock: usize,
    pub regsPerBlock: c_int,
    pub warpSize: c_int,
    pub maxThreadsPerBlock: c_int,
    pub maxThreadsDim: [c_int; 3],
    pub maxGridSize: [c_int; 3],
    pub clockRate: c_int,
    pub memoryClockRate: c_int,
    pub memoryBusWidth: c_int,
    pub totalConstMem: usize,
    pub major: c_int,
    pub minor: c_int,
    pub multiProcessorCount: c_int,
    pub l2CacheSize: c_int,
    pub maxThreadsPerMultiProcessor: c_int,
    pub computeMode: c_int,
    pub clockInstructionRate: c_int,
    pub arch: hipDeviceArch_t,
    pub concurrentKernels: c_int,
    pub pciDomainID: c_int,
    pub pciBusID: c_int,
    pub pciDeviceID: c_int,
    pub maxSharedMemoryPerMultiProcessor: usize,
    pub isMultiGpuBoard: c_int,
    pub canMapHostMemory: c_int,
    pub gcnArch: c_int,
    pub gcnArchName: [c_char; 256],
    pub integrated: c_int,
    pub cooperativeLaunch: c_int,
    pub cooperativeMultiDeviceLaunch: c_int,
    pub maxTexture1DLinear: c_int,
    pub maxTexture1D: c_int,
    pub maxTexture2D: [c_int; 2],
    pub maxTexture3D: [c_int; 3],
    pub hdpMemFlushCntl: *mut c_uint,
    pub hdpRegFlushCntl: *mut c_uint,
    pub memPitch: usize,
    pub textureAlignment: usize,
    pub texturePitchAlignment: usize,
    pub kernelExecTimeoutEnabled: c_int,
    pub ECCEnabled: c_int,
    pub tccDriver: c_int,
    pub cooperativeMultiDeviceUnmatchedFunc: c_int,
    pub cooperativeMultiDeviceUnmatchedGridDim: c_int,
    pub cooperativeMultiDeviceUnmatchedBlockDim: c_int,
    pub cooperativeMultiDeviceUnmatchedSharedMem: c_int,
    pub isLargeBar: c_int,
    pub asicRevision: c_int,
    pub managedMemory: c_int,
    pub directManagedMemAccessFromHost: c_int,
    pub concurrentManagedAccess: c_int,
    pub pageableMemoryAccess: c_int,
    pub pageableMemoryAccessUsesHostPageTables: c_int,
}
/// `sizeof(hipDeviceProp_tR0000)`.
pub const HIP_DEVICE_PROP_R0000_SIZE: usize = 792;
/// `offsetof(hipDeviceProp_tR0000, totalGlobalMem)`.
pub const HIP_DEVICE_PROP_R0000_TOTAL_GLOBAL_MEM_OFFSET: usize = 256;
const _: () = assert!(size_of::<hipDeviceProp_tR0000>() == HIP_DEVICE_PROP_R0000_SIZE);
const _: () = assert!(
    offset_of!(hipDeviceProp_tR0000, totalGlobalMem)
        == HIP_DEVICE_PROP_R0000_TOTAL_GLOBAL_MEM_OFFSET
);
const _: () = assert!(offset_of!(hipDeviceProp_tR0000, multiProcessorCount) == 336);
const _: () = assert!(offset_of!(hipDeviceProp_tR0000, gcnArchName) == 396);

/// ROCm 6+ device properties.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipDeviceProp_tR0600 {
    pub name: [c_char; 256],
    pub uuid: hipUUID,
    pub luid: [c_char; 8],
    pub luidDeviceNodeMask: c_uint,
    pub totalGlobalMem: usize,
    pub sharedMemPerBlock: usize,
    pub regsPerBlock: c_int,
    pub warpSize: c_int,
    pub memPitch: usize,
    pub maxThreadsPerBlock: c_int,
    pub maxThreadsDim: [c_int; 3],
    pub maxGridSize: [c_int; 3],
    pub clockRate: c_int,
    pub totalConstMem: usize,
    pub major: c_int,
    pub minor: c_int,
    pub textureAlignment: usize,
    pub texturePitchAlignment: usize,
    pub deviceOverlap: c_int,
    pub multiProcessorCount: c_int,
    pub kernelExecTimeoutEnabled: c_int,
    pub integrated: c_int,
    pub canMapHostMemory: c_int,
    pub computeMode: c_int,
    pub maxTexture1D: c_int,
    pub maxTexture1DMipmap: c_int,
    pub maxTexture1DLinear: c_int,
    pub maxTexture2D: [c_int; 2],
    pub maxTexture2DMipmap: [c_int; 2],
    pub maxTexture2DLinear: [c_int; 3],
    pub maxTexture2DGather: [c_int; 2],
    pub maxTexture3D: [c_int; 3],
    pub maxTexture3DAlt: [c_int; 3],
    pub maxTextureCubemap: c_int,
    pub maxTexture1DLayered: [c_int; 2],
    pub maxTexture2DLayered: [c_int; 3],
    pub maxTextureCubemapLayered: [c_int; 2],
    pub maxSurface1D: c_int,
    pub maxSurface2D: [c_int; 2],
    pub maxSurface3D: [c_int; 3],
    pub maxSurface1DLayered: [c_int; 2],
    pub maxSurface2DLayered: [c_int; 3],
    pub maxSurfaceCubemap: c_int,
    pub maxSurfaceCubemapLayered: [c_int; 2],
    pub surfaceAlignment: usize,
    pub concurrentKernels: c_int,
    pub ECCEnabled: c_int,
    pub pciBusID: c_int,
    pub pciDeviceID: c_int,
    pub pciDomainID: c_int,
    pub tccDriver: c_int,
    pub asyncEngineCount: c_int,
    pub unifiedAddressing: c_int,
    pub memoryClockRate: c_int,
    pub memoryBusWidth: c_int,
    pub l2CacheSize: c_int,
    pub persistingL2CacheMaxSize: c_int,
    pub maxThreadsPerMultiProcessor: c_int,
    pub streamPrioritiesSupported: c_int,
    pub globalL1CacheSupported: c_int,
    pub localL1CacheSupported: c_int,
    pub sharedMemPerMultiprocessor: usize,
    pub regsPerMultiprocessor: c_int,
    pub managedMemory: c_int,
    pub isMultiGpuBoard: c_int,
    pub multiGpuBoardGroupID: c_int,
    pub hostNativeAtomicSupported: c_int,
    pub singleToDoublePrecisionPerfRatio: c_int,
    pub pageableMemoryAccess: c_int,
    pub concurrentManagedAccess: c_int,
    pub computePreemptionSupported: c_int,
    pub canUseHostPointerForRegisteredMem: c_int,
    pub cooperativeLaunch: c_int,
    pub cooperativeMultiDeviceLaunch: c_int,
    pub sharedMemPerBlockOptin: usize,
    pub pageableMemoryAccessUsesHostPageTables: c_int,
    pub directManagedMemAccessFromHost: c_int,
    pub maxBlocksPerMultiProcessor: c_int,
    pub accessPolicyMaxWindowSize: c_int,
    pub reservedSharedMemPerBlock: usize,
    pub hostRegisterSupported: c_int,
    pub sparseHipArraySupported: c_int,
    pub hostRegisterReadOnlySupported: c_int,
    pub timelineSemaphoreInteropSupported: c_int,
    pub memoryPoolsSupported: c_int,
    pub gpuDirectRDMASupported: c_int,
    pub gpuDirectRDMAFlushWritesOptions: c_uint,
    pub gpuDirectRDMAWritesOrdering: c_int,
    pub memoryPoolSupportedHandleTypes: c_uint,
    pub deferredMappingHipArraySupported: c_int,
    pub ipcEventSupported: c_int,
    pub clusterLaunch: c_int,
    pub unifiedFunctionPointers: c_int,
    pub reserved: [c_int; 63],
    pub hipReserved: [c_int; 32],
    pub gcnArchName: [c_char; 256],
    pub maxSharedMemoryPerMultiProcessor: usize,
    pub clockInstructionRate: c_int,
    pub arch: hipDeviceArch_t,
    pub hdpMemFlushCntl: *mut c_uint,
    pub hdpRegFlushCntl: *mut c_uint,
    pub cooperativeMultiDeviceUnmatchedFunc: c_int,
    pub cooperativeMultiDeviceUnmatchedGridDim: c_int,
    pub cooperativeMultiDeviceUnmatchedBlockDim: c_int,
    pub cooperativeMultiDeviceUnmatchedSharedMem: c_int,
    pub isLargeBar: c_int,
    pub asicRevision: c_int,
}
/// `sizeof(hipDeviceProp_tR0600)`.
pub const HIP_DEVICE_PROP_R0600_SIZE: usize = 1472;
/// `offsetof(hipDeviceProp_tR0600, totalGlobalMem)`.
pub const HIP_DEVICE_PROP_R0600_TOTAL_GLOBAL_MEM_OFFSET: usize = 288;
const _: () = assert!(size_of::<hipDeviceProp_tR0600>() == HIP_DEVICE_PROP_R0600_SIZE);
const _: () = assert!(
    offset_of!(hipDeviceProp_tR0600, totalGlobalMem)
        == HIP_DEVICE_PROP_R0600_TOTAL_GLOBAL_MEM_OFFSET
);
const _: () = assert!(offset_of!(hipDeviceProp_tR0600, multiProcessorCount) == 388);
const _: () = assert!(offset_of!(hipDeviceProp_tR0600, gcnArchName) == 1160);
const _: () = assert!(offset_of!(hipDeviceProp_tR0600, major) == 360);

macro_rules! zeroed_ctor {
    ($t:ty) => {
        impl $t {
            /// An all-zero value (every field is an integer, array or raw pointer, so zero is a
            /// valid bit pattern).
            pub fn zeroed() -> Self {
                // SAFETY: every field is an integer, an array of integers, or a raw pointer; the
                // all-zero bit pattern is a valid value of each (null for pointers).
                unsafe { core::mem::zeroed() }
            }
        }
    };
}
zeroed_ctor!(hipDeviceProp_tR0000);
zeroed_ctor!(hipDeviceProp_tR0600);
