//! `hipDeviceAttribute_t` values.
//!
//! The simulator implements these values. They were checked by compiling against Debian's ROCm
//! 5.2 header (`cc`, `/usr/include/hip/hip_runtime_api.h`) and against a transcription of the
//! enum in ROCm 7.x's `hip_runtime_api.h` (ROCm/rocm-systems, `projects/hip/include/hip/`): for
//! every attribute below the value is the same in ROCm 5.2 and 7.x. What did change between 5
//! and 6 is elsewhere in the enum: `hipDeviceAttributeName`, `Uuid`, `Arch`, `GcnArch` and
//! `GcnArchName` became `hipDeviceAttributeUnused1..5` (same slots), and ROCm 6 appended
//! `hipDeviceAttributeVirtualMemoryManagementSupported` (89) and later values after
//! `MemoryPoolsSupported` (88). Older ROCm (4.x) ordered the CUDA-compatible block differently;
//! programs built against those are not supported.

use core::ffi::c_int;

/// `hipDeviceAttribute_t`.
pub type hipDeviceAttribute_t = c_int;

pub const hipDeviceAttributeEccEnabled: hipDeviceAttribute_t = 0;
pub const hipDeviceAttributeClockRate: hipDeviceAttribute_t = 5;
pub const hipDeviceAttributeComputeCapabilityMajor: hipDeviceAttribute_t = 23;
pub const hipDeviceAttributeManagedMemory: hipDeviceAttribute_t = 24;
pub const hipDeviceAttributeComputeCapabilityMinor: hipDeviceAttribute_t = 61;
pub const hipDeviceAttributeMultiprocessorCount: hipDeviceAttribute_t = 63;
pub const hipDeviceAttributePciBusId: hipDeviceAttribute_t = 67;
pub const hipDeviceAttributePciDeviceId: hipDeviceAttribute_t = 68;
pub const hipDeviceAttributeTotalGlobalMem: hipDeviceAttribute_t = 84;
pub const hipDeviceAttributeWarpSize: hipDeviceAttribute_t = 87;
pub const hipDeviceAttributeMemoryPoolsSupported: hipDeviceAttribute_t = 88;
/// ROCm 6+ only.
pub const hipDeviceAttributeVirtualMemoryManagementSupported: hipDeviceAttribute_t = 89;
pub const hipDeviceAttributeAmdSpecificBegin: hipDeviceAttribute_t = 10000;
pub const hipDeviceAttributeClockInstructionRate: hipDeviceAttribute_t = 10000;
pub const hipDeviceAttributeMaxSharedMemoryPerMultiprocessor: hipDeviceAttribute_t = 10002;
pub const hipDeviceAttributePhysicalMultiProcessorCount: hipDeviceAttribute_t = 10015;
