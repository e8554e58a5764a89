//! `hami.io/amd-devices-(to-)allocate`: both decoders never panic, agree on the devices, and a
//! decoded value re-encodes to text that decodes the same.
#![no_main]

use k8s_glue::devices::{decode_plugin_groups, decode_scheduler_groups, encode_groups};
use libfuzzer_sys::fuzz_target;

const KEY: &str = "hami.io/amd-devices-allocated";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let scheduler = decode_scheduler_groups(KEY, text);
    let plugin = decode_plugin_groups(KEY, text);
    assert_eq!(
        scheduler.is_ok(),
        plugin.is_ok(),
        "the decoders differ only in empty groups"
    );
    let (Ok(scheduler), Ok(plugin)) = (scheduler, plugin) else {
        return;
    };
    let non_empty: Vec<_> = scheduler
        .iter()
        .filter(|g| !g.is_empty())
        .cloned()
        .collect();
    assert_eq!(non_empty, plugin);
    // Decoded fields never hold a separator, so they always re-encode.
    let encoded = encode_groups(&plugin).expect("decoded devices re-encode");
    assert_eq!(decode_plugin_groups(KEY, &encoded).unwrap(), plugin);
});
