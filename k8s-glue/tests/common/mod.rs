#![allow(dead_code)]

use k8s_glue::allocate::{allocate, AllocateInput, ContainerAnswer, PluginOptions};
use k8s_glue::devices::{DEVICES_ALLOCATED, DEVICES_TO_ALLOCATE};
use k8s_glue::fit::{fit_pod, Policy};
use k8s_glue::node::GpuInfo;
use k8s_glue::pod::Pod;
use serde_json::{json, Value};

pub const MI300X: &str = "AMD Instinct MI300X";

/// A 304-CU MI300X as HAMi's plugin registers it, plus the ROCr id and PCI address.
pub fn mi300x(n: u8) -> GpuInfo {
    let mut g = GpuInfo {
        id: format!("U{n}"),
        index: u64::from(n),
        count: 10,
        devmem: 196608,
        devcore: 304,
        device_type: MI300X.into(),
        health: true,
        device_vendor: "amd".into(),
        ..Default::default()
    };
    g.custom_info
        .insert("rocrUUID".into(), format!("GPU-{n:016x}").into());
    g.custom_info
        .insert("pciBDF".into(), format!("0000:{n:02x}:00.0").into());
    g
}

pub fn rocr(n: u8) -> String {
    format!("GPU-{n:016x}")
}

/// A pod whose containers have the given limits.
pub fn pod(name: &str, containers: &[(&str, Value)]) -> Pod {
    let containers: Vec<Value> = containers
        .iter()
        .map(|(n, limits)| json!({"name": n, "resources": {"limits": limits}}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": containers},
        "status": {"phase": "Running"}
    }))
    .unwrap()
}

pub fn slice(gpus: u32, mem: u32, cores: u32) -> Value {
    json!({"amd.com/gpu": gpus.to_string(), "amd.com/gpumem": mem.to_string(), "amd.com/gpucores": cores.to_string()})
}

pub fn annotate(pod: &mut Pod, key: &str, value: &str) {
    pod.metadata.annotations.insert(key.into(), value.into());
}

/// Schedules `pod` on the node (fit, then the scheduler's annotations).
pub fn schedule(gpus: &[GpuInfo], pods: &[Pod], pod: &mut Pod) {
    let fit = fit_pod(gpus, pods, pod, Policy::Binpack).unwrap();
    assert!(fit.fits, "{} does not fit: {:?}", pod.key(), fit.reasons);
    let annotation = fit.annotation.unwrap();
    annotate(pod, DEVICES_TO_ALLOCATE, &annotation);
    annotate(pod, DEVICES_ALLOCATED, &annotation);
}

/// Runs Allocate for one container and writes the answer's annotations back to the pod.
pub fn serve(
    gpus: &[GpuInfo],
    pods: &[Pod],
    pod: &mut Pod,
    container: Option<&str>,
    options: &PluginOptions,
) -> ContainerAnswer {
    let answer = allocate(AllocateInput {
        gpus,
        pods,
        pod,
        container,
        node_lock: None,
        options,
    })
    .unwrap();
    for (k, v) in &answer.annotations {
        annotate(pod, k, v);
    }
    answer
}
