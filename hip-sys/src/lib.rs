//! The parts of the HIP C ABI that the `libamvgpu` audit hook and the `hipsim` simulator need.
//!
//! This crate has **no `#[link]` directive**: the hook finds `libamdhip64.so` through the
//! loader (an audit module), never by linking, and the simulator *is* `libamdhip64.so`.
//!
//! Layout of the crate:
//! - [`error`]: `hipError_t` and the codes used (values checked against ROCm 5.2's header on
//!   this machine and ROCm 7.x's `hip_runtime_api.h`; they never changed).
//! - [`types`]: the structs and handles of every allocation door, with compile-time layout checks.
//!   Where ROCm 5 and ROCm 6+ disagree (`hipMemAllocationProp`), both layouts are given.
//! - [`props`]: both device-property layouts, `hipDeviceProp_tR0000` (ROCm 5's
//!   `hipDeviceProp_t`, 792 bytes, `totalGlobalMem` at 256) and `hipDeviceProp_tR0600`
//!   (ROCm 6+, 1472 bytes, `totalGlobalMem` at 288).
//! - [`attr`]: the `hipDeviceAttribute_t` values used.
//! - [`fns`]: one `unsafe extern "C" fn` pointer type per door, and the door table with each
//!   door's symbol-version node in ROCm 5, 6 and 7 ([`fns::DOORS`]).
//! - [`sim`]: the simulator's allocation-granularity rules, as constants and pure functions, so
//!   that the hook's tests can mirror the simulator's accounting exactly.
//! - [`generated`]: bindgen output from Debian's `libamdhip64-dev` (ROCm 5.2) headers; used to
//!   cross-check the hand-written definitions (see `tests/layout.rs`).
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

pub mod attr;
pub mod error;
pub mod fns;
/// bindgen output (see the module's header and `ci/regen-bindings.sh`): ROCm 5.2 layouts, kept
/// apart from the hand-written definitions, which cover ROCm 5, 6 and 7.
#[allow(dead_code, missing_debug_implementations, clippy::all)]
pub mod generated;
pub mod props;
pub mod sim;
pub mod types;

pub use attr::*;
pub use error::*;
pub use fns::*;
pub use props::*;
pub use types::*;
