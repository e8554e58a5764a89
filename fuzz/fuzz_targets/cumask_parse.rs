//! Parsers never panic, and whatever they accept reformats and re-parses to the same
//! value and keeps the same validity on every topology with that CU count.
//!
//! Input: first byte picks a device, the rest is the text (UTF-8 only: every caller
//! hands cumask `&str`).
#![no_main]

use cumask::{parse_cu_list, parse_roc_global_cu_mask, HsaCuMask, Layout, Topology};
use libfuzzer_sys::fuzz_target;

const DEVICES: [(&str, u32); 6] = [
    ("gfx942", 304),
    ("gfx942", 38),
    ("gfx1100", 96),
    ("gfx90a", 104),
    ("gfx950", 256),
    ("gfx1030", 2),
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = core::str::from_utf8(rest) else {
        return;
    };
    let (target, cu_count) = DEVICES[usize::from(selector) % DEVICES.len()];
    let topo = Topology::from_target(target, cu_count).unwrap();
    let plain = Topology::new(Layout::Independent, cu_count).unwrap();

    match parse_cu_list(text, cu_count) {
        Ok(set) => {
            assert!(!set.is_empty(), "accepted an empty list: {text:?}");
            assert!(u32::from(set.last().unwrap()) < cu_count, "{text:?}");
            let canonical = set.to_string();
            assert_eq!(parse_cu_list(&canonical, cu_count), Ok(set), "{text:?}");
            let hex = set.hex().to_string();
            assert_eq!(parse_cu_list(&hex, cu_count), Ok(set), "{text:?}");
            // Validation depends only on the set, so the reformatted text agrees.
            let verdict = topo.validate(&set);
            assert_eq!(
                topo.validate(&parse_cu_list(&canonical, cu_count).unwrap()),
                verdict
            );
            assert_eq!(plain.validate(&set), Ok(()));
            let _ = verdict.map_err(|e| e.to_string());
        }
        Err(e) => {
            assert!(e.offset <= text.len());
            let _ = e.to_string();
        }
    }

    match HsaCuMask::parse(text) {
        Ok(mask) => {
            assert!(!mask.is_empty());
            let canonical = mask.to_string();
            let again = HsaCuMask::parse(&canonical).unwrap();
            assert_eq!(again, mask, "{text:?}");
            assert_eq!(again.to_string(), canonical);
            let mut buf = [0u8; 256];
            match mask.format_into(&mut buf) {
                Ok(written) => assert_eq!(written, canonical),
                Err(e) => assert_eq!(e.needed, canonical.len()),
            }
        }
        Err(e) => {
            assert!(e.offset <= text.len());
            let _ = e.to_string();
        }
    }

    if let Ok(set) = parse_roc_global_cu_mask(text, cu_count) {
        assert!(u32::from(set.last().unwrap()) < cu_count / 4 * 4);
        assert_eq!(
            parse_roc_global_cu_mask(&set.hex().to_string(), cu_count),
            Ok(set)
        );
    }
});
