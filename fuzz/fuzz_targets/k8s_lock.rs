//! `hami.io/mutex.lock`: never panics; a decoded lock re-encodes to exactly the input.
#![no_main]

use k8s_glue::lock::decode_lock;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(lock) = decode_lock(text) {
        assert_eq!(lock.encode(), text);
        let _ = lock.is_expired(i64::MAX, i64::MAX);
        let _ = lock.is_expired(i64::MIN, 0);
    }
});
