//! The "done when" scenarios, end to end: scheduler fit, annotations, device-plugin Allocate.

mod common;

use common::*;
use cumask::{CuSet, HsaCuMask, Topology};
use k8s_glue::allocate::{allocate, AllocateInput, PluginOptions};
use k8s_glue::cu_alloc::{decode_cu_allocated, CU_ALLOCATED};
use k8s_glue::devices::{DEVICES_ALLOCATED, DEVICES_TO_ALLOCATE};
use k8s_glue::fit::{fit_pod, Policy};
use serde_json::json;

fn mask_of(answer: &k8s_glue::allocate::ContainerAnswer) -> HsaCuMask {
    HsaCuMask::parse(&answer.envs["HSA_CU_MASK"]).unwrap()
}

#[test]
fn four_quarter_pods_on_one_mi300x_get_disjoint_masks_that_touch_every_xcd() {
    let gpus = vec![mi300x(1)];
    let topo = Topology::from_target("gfx942", 304).unwrap();
    let options = PluginOptions::default();
    let mut pods = Vec::new();
    let mut union = CuSet::new();
    for i in 0..4 {
        let mut p = pod(&format!("q{i}"), &[("main", slice(1, 16384, 25))]);
        schedule(&gpus, &pods, &mut p);
        // cumask rounds 25 % of 304 (76) down to 72, a multiple of the 8 XCDs.
        assert_eq!(
            p.annotation(DEVICES_TO_ALLOCATE),
            Some("U1,AMD Instinct MI300X,16384,72:;")
        );
        let answer = serve(&gpus, &pods, &mut p, None, &options);
        let cus = *mask_of(&answer).get(0).unwrap();
        assert_eq!(cus.len(), 72);
        for xcd in 0..8 {
            assert!(
                cus.iter().any(|cu| u32::from(cu) % 8 == xcd),
                "pod {i} misses XCD {xcd}: {cus}"
            );
        }
        assert!(
            cus.is_disjoint(&union),
            "pod {i} overlaps: {cus} vs {union}"
        );
        union = union.union(&cus);
        assert_eq!(topo.validate(&cus), Ok(()));
        assert!(answer.pod_problems.is_empty(), "{:?}", answer.pod_problems);
        pods.push(p);
    }
    assert!(union.len() <= 304);
    assert_eq!(union.len(), 288);

    // A fifth quarter no longer fits: 16 CUs are left.
    let fifth = pod("q4", &[("main", slice(1, 16384, 25))]);
    let fit = fit_pod(&gpus, &pods, &fifth, Policy::Binpack).unwrap();
    assert!(!fit.fits);
    assert_eq!(fit.reasons.get("CardInsufficientCore"), Some(&1));
}

fn two_gpu_pod(order: [u8; 2]) -> k8s_glue::allocate::ContainerAnswer {
    let gpus = vec![mi300x(1), mi300x(2)];
    // Another pod already holds the first 72 CUs of U1, so the two GPUs get different CUs.
    let mut neighbour = pod(
        "neighbour",
        &[(
            "main",
            json!({"amd.com/gpu": "1", "amd.com/gpucores": "25", "amd.com/gpumem": "1024"}),
        )],
    );
    annotate(
        &mut neighbour,
        DEVICES_ALLOCATED,
        "U1,AMD Instinct MI300X,1024,72:;",
    );
    annotate(&mut neighbour, CU_ALLOCATED, r#"{"U1":"0-71"}"#);
    let mut p = pod("pair", &[("main", slice(2, 8192, 25))]);
    let mem = |n: u8| if n == 1 { 8192 } else { 16384 };
    let group: String = order
        .iter()
        .map(|&n| format!("U{n},AMD Instinct MI300X,{},72:", mem(n)))
        .collect::<String>()
        + ";";
    annotate(&mut p, DEVICES_TO_ALLOCATE, &group);
    annotate(&mut p, DEVICES_ALLOCATED, &group);
    serve(
        &gpus,
        &[neighbour],
        &mut p,
        Some("main"),
        &PluginOptions::default(),
    )
}

#[test]
fn two_gpu_pod_mask_indices_follow_rocr_visible_devices() {
    let a = two_gpu_pod([1, 2]);
    assert_eq!(
        a.envs["ROCR_VISIBLE_DEVICES"],
        format!("{},{}", rocr(1), rocr(2))
    );
    assert_eq!(a.envs["HSA_CU_MASK"], "0:72-143;1:0-71");
    assert_eq!(a.envs["HIP_DEVICE_MEMORY_LIMIT_0"], "8192m");
    assert_eq!(a.envs["HIP_DEVICE_MEMORY_LIMIT_1"], "16384m");
    assert_eq!(a.envs["HIP_DEVICE_MEMORY_LIMIT"], "8192m");
    assert_eq!(
        a.annotations[CU_ALLOCATED],
        r#"{"U1":"72-143","U2":"0-71"}"#
    );
}

#[test]
fn two_gpu_pod_mask_indices_follow_rocr_visible_devices_when_the_order_is_reversed() {
    let b = two_gpu_pod([2, 1]);
    assert_eq!(
        b.envs["ROCR_VISIBLE_DEVICES"],
        format!("{},{}", rocr(2), rocr(1))
    );
    // Each entry stays bound to its physical GPU: U2's CUs at index 0, U1's at index 1.
    assert_eq!(b.envs["HSA_CU_MASK"], "0:0-71;1:72-143");
    assert_eq!(b.envs["HIP_DEVICE_MEMORY_LIMIT_0"], "16384m");
    assert_eq!(b.envs["HIP_DEVICE_MEMORY_LIMIT_1"], "8192m");
    assert_eq!(
        b.annotations[CU_ALLOCATED],
        r#"{"U1":"72-143","U2":"0-71"}"#
    );
}

#[test]
fn two_container_pod_gets_two_independent_answers() {
    let gpus = vec![mi300x(1)];
    let options = PluginOptions::default();
    let mut p = pod(
        "duo",
        &[("a", slice(1, 4096, 25)), ("b", slice(1, 8192, 50))],
    );
    schedule(&gpus, &[], &mut p);
    assert_eq!(
        p.annotation(DEVICES_TO_ALLOCATE),
        Some("U1,AMD Instinct MI300X,4096,72:;U1,AMD Instinct MI300X,8192,152:;")
    );

    // The same inputs give the same answer.
    let first = allocate(AllocateInput {
        gpus: &gpus,
        pods: &[],
        pod: &p,
        container: Some("b"),
        node_lock: None,
        options: &options,
    })
    .unwrap();
    let again = allocate(AllocateInput {
        gpus: &gpus,
        pods: &[],
        pod: &p,
        container: Some("b"),
        node_lock: None,
        options: &options,
    })
    .unwrap();
    assert_eq!(first, again);

    // Serve b first, then a: each its own limits and CUs.
    let b = serve(&gpus, &[], &mut p, Some("b"), &options);
    assert_eq!(
        p.annotation(DEVICES_TO_ALLOCATE),
        Some("U1,AMD Instinct MI300X,4096,72:;;")
    );
    let a = serve(&gpus, &[], &mut p, Some("a"), &options);
    assert_eq!(p.annotation(DEVICES_TO_ALLOCATE), Some(";;"));
    assert_eq!(
        (a.container.as_deref(), b.container.as_deref()),
        (Some("a"), Some("b"))
    );
    assert_eq!(
        (
            a.envs["HIP_DEVICE_MEMORY_LIMIT"].as_str(),
            b.envs["HIP_DEVICE_MEMORY_LIMIT"].as_str()
        ),
        ("4096m", "8192m")
    );
    let (ma, mb) = (*mask_of(&a).get(0).unwrap(), *mask_of(&b).get(0).unwrap());
    assert_eq!((ma.len(), mb.len()), (72, 152));
    assert!(ma.is_disjoint(&mb));
    // The pod's claim is the union of both containers' CUs.
    assert_eq!(
        decode_cu_allocated(p.annotation(CU_ALLOCATED).unwrap()).unwrap()["U1"],
        ma.union(&mb)
    );

    // Both served: nothing left, asking again is an error naming the annotation.
    let err = allocate(AllocateInput {
        gpus: &gpus,
        pods: &[],
        pod: &p,
        container: None,
        node_lock: None,
        options: &options,
    })
    .unwrap_err();
    assert_eq!(err.input, format!("pod default/duo {DEVICES_TO_ALLOCATE}"));
    let err = allocate(AllocateInput {
        gpus: &gpus,
        pods: &[],
        pod: &p,
        container: Some("a"),
        node_lock: None,
        options: &options,
    })
    .unwrap_err();
    assert!(err.problem.contains("already served"), "{err}");
}

#[test]
fn without_a_container_name_the_next_unserved_group_is_served() {
    let gpus = vec![mi300x(1)];
    let mut p = pod(
        "duo",
        &[("a", slice(1, 4096, 25)), ("b", slice(1, 8192, 25))],
    );
    schedule(&gpus, &[], &mut p);
    let a = serve(&gpus, &[], &mut p, None, &PluginOptions::default());
    let b = serve(&gpus, &[], &mut p, None, &PluginOptions::default());
    assert_eq!((a.group, b.group), (0, 1));
    assert_eq!(
        (a.container.as_deref(), b.container.as_deref()),
        (Some("a"), Some("b"))
    );
    assert!(mask_of(&a)
        .get(0)
        .unwrap()
        .is_disjoint(mask_of(&b).get(0).unwrap()));
}

#[test]
fn a_broken_neighbour_is_reported_and_blocks_nobody_else() {
    let gpus = vec![mi300x(1), mi300x(2)];
    let mut overlapping = pod("overlap", &[]);
    annotate(&mut overlapping, CU_ALLOCATED, r#"{"U1":"0-15"}"#);
    let mut holder = pod("holder", &[]);
    annotate(&mut holder, CU_ALLOCATED, r#"{"U1":"8-23"}"#);
    let mut ghost = pod("ghost", &[]);
    annotate(&mut ghost, CU_ALLOCATED, r#"{"U9":"0-7","U1":"24-31"}"#);
    let mut finished = pod("done", &[]);
    finished.status.phase = "Succeeded".into();
    annotate(&mut finished, CU_ALLOCATED, r#"{"U1":"32-303"}"#);
    let others = vec![overlapping, holder, ghost, finished];

    let mut p = pod("new", &[("main", slice(1, 1024, 25))]);
    annotate(
        &mut p,
        DEVICES_TO_ALLOCATE,
        "U1,AMD Instinct MI300X,1024,72:;",
    );
    let answer = serve(&gpus, &others, &mut p, None, &PluginOptions::default());
    let cus = *mask_of(&answer).get(0).unwrap();
    // Everything the live pods claim stays taken, the finished pod's CUs are free again.
    assert!(cus.is_disjoint(&CuSet::range(0, 32)), "{cus}");
    assert_eq!(cus.to_string(), "32-103");
    let problems: Vec<(&str, &str)> = answer
        .pod_problems
        .iter()
        .map(|p| (p.pod.as_str(), p.problem.as_str()))
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems
        .iter()
        .any(|(pod, why)| *pod == "default/ghost" && why.contains("\"U9\"")));
    assert!(problems
        .iter()
        .any(|(pod, why)| *pod == "default/overlap" && why.contains("overlaps CUs 8-15")));
}

#[test]
fn unreadable_claims_block_only_the_gpus_that_pod_was_granted() {
    let gpus = vec![mi300x(1), mi300x(2)];
    let mut broken = pod("broken", &[]);
    annotate(&mut broken, CU_ALLOCATED, r#"{"U1":"0-3,2"}"#);
    annotate(
        &mut broken,
        DEVICES_ALLOCATED,
        "U1,AMD Instinct MI300X,1024,8:;",
    );
    let others = vec![broken];

    let mut on_u2 = pod("on-u2", &[("main", slice(1, 1024, 25))]);
    annotate(
        &mut on_u2,
        DEVICES_TO_ALLOCATE,
        "U2,AMD Instinct MI300X,1024,72:;",
    );
    let ok = serve(&gpus, &others, &mut on_u2, None, &PluginOptions::default());
    assert_eq!(ok.envs["HSA_CU_MASK"], "0:0-71");
    assert_eq!(ok.pod_problems.len(), 1);
    assert_eq!(ok.pod_problems[0].pod, "default/broken");

    let mut on_u1 = pod("on-u1", &[("main", slice(1, 1024, 25))]);
    annotate(
        &mut on_u1,
        DEVICES_TO_ALLOCATE,
        "U1,AMD Instinct MI300X,1024,72:;",
    );
    let err = allocate(AllocateInput {
        gpus: &gpus,
        pods: &others,
        pod: &on_u1,
        container: None,
        node_lock: None,
        options: &PluginOptions::default(),
    })
    .unwrap_err();
    assert!(err.problem.contains("default/broken"), "{err}");
}

#[test]
fn whole_gpu_containers_get_no_hook_and_no_mask_but_book_every_cu() {
    let gpus = vec![mi300x(1)];
    let mut p = pod("whole", &[("main", json!({"amd.com/gpu": "1"}))]);
    schedule(&gpus, &[], &mut p);
    assert_eq!(
        p.annotation(DEVICES_TO_ALLOCATE),
        Some("U1,AMD Instinct MI300X,196608,304:;")
    );
    let a = serve(&gpus, &[], &mut p, None, &PluginOptions::default());
    assert!(a.whole_gpu);
    assert_eq!(a.envs.keys().collect::<Vec<_>>(), ["ROCR_VISIBLE_DEVICES"]);
    assert!(a.mounts.is_empty());
    assert_eq!(a.annotations[CU_ALLOCATED], r#"{"U1":"0-303"}"#);
    // Nobody else fits on that GPU now.
    let next = pod("next", &[("main", slice(1, 1024, 1))]);
    assert!(!fit_pod(&gpus, &[p], &next, Policy::Binpack).unwrap().fits);
}

#[test]
fn shared_containers_get_the_hook_priority_and_oversubscription() {
    let gpus = vec![mi300x(1)];
    let options = PluginOptions {
        hook_path: "/opt/amvgpu/libamvgpu.so".into(),
        device_memory_scaling: 2.0,
        ..Default::default()
    };
    let mut limits = slice(1, 2048, 10);
    limits["amd.com/priority"] = json!("1");
    let mut p = pod("prio", &[("main", limits)]);
    schedule(&gpus, &[], &mut p);
    let a = serve(&gpus, &[], &mut p, Some("main"), &options);
    assert_eq!(a.envs["LD_AUDIT"], "/opt/amvgpu/libamvgpu.so");
    assert_eq!(a.envs["HIP_OVERSUBSCRIBE"], "true");
    assert_eq!(a.envs["AMD_TASK_PRIORITY"], "1");
    assert_eq!(a.mounts.len(), 1);
    assert!(a.mounts[0].read_only);
    assert_eq!(a.mounts[0].container_path, "/opt/amvgpu/libamvgpu.so");

    let plain = serve(
        &gpus,
        &[],
        &mut pod_with_group("plain"),
        None,
        &PluginOptions::default(),
    );
    assert!(
        !plain.envs.contains_key("HIP_OVERSUBSCRIBE")
            && !plain.envs.contains_key("AMD_TASK_PRIORITY")
    );
    assert_eq!(plain.envs["LD_AUDIT"], "/usr/local/vgpu/libamvgpu.so");
}

fn pod_with_group(name: &str) -> k8s_glue::pod::Pod {
    let mut p = pod(name, &[("main", slice(1, 2048, 10))]);
    annotate(
        &mut p,
        DEVICES_TO_ALLOCATE,
        "U1,AMD Instinct MI300X,2048,24:;",
    );
    p
}

#[test]
fn the_rocr_id_comes_from_the_plugin_mapping_or_the_registration_and_is_never_guessed() {
    let mut gpus = vec![mi300x(1)];
    let mapped = PluginOptions {
        rocr_ids: [("U1".to_string(), "GPU-00000000000000ab".to_string())].into(),
        ..Default::default()
    };
    let a = serve(&gpus, &[], &mut pod_with_group("m"), None, &mapped);
    assert_eq!(a.envs["ROCR_VISIBLE_DEVICES"], "GPU-00000000000000ab");

    gpus[0].custom_info.remove("rocrUUID");
    let p = pod_with_group("n");
    let err = allocate(AllocateInput {
        gpus: &gpus,
        pods: &[],
        pod: &p,
        container: None,
        node_lock: None,
        options: &PluginOptions::default(),
    })
    .unwrap_err();
    assert!(err.problem.contains("ROCr"), "{err}");
    let bad = PluginOptions {
        rocr_ids: [("U1".to_string(), "U1".to_string())].into(),
        ..Default::default()
    };
    let err = allocate(AllocateInput {
        gpus: &gpus,
        pods: &[],
        pod: &p,
        container: None,
        node_lock: None,
        options: &bad,
    })
    .unwrap_err();
    assert_eq!(err.input, "rocr_ids[\"U1\"]");
}

#[test]
fn claims_are_refused_unless_the_pod_owns_the_node_lock() {
    let gpus = vec![mi300x(1)];
    let p = pod_with_group("locked");
    let options = PluginOptions::default();
    let run = |lock: &str| {
        allocate(AllocateInput {
            gpus: &gpus,
            pods: &[],
            pod: &p,
            container: None,
            node_lock: Some(lock),
            options: &options,
        })
    };
    assert!(run("2024-02-21T10:30:00Z,default,locked").is_ok());
    let err = run("2024-02-21T10:30:00Z,default,someone-else").unwrap_err();
    assert!(err.problem.contains("default/someone-else"), "{err}");
    assert!(run("garbage").is_err());
}

#[test]
fn an_rdna_gpu_gets_whole_wgps() {
    let mut gpu = mi300x(1);
    gpu.device_type = "AMD Radeon PRO W7900".into();
    gpu.devcore = 96;
    gpu.custom_info.insert("cuPerWGP".into(), 2.into());
    let gpus = vec![gpu];
    let mut pods = Vec::new();
    for i in 0..3 {
        // 5 % of 96 = 4.8 -> 4 CUs: two whole WGPs each, never a split pair.
        let mut p = pod(&format!("r{i}"), &[("main", slice(1, 1024, 5))]);
        schedule(&gpus, &pods, &mut p);
        let a = serve(&gpus, &pods, &mut p, None, &PluginOptions::default());
        let cus = *mask_of(&a).get(0).unwrap();
        assert_eq!(cus.len(), 4);
        assert!(
            cus.iter().all(|cu| cus.contains(cu ^ 1)),
            "split WGP in {cus}"
        );
        pods.push(p);
    }
}

#[test]
fn memory_only_containers_hold_every_cu_even_on_a_gpu_of_unknown_layout() {
    let mut gpu = mi300x(1);
    gpu.device_type = "amd-gpu".into();
    let gpus = vec![gpu];
    let mut p = pod(
        "mem",
        &[(
            "main",
            json!({"amd.com/gpu": "1", "amd.com/gpumem": "4096"}),
        )],
    );
    schedule(&gpus, &[], &mut p);
    assert_eq!(
        p.annotation(DEVICES_TO_ALLOCATE),
        Some("U1,amd-gpu,4096,304:;")
    );
    let a = serve(&gpus, &[], &mut p, None, &PluginOptions::default());
    // Not whole (it has a memory limit), so it gets the hook; its mask is every CU.
    assert!(!a.whole_gpu);
    assert_eq!(a.envs["HSA_CU_MASK"], "0:0-303");
    assert_eq!(a.envs["HIP_DEVICE_MEMORY_LIMIT"], "4096m");
    // HAMi's older schedulers wrote 0 cores for the same thing.
    let mut old = pod(
        "old",
        &[(
            "main",
            json!({"amd.com/gpu": "1", "amd.com/gpumem": "4096"}),
        )],
    );
    annotate(&mut old, DEVICES_TO_ALLOCATE, "U1,amd-gpu,4096,0:;");
    let b = serve(&gpus, &[], &mut old, None, &PluginOptions::default());
    assert_eq!(b.envs["HSA_CU_MASK"], "0:0-303");
    // ...and a second such container on the same GPU is refused: all CUs are held.
    let mut third = pod(
        "third",
        &[(
            "main",
            json!({"amd.com/gpu": "1", "amd.com/gpumem": "4096"}),
        )],
    );
    annotate(&mut third, DEVICES_TO_ALLOCATE, "U1,amd-gpu,4096,0:;");
    let err = allocate(AllocateInput {
        gpus: &gpus,
        pods: &[p],
        pod: &third,
        container: None,
        node_lock: None,
        options: &PluginOptions::default(),
    })
    .unwrap_err();
    assert!(err.problem.contains("held by other pods"), "{err}");
}

#[test]
fn terminating_pods_still_hold_their_cus() {
    let gpus = vec![mi300x(1)];
    let mut leaving: k8s_glue::pod::Pod = serde_json::from_value(json!({
        "metadata": {"name": "leaving", "namespace": "default", "deletionTimestamp": "2024-02-21T10:30:00Z",
                     "annotations": {"hami.io/amd-cu-allocated": "{\"U1\":\"0-71\"}"}},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    let mut p = pod_with_group("arriving");
    let a = serve(
        &gpus,
        std::slice::from_ref(&leaving),
        &mut p,
        None,
        &PluginOptions::default(),
    );
    assert_eq!(a.envs["HSA_CU_MASK"], "0:72-95");
    // Once it has Succeeded its CUs are free.
    leaving.status.phase = "Succeeded".into();
    let b = serve(
        &gpus,
        &[leaving],
        &mut pod_with_group("later"),
        None,
        &PluginOptions::default(),
    );
    assert_eq!(b.envs["HSA_CU_MASK"], "0:0-23");
}

#[test]
fn a_group_naming_one_gpu_twice_is_refused() {
    let gpus = vec![mi300x(1)];
    let mut p = pod("twice", &[("main", slice(2, 1024, 10))]);
    annotate(
        &mut p,
        DEVICES_TO_ALLOCATE,
        "U1,AMD Instinct MI300X,1024,24:U1,AMD Instinct MI300X,1024,24:;",
    );
    let err = allocate(AllocateInput {
        gpus: &gpus,
        pods: &[],
        pod: &p,
        container: None,
        node_lock: None,
        options: &PluginOptions::default(),
    })
    .unwrap_err();
    assert_eq!(
        (err.input.as_str(), err.text.as_str()),
        (
            "hami.io/amd-devices-to-allocate group 0 device 1 uuid",
            "U1"
        )
    );
}
