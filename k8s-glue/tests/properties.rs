//! Property tests: codecs round-trip, and pods allocated one after another never share a CU.

mod common;

use std::collections::BTreeMap;

use common::*;
use cumask::{CuSet, HsaCuMask};
use k8s_glue::allocate::PluginOptions;
use k8s_glue::cu_alloc::{decode_cu_allocated, encode_cu_allocated, CuClaims, CU_ALLOCATED};
use k8s_glue::devices::{
    decode_plugin_groups, decode_scheduler_groups, encode_groups, ContainerGroup, DeviceGrant,
    DEVICES_ALLOCATED,
};
use k8s_glue::fit::{fit_pod, Policy};
use k8s_glue::lock::{decode_lock, NodeLock};
use k8s_glue::node::{decode_node, encode_node, GpuInfo};
use k8s_glue::topology;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn name() -> impl Strategy<Value = String> {
    // Anything but the device annotation's separators; spaces and HTML characters included.
    "[A-Za-z0-9 <>&_.\\-]{1,24}"
}

fn grant() -> impl Strategy<Value = DeviceGrant> {
    (name(), name(), 0..=i32::MAX, 0..=i32::MAX).prop_map(|(uuid, device_type, mem_mib, cores)| {
        DeviceGrant {
            uuid,
            device_type,
            mem_mib,
            cores,
        }
    })
}

fn cu_set() -> impl Strategy<Value = CuSet> {
    proptest::collection::vec(0u16..1024, 1..40).prop_map(|ids| {
        let mut s = CuSet::new();
        for id in ids {
            s.insert(id);
        }
        s
    })
}

fn gpu_info() -> impl Strategy<Value = GpuInfo> {
    (
        (
            name(),
            any::<u64>(),
            any::<i32>(),
            any::<i32>(),
            any::<i32>(),
            name(),
        ),
        (any::<i64>(), "[a-z\\-]{0,10}", any::<bool>(), "[a-z]{0,6}"),
        (
            proptest::option::of(1u32..=64),
            proptest::option::of(any::<u64>()),
            proptest::collection::vec("[0-9a-f:.]{12}", 0..3),
            proptest::option::of("[a-zA-Z0-9 <>&]{0,12}"),
        ),
    )
        .prop_map(
            |(
                (id, index, count, devmem, devcore, device_type),
                (numa, mode, health, device_vendor),
                (wgp, rocr, peers, other),
            )| {
                let mut custom = Map::new();
                if let Some(w) = wgp {
                    custom.insert("cuPerWGP".into(), w.into());
                }
                if let Some(r) = rocr {
                    custom.insert("rocrUUID".into(), format!("GPU-{r:016x}").into());
                }
                if !peers.is_empty() {
                    custom.insert(
                        "xgmiPeers".into(),
                        peers.into_iter().map(Value::from).collect(),
                    );
                }
                if let Some(o) = other {
                    custom.insert("somethingNewer".into(), o.into());
                }
                GpuInfo {
                    id,
                    index,
                    count,
                    devmem,
                    devcore,
                    device_type,
                    numa,
                    mode,
                    health,
                    device_vendor,
                    custom_info: custom,
                }
            },
        )
}

proptest! {
    #[test]
    fn device_groups_round_trip(groups in proptest::collection::vec(proptest::collection::vec(grant(), 0..4), 0..4)) {
        let text = encode_groups(&groups).unwrap();
        let mut plugin_view: Vec<ContainerGroup> = groups.clone();
        plugin_view.retain(|g| !g.is_empty());
        prop_assert_eq!(decode_plugin_groups(DEVICES_ALLOCATED, &text).unwrap(), plugin_view);
        // The scheduler sees the encoder's final ';' as one more, empty group.
        let mut scheduler_view = groups.clone();
        scheduler_view.push(Vec::new());
        prop_assert_eq!(decode_scheduler_groups(DEVICES_ALLOCATED, &text).unwrap(), scheduler_view);
    }

    #[test]
    fn cu_claims_round_trip(entries in proptest::collection::btree_map("[A-Za-z0-9<>&\\-]{1,16}", cu_set(), 0..5)) {
        let claims: CuClaims = entries;
        let text = encode_cu_allocated(&claims);
        prop_assert!(!text.contains(' '));
        prop_assert_eq!(decode_cu_allocated(&text).unwrap(), claims);
    }

    #[test]
    fn node_registration_round_trips(gpus in proptest::collection::vec(gpu_info(), 0..4)) {
        let text = encode_node(&gpus);
        let decoded = decode_node(&text).unwrap();
        prop_assert_eq!(&decoded, &gpus);
        prop_assert_eq!(encode_node(&decoded), text);
    }

    #[test]
    fn node_lock_round_trips(t in -62_135_596_800i64..253_402_300_799, ns in "[a-z0-9\\-]{1,20}", pod in "[a-z0-9\\-.]{1,40}") {
        let lock = NodeLock::new(t, &ns, &pod).unwrap();
        let decoded = decode_lock(&lock.encode()).unwrap();
        prop_assert_eq!(decoded, lock);
    }
}

/// One step of a node's life: a pod arrives (GPUs, percent, memory) or a pod finishes.
#[derive(Debug, Clone)]
enum Step {
    Arrive {
        gpus: u32,
        percent: u32,
        mem: u32,
        containers: usize,
    },
    Finish(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u32..=2, 1u32..=100, 1u32..=65536, 1usize..=2).prop_map(|(gpus, percent, mem, containers)| Step::Arrive { gpus, percent, mem, containers }),
        1 => (0usize..64).prop_map(Step::Finish),
    ]
}

/// An MI300X, an RDNA card and a single-XCD CDNA card, so every layout is exercised.
fn mixed_node() -> Vec<GpuInfo> {
    let mut rdna = mi300x(2);
    rdna.device_type = "AMD Radeon PRO W7900".into();
    rdna.devcore = 96;
    rdna.custom_info.insert("cuPerWGP".into(), 2.into());
    let mut cdna2 = mi300x(3);
    cdna2.device_type = "AMD Instinct MI210".into();
    cdna2.devcore = 104;
    vec![mi300x(1), rdna, cdna2]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pods_allocated_one_after_another_never_share_a_cu(steps in proptest::collection::vec(step(), 1..24), spread in any::<bool>()) {
        let gpus = mixed_node();
        let by_id: BTreeMap<&str, &GpuInfo> = gpus.iter().map(|g| (g.id.as_str(), g)).collect();
        let options = PluginOptions::default();
        let policy = if spread { Policy::Spread } else { Policy::Binpack };
        let mut pods = Vec::new();
        for (n, s) in steps.into_iter().enumerate() {
            match s {
                Step::Finish(i) => {
                    if !pods.is_empty() {
                        let len = pods.len();
                        let p: &mut k8s_glue::pod::Pod = &mut pods[i % len];
                        p.status.phase = "Succeeded".into();
                    }
                }
                Step::Arrive { gpus: count, percent, mem, containers } => {
                    let names: Vec<String> = (0..containers).map(|c| format!("c{c}")).collect();
                    let specs: Vec<(&str, Value)> = names.iter().map(|c| (c.as_str(), slice(count, mem, percent))).collect();
                    let mut p = pod(&format!("p{n}"), &specs);
                    let fit = fit_pod(&gpus, &pods, &p, policy).unwrap();
                    if !fit.fits {
                        continue;
                    }
                    annotate(&mut p, k8s_glue::devices::DEVICES_TO_ALLOCATE, fit.annotation.as_deref().unwrap());
                    annotate(&mut p, DEVICES_ALLOCATED, fit.annotation.as_deref().unwrap());
                    for (c, group) in names.iter().zip(&fit.groups) {
                        let answer = serve(&gpus, &pods, &mut p, Some(c), &options);
                        let mask = HsaCuMask::parse(&answer.envs["HSA_CU_MASK"]).unwrap();
                        prop_assert_eq!(mask.len(), group.len());
                        for (i, grant) in group.iter().enumerate() {
                            let gpu = by_id[grant.uuid.as_str()];
                            let cus = mask.get(i).unwrap();
                            // The plugin masks exactly what the scheduler booked, validly.
                            prop_assert_eq!(cus.len() as i32, grant.cores);
                            prop_assert_eq!(topology::of(gpu).unwrap().validate(cus), Ok(()));
                        }
                        prop_assert!(answer.pod_problems.is_empty(), "{:?}", answer.pod_problems);
                    }
                    pods.push(p);
                }
            }
            // Invariant over the live pods: claims pairwise disjoint, within each GPU.
            let mut held: BTreeMap<String, CuSet> = BTreeMap::new();
            for p in pods.iter().filter(|p| !p.is_finished()) {
                let claims = decode_cu_allocated(p.annotation(CU_ALLOCATED).unwrap_or("")).unwrap();
                for (uuid, cus) in claims {
                    let all = held.entry(uuid.clone()).or_default();
                    prop_assert!(all.is_disjoint(&cus), "{} overlaps on {}: {} vs {}", p.key(), uuid, cus, all);
                    *all = all.union(&cus);
                    prop_assert!(all.len() as i32 <= by_id[uuid.as_str()].devcore);
                }
            }
        }
    }
}
