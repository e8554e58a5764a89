//! HAMi's AMD Kubernetes protocol as pure functions: no Kubernetes client, no gRPC.
//!
//! The scheduler side reads a node's registration and the pods on it and decides where a pod
//! fits ([`fit`]); the device-plugin side turns the scheduler's decision into one container's
//! environment and CU mask ([`allocate`]). Every CU decision (percent to count, rounding,
//! picking CUs, formatting masks) is made by the `cumask` crate, so both sides agree.
//!
//! | annotation | on | module |
//! |---|---|---|
//! | `hami.io/node-amd-register` | node | [`node`] |
//! | `hami.io/mutex.lock` | node | [`lock`] |
//! | `hami.io/amd-devices-to-allocate`, `hami.io/amd-devices-allocated` | pod | [`devices`] |
//! | `hami.io/amd-cu-allocated` | pod | [`cu_alloc`] |
//!
//! Container resource limits are read by [`request`], the Kubernetes objects by [`pod`], and a
//! GPU's CU layout by [`topology`].

pub mod allocate;
pub mod cu_alloc;
pub mod devices;
pub mod error;
pub mod fit;
mod gojson;
pub mod lock;
pub mod node;
pub mod pod;
pub mod request;
pub mod topology;

pub use error::{Error, Result};
