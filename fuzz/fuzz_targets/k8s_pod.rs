//! A Pod object as `kubectl -o json` prints it: reading its AMD requests never panics, and an
//! Allocate run against a fixed two-GPU node never panics whatever the pod's annotations say.
#![no_main]

use k8s_glue::allocate::{allocate, AllocateInput, PluginOptions};
use k8s_glue::node::decode_node;
use k8s_glue::pod::Pod;
use libfuzzer_sys::fuzz_target;

const NODE: &str = r#"[{"id":"U1","count":10,"devmem":196608,"devcore":304,"type":"AMD Instinct MI300X","health":true,"custominfo":{"rocrUUID":"GPU-0000000000000001"}},{"id":"U2","count":10,"devmem":49152,"devcore":96,"type":"AMD Radeon PRO W7900","health":true,"custominfo":{"cuPerWGP":2,"rocrUUID":"GPU-0000000000000002"}}]"#;

fuzz_target!(|data: &[u8]| {
    let Ok(pod) = serde_json::from_slice::<Pod>(data) else {
        return;
    };
    let _ = pod.amd_containers();
    let gpus = decode_node(NODE).unwrap();
    let options = PluginOptions::default();
    // The same pod under another name is a neighbour whose claims may be anything.
    let mut neighbour = pod.clone();
    neighbour.metadata.name.push_str("-neighbour");
    let others = [neighbour];
    for container in [None, pod.spec.containers.first().map(|c| c.name.as_str())] {
        let _ = allocate(AllocateInput {
            gpus: &gpus,
            pods: &others,
            pod: &pod,
            container,
            node_lock: None,
            options: &options,
        });
    }
});
