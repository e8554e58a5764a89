//! Which cumask [`Topology`] a registered GPU has, and the CU count a percentage books on it.
//! The scheduler and the device plugin both come through here, so they always agree.
//!
//! The layout is taken, in order, from:
//! 1. `custominfo.architecture` (the gfx target, this crate's extension);
//! 2. `custominfo.cuPerWGP` = 2 (HAMi's plugin publishes it on RDNA only): WGP pairs;
//! 3. the product name: `MI300`, `MI308`, `MI325` are gfx942; `MI350`, `MI355` gfx950;
//!    `MI210`, `MI250` gfx90a; `MI100` gfx908; `MI50`, `MI60` gfx906.
//!
//! Anything else is an error asking for `custominfo.architecture`: guessing "independent CUs"
//! for an unknown multi-XCD part would hand out masks that leave XCDs unmasked.

use cumask::{cu_count_from_percent, Layout, Topology};

use crate::error::{Error, Result};
use crate::node::{GpuInfo, NODE_REGISTER};

const PRODUCT_TARGETS: [(&str, &str); 10] = [
    ("MI300", "gfx942"),
    ("MI308", "gfx942"),
    ("MI325", "gfx942"),
    ("MI350", "gfx950"),
    ("MI355", "gfx950"),
    ("MI210", "gfx90a"),
    ("MI250", "gfx90a"),
    ("MI100", "gfx908"),
    ("MI50", "gfx906"),
    ("MI60", "gfx906"),
];

/// The gfx target a GPU's registration implies, if any (see the module docs for the order).
pub fn target_of(gpu: &GpuInfo) -> Result<Option<String>> {
    if let Some(arch) = gpu.architecture()? {
        return Ok(Some(arch.to_string()));
    }
    if gpu.cu_per_wgp()?.is_some_and(|n| n > 1) {
        return Ok(None);
    }
    let name = gpu.device_type.to_ascii_uppercase();
    Ok(PRODUCT_TARGETS
        .iter()
        .find(|(product, _)| name.contains(product))
        .map(|(_, t)| t.to_string()))
}

/// The CU topology of a registered GPU.
pub fn of(gpu: &GpuInfo) -> Result<Topology> {
    let at = format!("{NODE_REGISTER}[id={}]", gpu.id);
    let devcore = u32::try_from(gpu.devcore)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            Error::new(
                format!("{at}.devcore"),
                gpu.devcore.to_string(),
                "a GPU needs at least one CU",
            )
        })?;
    if let Some(target) = target_of(gpu)? {
        return Topology::from_target(&target, devcore)
            .map_err(|e| Error::new(format!("{at} architecture"), target, e.to_string()));
    }
    match gpu.cu_per_wgp()? {
        Some(2) => Topology::new(Layout::WorkGroupProcessors, devcore)
            .map_err(|e| Error::new(format!("{at}.custominfo.cuPerWGP"), "2", e.to_string())),
        Some(n) if n > 2 => Err(Error::new(format!("{at}.custominfo.cuPerWGP"), n.to_string(), "only WGPs of 2 CUs are known")),
        _ => Err(Error::new(
            format!("{at}.type"),
            gpu.device_type.clone(),
            "CU layout unknown: publish custominfo.architecture (the gfx target, e.g. gfx942) so masks can be made safe",
        )),
    }
}

pub fn cu_total(topo: &Topology) -> u32 {
    topo.cu_count()
}

/// HAMi's `clamp(floor(percent × devcore / 100), 1, devcore)`, then cumask's rounding for the
/// layout (gfx942: down to a multiple of the 8 XCDs, so 25 % of 304 books 72 CUs, not 76).
pub fn count_for_percent(gpu: &GpuInfo, topo: &Topology, percent: u32) -> Result<u32> {
    let at = format!("{NODE_REGISTER}[id={}]", gpu.id);
    let raw = cu_count_from_percent(percent, topo.cu_count())
        .map_err(|e| Error::new("amd.com/gpucores", percent.to_string(), e.to_string()))?;
    topo.round_count(raw)
        .map_err(|e| Error::new(at, raw.to_string(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn gpu(ty: &str, devcore: i32, custom: &[(&str, Value)]) -> GpuInfo {
        let mut g = GpuInfo {
            id: "U1".into(),
            device_type: ty.into(),
            devcore,
            ..Default::default()
        };
        for (k, v) in custom {
            g.custom_info.insert(k.to_string(), v.clone());
        }
        g
    }

    #[test]
    fn mi300x_by_name_is_eight_xcds_and_rounds_percent_down_to_xcd_multiples() {
        let g = gpu("AMD Instinct MI300X VF", 304, &[]);
        let t = of(&g).unwrap();
        assert_eq!(t.xcd_count(), 8);
        for (pct, cus) in [(25, 72), (33, 96), (67, 200), (100, 304), (1, 8)] {
            assert_eq!(count_for_percent(&g, &t, pct).unwrap(), cus, "{pct}%");
        }
    }

    #[test]
    fn architecture_wins_over_name_and_rdna_pairs_round_up() {
        let g = gpu(
            "AMD Instinct MI300X",
            38,
            &[("architecture", "gfx942".into())],
        );
        assert_eq!(of(&g).unwrap().xcd_count(), 1);
        let r = gpu("AMD Radeon RX 7900 XTX", 96, &[("cuPerWGP", 2.into())]);
        let t = of(&r).unwrap();
        assert_eq!(t.layout(), Layout::WorkGroupProcessors);
        // 5 % of 96 = 4.8 -> 4; 7 % = 6.72 -> 6; 3 % = 2.88 -> 2; odd counts round up.
        assert_eq!(count_for_percent(&r, &t, 3).unwrap(), 2);
        let small = gpu("r", 64, &[("cuPerWGP", 2.into())]);
        assert_eq!(
            count_for_percent(&small, &of(&small).unwrap(), 5).unwrap(),
            4
        );
    }

    #[test]
    fn unknown_layout_is_an_error_not_a_guess() {
        let err = of(&gpu("amd-gpu", 304, &[])).unwrap_err();
        assert!(err.problem.contains("custominfo.architecture"), "{err}");
        let err = of(&gpu("AMD Instinct MI300X", 300, &[])).unwrap_err();
        assert!(err.input.ends_with("architecture"), "{err}");
        assert!(of(&gpu("AMD Instinct MI300X", 0, &[])).is_err());
    }
}
