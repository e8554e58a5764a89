//! `hami.io/amd-cu-allocated`: never panics; a decoded value re-encodes canonically and
//! decodes back to the same claims (GPUs with no CUs are dropped by the encoder).
#![no_main]

use k8s_glue::cu_alloc::{decode_cu_allocated, encode_cu_allocated};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(mut claims) = decode_cu_allocated(text) {
        let encoded = encode_cu_allocated(&claims);
        claims.retain(|_, cus| !cus.is_empty());
        assert_eq!(decode_cu_allocated(&encoded).unwrap(), claims);
        assert_eq!(encode_cu_allocated(&claims), encoded);
    }
});
