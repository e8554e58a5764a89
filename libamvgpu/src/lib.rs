//! libamvgpu: a glibc LD_AUDIT module enforcing per-container HIP device-memory limits.

mod audit;
pub mod config;
mod elf;
#[cfg(not(test))]
mod glibc_compat;
mod hooks;
mod log;
mod snapshot;
mod state;
mod symbols;
