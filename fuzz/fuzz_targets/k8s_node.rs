//! `hami.io/node-amd-register`: any text decodes or errors, never panics; a decoded
//! registration re-encodes to bytes that decode to the same GPUs (Go's encoding is canonical).
#![no_main]

use k8s_glue::node::{decode_node, encode_node};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(gpus) = decode_node(text) {
        let encoded = encode_node(&gpus);
        let again = decode_node(&encoded).expect("an encoded registration decodes");
        assert_eq!(again, gpus);
        assert_eq!(encode_node(&again), encoded);
        for gpu in &gpus {
            // Accessors and the layout lookup must not panic on any registration either.
            let _ = k8s_glue::topology::of(gpu);
            let _ = gpu.linked_to(gpu);
        }
    }
});
