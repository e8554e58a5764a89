#![doc = include_str!("../README.md")]
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The map of the crate: one module per concept.
mod alloc; // picking a free, valid CU set; multi-GPU requests
mod list; // ROCr's CU list grammar and the parse error type
mod mask; // whole HSA_CU_MASK values and ROC_GLOBAL_CU_MASK
mod percent; // HAMi's gpucores percentage to a CU count
mod set; // CuSet, the bitmap of CU ids
mod text; // error fragments, formatting into fixed buffers
mod topology; // per-architecture validity and count rounding

pub use alloc::{allocate, allocate_gpus, AllocError, GpuAllocError, GpuRequest};
pub use list::{parse_cu_list, IdKind, ParseError, ParseErrorKind, Subject};
pub use mask::{parse_roc_global_cu_mask, HsaCuMask, MaskEntryError, MAX_GPUS};
pub use percent::{cu_count_from_percent, PercentError};
pub use set::{CapacityError, CuSet, Hex, Iter, Ranges, CAPACITY};
pub use text::{format_into, formatted_len, BufferTooSmall, Fragment, FRAGMENT_CAPACITY};
pub use topology::{CountError, InvalidSet, Layout, Topology, TopologyError};

impl core::error::Error for ParseError {}
impl core::error::Error for CapacityError {}
impl core::error::Error for MaskEntryError {}
impl core::error::Error for PercentError {}
impl core::error::Error for TopologyError {}
impl core::error::Error for InvalidSet {}
impl core::error::Error for CountError {}
impl core::error::Error for AllocError {}
impl core::error::Error for GpuAllocError {}
impl core::error::Error for BufferTooSmall {}
