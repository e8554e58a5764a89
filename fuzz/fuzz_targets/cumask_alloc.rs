//! Sequences of tenants arriving and leaving on one GPU: every allocation is disjoint
//! from what is taken, has the rounded size, validates on the topology, re-parses from
//! its text, and is deterministic; releasing restores the free count.
//!
//! Input: first byte picks a device; then each byte is an operation: high bit clear =
//! allocate (low 7 bits scaled to a count), high bit set = release tenant (low bits).
#![no_main]

use cumask::{allocate, parse_cu_list, AllocError, CuSet, Topology};
use libfuzzer_sys::fuzz_target;

const DEVICES: [(&str, u32); 5] = [
    ("gfx942", 304),
    ("gfx942", 228),
    ("gfx1100", 96),
    ("gfx90a", 104),
    ("gfx942", 38),
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, ops)) = data.split_first() else {
        return;
    };
    let (target, cu_count) = DEVICES[usize::from(selector) % DEVICES.len()];
    let topo = Topology::from_target(target, cu_count).unwrap();
    let mut tenants: Vec<CuSet> = Vec::new();
    for &op in ops.iter().take(256) {
        let taken = tenants.iter().fold(CuSet::new(), |acc, t| acc.union(t));
        if op & 0x80 == 0 {
            let count = 1 + u32::from(op) * cu_count / 128;
            let count = count.min(cu_count);
            let result = allocate(&topo, &taken, count);
            assert_eq!(allocate(&topo, &taken, count), result, "not deterministic");
            match result {
                Ok(slice) => {
                    assert!(slice.is_disjoint(&taken));
                    assert_eq!(slice.len() as u32, topo.round_count(count).unwrap());
                    assert_eq!(topo.validate(&slice), Ok(()), "{slice}");
                    assert_eq!(parse_cu_list(&slice.to_string(), cu_count), Ok(slice));
                    tenants.push(slice);
                }
                Err(AllocError::DoesNotFit { requested, free }) => {
                    assert!(free < requested);
                    assert!(free as usize <= cu_count as usize - taken.len());
                }
                Err(AllocError::XcdFull { .. }) => assert!(topo.xcd_count() > 1),
                Err(e) => panic!("unexpected error {e}"),
            }
        } else if !tenants.is_empty() {
            let index = usize::from(op & 0x7f) % tenants.len();
            let gone = tenants.swap_remove(index);
            let after = tenants.iter().fold(CuSet::new(), |acc, t| acc.union(t));
            assert_eq!(after.len(), taken.len() - gone.len(), "release lost CUs");
        }
    }
});
