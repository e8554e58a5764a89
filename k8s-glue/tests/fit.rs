//! Scheduler-side placement: filters, policies, NUMA and XGMI constraints.

mod common;

use common::*;
use k8s_glue::devices::DEVICES_ALLOCATED;
use k8s_glue::fit::{
    fit_pod, Policy, LINK_BIND, NOUSE_GPU_TYPE, NOUSE_GPU_UUID, NUMA_BIND, USE_GPU_TYPE,
    USE_GPU_UUID,
};
use k8s_glue::node::GpuInfo;
use k8s_glue::pod::Pod;
use serde_json::{json, Value};

fn chosen(gpus: &[GpuInfo], pods: &[Pod], p: &Pod, policy: Policy) -> Vec<String> {
    let fit = fit_pod(gpus, pods, p, policy).unwrap();
    assert!(fit.fits, "{:?}", fit.reasons);
    fit.groups
        .iter()
        .flatten()
        .map(|d| d.uuid.clone())
        .collect()
}

fn busy_on(uuid: &str) -> Pod {
    let mut p = pod(&format!("busy-{uuid}"), &[]);
    annotate(
        &mut p,
        DEVICES_ALLOCATED,
        &format!("{uuid},AMD Instinct MI300X,65536,152:;"),
    );
    p
}

#[test]
fn binpack_fills_the_most_used_gpu_and_spread_the_least_used() {
    let gpus = vec![mi300x(1), mi300x(2), mi300x(3)];
    let pods = vec![busy_on("U2")];
    let p = pod("p", &[("main", slice(1, 1024, 10))]);
    assert_eq!(chosen(&gpus, &pods, &p, Policy::Binpack), ["U2"]);
    // Ties keep registration order.
    assert_eq!(chosen(&gpus, &pods, &p, Policy::Spread), ["U1"]);
    // The pod's own annotation overrides the default policy.
    let mut spread = p.clone();
    annotate(&mut spread, "hami.io/gpu-scheduler-policy", "spread");
    assert_eq!(chosen(&gpus, &pods, &spread, Policy::Binpack), ["U1"]);
    annotate(&mut spread, "hami.io/gpu-scheduler-policy", "packed");
    assert!(fit_pod(&gpus, &pods, &spread, Policy::Binpack).is_err());
}

#[test]
fn finished_pods_free_their_gpus() {
    let gpus = vec![mi300x(1)];
    let mut done = busy_on("U1");
    annotate(
        &mut done,
        DEVICES_ALLOCATED,
        "U1,AMD Instinct MI300X,196608,304:;",
    );
    let p = pod("p", &[("main", slice(1, 1024, 10))]);
    assert!(
        !fit_pod(&gpus, std::slice::from_ref(&done), &p, Policy::Binpack)
            .unwrap()
            .fits
    );
    done.status.phase = "Failed".into();
    assert!(fit_pod(&gpus, &[done], &p, Policy::Binpack).unwrap().fits);
}

#[test]
fn type_and_uuid_filters() {
    let mut gpus = vec![mi300x(1), mi300x(2), mi300x(3)];
    gpus[2].device_type = "AMD Instinct MI325X".into();
    let with = |key: &str, value: &str| {
        let mut p = pod("p", &[("main", slice(1, 1024, 10))]);
        annotate(&mut p, key, value);
        p
    };
    assert_eq!(
        chosen(
            &gpus,
            &[],
            &with(USE_GPU_TYPE, "nvidia, mi325x"),
            Policy::Binpack
        ),
        ["U3"]
    );
    assert_eq!(
        chosen(&gpus, &[], &with(NOUSE_GPU_TYPE, "MI300X"), Policy::Binpack),
        ["U3"]
    );
    assert_eq!(
        chosen(&gpus, &[], &with(USE_GPU_UUID, "U9, U2"), Policy::Binpack),
        ["U2"]
    );
    assert_eq!(
        chosen(&gpus, &[], &with(NOUSE_GPU_UUID, "U1,U2"), Policy::Binpack),
        ["U3"]
    );
    let fit = fit_pod(&gpus, &[], &with(USE_GPU_UUID, "U9"), Policy::Binpack).unwrap();
    assert!(!fit.fits);
    assert_eq!(fit.reasons.get("CardUUIDMismatch"), Some(&3));
    assert_eq!(fit.failed_container.as_deref(), Some("main"));
}

#[test]
fn unhealthy_non_amd_and_exhausted_gpus_are_refused_with_reasons() {
    let mut gpus = vec![mi300x(1), mi300x(2), mi300x(3), mi300x(4)];
    gpus[0].health = false;
    gpus[1].device_type = "NVIDIA H100".into();
    gpus[2].count = 1;
    gpus[3].devmem = 512;
    let pods = vec![busy_on("U3")];
    let fit = fit_pod(
        &gpus,
        &pods,
        &pod("p", &[("main", slice(1, 1024, 10))]),
        Policy::Binpack,
    )
    .unwrap();
    assert!(!fit.fits);
    let reasons: Vec<(&str, usize)> = fit.reasons.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        reasons,
        [
            ("CardInsufficientMemory", 1),
            ("CardNotHealth", 1),
            ("CardTimeSlicingExhausted", 1),
            ("CardTypeMismatch", 1)
        ]
    );
}

fn numa_node(n: u8, numa: i64, peers: &[u8]) -> GpuInfo {
    let mut g = mi300x(n);
    g.numa = numa;
    let peers: Vec<Value> = peers
        .iter()
        .map(|p| Value::from(format!("0000:{p:02x}:00.0")))
        .collect();
    g.custom_info.insert("xgmiPeers".into(), peers.into());
    g
}

#[test]
fn numa_bind_keeps_all_gpus_of_a_container_on_one_numa_node() {
    // U1 on NUMA 0, U2-U3 on NUMA 1; U1 is the most used, so binpack would start there.
    let gpus = vec![
        numa_node(1, 0, &[]),
        numa_node(2, 1, &[]),
        numa_node(3, 1, &[]),
    ];
    let pods = vec![busy_on("U1")];
    let mut p = pod("p", &[("main", slice(2, 1024, 10))]);
    assert_eq!(chosen(&gpus, &pods, &p, Policy::Binpack), ["U1", "U2"]);
    annotate(&mut p, NUMA_BIND, "true");
    assert_eq!(chosen(&gpus, &pods, &p, Policy::Binpack), ["U2", "U3"]);
    let mut three = pod("p3", &[("main", slice(3, 1024, 10))]);
    annotate(&mut three, NUMA_BIND, "true");
    let fit = fit_pod(&gpus, &pods, &three, Policy::Binpack).unwrap();
    assert!(!fit.fits);
    assert_eq!(fit.reasons.get("NumaBindUnsatisfiable"), Some(&3));
    annotate(&mut three, NUMA_BIND, "yes");
    assert!(fit_pod(&gpus, &pods, &three, Policy::Binpack).is_err());
}

#[test]
fn link_bind_takes_gpus_linked_pairwise_over_xgmi() {
    // Links: 1-2, 2-3, 3-4, 2-4 (one end each is enough). Cliques of 3: {2,3,4}.
    let gpus = vec![
        numa_node(1, 0, &[2]),
        numa_node(2, 0, &[3, 4]),
        numa_node(3, 0, &[4]),
        numa_node(4, 0, &[]),
    ];
    let mut p = pod("p", &[("main", slice(3, 1024, 10))]);
    assert_eq!(chosen(&gpus, &[], &p, Policy::Binpack), ["U1", "U2", "U3"]);
    annotate(&mut p, LINK_BIND, "true");
    assert_eq!(chosen(&gpus, &[], &p, Policy::Binpack), ["U2", "U3", "U4"]);
    let mut four = pod("p4", &[("main", slice(4, 1024, 10))]);
    annotate(&mut four, LINK_BIND, "true");
    let fit = fit_pod(&gpus, &[], &four, Policy::Binpack).unwrap();
    assert_eq!(
        (fit.fits, fit.reasons.get("LinkBindUnsatisfiable")),
        (false, Some(&4))
    );
}

#[test]
fn containers_of_one_pod_see_each_others_usage() {
    let gpus = vec![mi300x(1), mi300x(2)];
    let p = pod("p", &[("a", slice(1, 1024, 60)), ("b", slice(1, 1024, 60))]);
    let fit = fit_pod(&gpus, &[], &p, Policy::Binpack).unwrap();
    assert!(fit.fits);
    assert_eq!(
        fit.annotation.as_deref(),
        Some("U1,AMD Instinct MI300X,1024,176:;U2,AMD Instinct MI300X,1024,176:;")
    );
    assert!(fit.node_score > 0.0);
}

#[test]
fn broken_pods_on_the_node_are_reported_not_fatal() {
    let gpus = vec![mi300x(1)];
    let mut broken = pod("broken", &[]);
    annotate(&mut broken, DEVICES_ALLOCATED, "U1,T,lots,1:;");
    let mut gone = pod("gone", &[]);
    annotate(&mut gone, DEVICES_ALLOCATED, "U7,T,1,1:;");
    let fit = fit_pod(
        &gpus,
        &[broken, gone],
        &pod("p", &[("main", slice(1, 1024, 10))]),
        Policy::Binpack,
    )
    .unwrap();
    assert!(fit.fits);
    let who: Vec<&str> = fit.pod_problems.iter().map(|p| p.pod.as_str()).collect();
    assert_eq!(who, ["default/broken", "default/gone"]);
}

#[test]
fn percentage_memory_and_bad_requests() {
    let gpus = vec![mi300x(1)];
    let p = pod(
        "p",
        &[(
            "main",
            json!({"amd.com/gpumem-percentage": "25", "amd.com/gpucores": "33"}),
        )],
    );
    let fit = fit_pod(&gpus, &[], &p, Policy::Binpack).unwrap();
    // 25 % of 196608 MiB, and 33 % of 304 CUs = 100 rounded down to 96 for 8 XCDs.
    assert_eq!(
        fit.annotation.as_deref(),
        Some("U1,AMD Instinct MI300X,49152,96:;")
    );
    let bad = pod(
        "bad",
        &[("main", json!({"amd.com/gpu": "1", "amd.com/gpucores": "0"}))],
    );
    let err = fit_pod(&gpus, &[], &bad, Policy::Binpack).unwrap_err();
    assert_eq!(
        err.input,
        "pod default/bad container \"main\" amd.com/gpucores"
    );
}

#[test]
fn a_gpu_of_unknown_layout_takes_whole_gpu_requests_but_no_slices() {
    let mut unknown = mi300x(1);
    unknown.device_type = "amd-gpu".into();
    let gpus = vec![unknown, mi300x(2)];
    let slice_pod = pod("p", &[("main", slice(1, 1024, 10))]);
    let fit = fit_pod(&gpus, &[], &slice_pod, Policy::Binpack).unwrap();
    assert_eq!(fit.groups[0][0].uuid, "U2");
    assert_eq!(fit.gpu_problems.len(), 1);
    assert!(
        fit.gpu_problems[0].contains("custominfo.architecture"),
        "{:?}",
        fit.gpu_problems
    );

    let only_unknown = &gpus[..1];
    let fit = fit_pod(only_unknown, &[], &slice_pod, Policy::Binpack).unwrap();
    assert_eq!(
        (fit.fits, fit.reasons.get("CardCuLayoutUnknown")),
        (false, Some(&1))
    );
    let whole = pod("w", &[("main", json!({"amd.com/gpu": "1"}))]);
    assert!(
        fit_pod(only_unknown, &[], &whole, Policy::Binpack)
            .unwrap()
            .fits
    );
}
