//! `hipError_t`: a C enum, so an `int` on every ABI HIP supports.
//!
//! Values come from `hip_runtime_api.h` (Debian's ROCm 5.2 copy on this machine, checked
//! against ROCm 7.x's `projects/hip/include/hip/hip_runtime_api.h` in ROCm/rocm-systems): no code
//! used here changed between ROCm 5, 6 and 7.

use core::ffi::c_int;

/// The return type of every HIP API function.
pub type hipError_t = c_int;

pub const hipSuccess: hipError_t = 0;
pub const hipErrorInvalidValue: hipError_t = 1;
pub const hipErrorOutOfMemory: hipError_t = 2;
pub const hipErrorNotInitialized: hipError_t = 3;
pub const hipErrorDeinitialized: hipError_t = 4;
pub const hipErrorInvalidPitchValue: hipError_t = 12;
pub const hipErrorInvalidSymbol: hipError_t = 13;
pub const hipErrorInvalidDevicePointer: hipError_t = 17;
pub const hipErrorInvalidMemcpyDirection: hipError_t = 21;
pub const hipErrorInsufficientDriver: hipError_t = 35;
pub const hipErrorNoDevice: hipError_t = 100;
pub const hipErrorInvalidDevice: hipError_t = 101;
pub const hipErrorInvalidContext: hipError_t = 201;
pub const hipErrorMapFailed: hipError_t = 205;
pub const hipErrorUnmapFailed: hipError_t = 206;
pub const hipErrorAlreadyMapped: hipError_t = 208;
pub const hipErrorNotMapped: hipError_t = 211;
pub const hipErrorInvalidHandle: hipError_t = 400;
/// Deprecated alias of [`hipErrorInvalidHandle`] (same value).
pub const hipErrorInvalidResourceHandle: hipError_t = 400;
pub const hipErrorNotFound: hipError_t = 500;
pub const hipErrorNotReady: hipError_t = 600;
pub const hipErrorIllegalAddress: hipError_t = 700;
pub const hipErrorNotSupported: hipError_t = 801;
pub const hipErrorUnknown: hipError_t = 999;

/// The name of an error code as `hipGetErrorName` spells it, or `None` for a code this crate
/// does not define.
pub const fn error_name(code: hipError_t) -> Option<&'static str> {
    Some(match code {
        hipSuccess => "hipSuccess",
        hipErrorInvalidValue => "hipErrorInvalidValue",
        hipErrorOutOfMemory => "hipErrorOutOfMemory",
        hipErrorNotInitialized => "hipErrorNotInitialized",
        hipErrorDeinitialized => "hipErrorDeinitialized",
        hipErrorInvalidPitchValue => "hipErrorInvalidPitchValue",
        hipErrorInvalidSymbol => "hipErrorInvalidSymbol",
        hipErrorInvalidDevicePointer => "hipErrorInvalidDevicePointer",
        hipErrorInvalidMemcpyDirection => "hipErrorInvalidMemcpyDirection",
        hipErrorInsufficientDriver => "hipErrorInsufficientDriver",
        hipErrorNoDevice => "hipErrorNoDevice",
        hipErrorInvalidDevice => "hipErrorInvalidDevice",
        hipErrorInvalidContext => "hipErrorInvalidContext",
        hipErrorMapFailed => "hipErrorMapFailed",
        hipErrorUnmapFailed => "hipErrorUnmapFailed",
        hipErrorAlreadyMapped => "hipErrorAlreadyMapped",
        hipErrorNotMapped => "hipErrorNotMapped",
        hipErrorInvalidHandle => "hipErrorInvalidHandle",
        hipErrorNotFound => "hipErrorNotFound",
        hipErrorNotReady => "hipErrorNotReady",
        hipErrorIllegalAddress => "hipErrorIllegalAddress",
        hipErrorNotSupported => "hipErrorNotSupported",
        hipErrorUnknown => "hipErrorUnknown",
        _ => return None,
    })
}
