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
//!
//! ```
//! use k8s_glue::allocate::{allocate, AllocateInput, PluginOptions};
//! use k8s_glue::fit::{fit_pod, Policy};
//! use k8s_glue::node::decode_node;
//! use k8s_glue::pod::Pod;
//!
//! let gpus = decode_node(
//!     r#"[{"id":"U1","count":10,"devmem":196608,"devcore":304,"type":"AMD Instinct MI300X",
//!          "health":true,"custominfo":{"rocrUUID":"GPU-0123456789abcdef"}}]"#,
//! )
//! .unwrap();
//! let mut pod: Pod = serde_json::from_str(
//!     r#"{"metadata": {"name": "p", "namespace": "ml"},
//!         "spec": {"containers": [{"name": "main", "resources": {"limits":
//!             {"amd.com/gpu": "1", "amd.com/gpumem": "16384", "amd.com/gpucores": "25"}}}]}}"#,
//! )
//! .unwrap();
//!
//! // Scheduler: 25 % of 304 CUs is 76, rounded down to 72 for the 8 XCDs.
//! let fit = fit_pod(&gpus, &[], &pod, Policy::Binpack).unwrap();
//! let annotation = fit.annotation.unwrap();
//! assert_eq!(annotation, "U1,AMD Instinct MI300X,16384,72:;");
//! pod.metadata.annotations.insert("hami.io/amd-devices-to-allocate".into(), annotation);
//!
//! // Device plugin: the container's environment.
//! let options = PluginOptions::default();
//! let answer = allocate(AllocateInput {
//!     gpus: &gpus, pods: &[], pod: &pod, container: Some("main"), node_lock: None, options: &options,
//! })
//! .unwrap();
//! assert_eq!(answer.envs["HSA_CU_MASK"], "0:0-71");
//! assert_eq!(answer.envs["ROCR_VISIBLE_DEVICES"], "GPU-0123456789abcdef");
//! assert_eq!(answer.envs["HIP_DEVICE_MEMORY_LIMIT_0"], "16384m");
//! assert_eq!(answer.annotations["hami.io/amd-cu-allocated"], r#"{"U1":"0-71"}"#);
//! ```

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
