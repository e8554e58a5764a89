//! Which GPUs the host has: compute units, architecture and VRAM of each.
//!
//! Two sources, chosen once per command and always reported (`--verbose`, `status`):
//! - the kernel's KFD topology (`/sys/class/kfd/kfd/topology/nodes/*/properties`), the
//!   same list, in the same order, that ROCr enumerates, so host index i here is device i
//!   of an unrestricted `ROCR_VISIBLE_DEVICES`;
//! - when no AMD GPU is present, the simulated runtime's settings (`HIPSIM_DEVICES`,
//!   `HIPSIM_ARCH`, `HIPSIM_CUS`, `HIPSIM_VRAM`), so that slices handed out on a
//!   development machine match what the simulator will report.
//!
//! `AMVGPU_TOPOLOGY=kfd|hipsim|auto` forces a source (the demo uses `hipsim` so that it
//! shows the simulator even on a machine that has a real GPU).

use std::fmt;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The default KFD topology root.
pub const KFD_NODES: &str = "/sys/class/kfd/kfd/topology/nodes";

/// The simulator's defaults, mirrored from hipsim's documentation.
pub const HIPSIM_DEFAULT_DEVICES: u32 = 1;
pub const HIPSIM_DEFAULT_ARCH: &str = "gfx942";
pub const HIPSIM_DEFAULT_CUS: u32 = 304;
pub const HIPSIM_DEFAULT_VRAM: u64 = 64 << 30;

/// One GPU as seen by the whole host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuInfo {
    /// Position in the host's enumeration (ROCr order).
    pub host_index: u32,
    /// `gfx942`, `gfx90a`, `gfx1100`, ...
    pub arch: String,
    pub compute_units: u32,
    pub vram_bytes: Option<u64>,
    /// Stable identity when the kernel reports one (`GPU-<16 hex digits>`).
    pub uuid: Option<String>,
}

/// Where the GPU facts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    Kfd,
    Hipsim,
}

/// The host's GPUs and a sentence saying how they were found.
#[derive(Debug, Clone, Serialize)]
pub struct Topology {
    pub source: SourceKind,
    pub description: String,
    pub gpus: Vec<GpuInfo>,
}

/// Why the GPU facts could not be read.
#[derive(Debug)]
pub struct TopologyError(pub String);

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TopologyError {}

/// Finds the host's GPUs. `env` is the process environment (a parameter so that tests
/// can pass their own).
pub fn discover(env: &dyn Fn(&str) -> Option<String>) -> Result<Topology, TopologyError> {
    let mode = env("AMVGPU_TOPOLOGY").unwrap_or_else(|| "auto".into());
    match mode.as_str() {
        "kfd" => from_kfd(Path::new(KFD_NODES)).and_then(|gpus| {
            if gpus.is_empty() {
                Err(TopologyError(format!(
                    "AMVGPU_TOPOLOGY=kfd but {KFD_NODES} lists no GPU"
                )))
            } else {
                Ok(kfd_topology(gpus))
            }
        }),
        "hipsim" => from_hipsim(env),
        "auto" => match from_kfd(Path::new(KFD_NODES)) {
            Ok(gpus) if !gpus.is_empty() => Ok(kfd_topology(gpus)),
            _ => from_hipsim(env),
        },
        other => Err(TopologyError(format!(
            "AMVGPU_TOPOLOGY=\"{other}\": expected kfd, hipsim or auto"
        ))),
    }
}

fn kfd_topology(gpus: Vec<GpuInfo>) -> Topology {
    Topology {
        source: SourceKind::Kfd,
        description: format!("KFD topology ({KFD_NODES})"),
        gpus,
    }
}

/// Reads the GPU nodes of a KFD topology tree. CPU nodes (no SIMDs) are skipped; a
/// missing tree is an empty list, a malformed GPU node an error.
pub fn from_kfd(nodes_dir: &Path) -> Result<Vec<GpuInfo>, TopologyError> {
    let Ok(entries) = fs::read_dir(nodes_dir) else {
        return Ok(Vec::new());
    };
    let mut node_ids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    node_ids.sort_unstable();
    let mut gpus = Vec::new();
    for id in node_ids {
        let node = nodes_dir.join(id.to_string());
        let props_path = node.join("properties");
        let Ok(text) = fs::read_to_string(&props_path) else {
            continue;
        };
        let prop = |key: &str| -> Option<u64> {
            text.lines().find_map(|line| {
                let (k, v) = line.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok()).flatten()
            })
        };
        let simd_count = prop("simd_count").unwrap_or(0);
        let gfx_version = prop("gfx_target_version").unwrap_or(0);
        if simd_count == 0 || gfx_version == 0 {
            continue; // a CPU node
        }
        let simd_per_cu = prop("simd_per_cu").filter(|&n| n > 0).ok_or_else(|| {
            TopologyError(format!(
                "{}: GPU node without a positive simd_per_cu",
                props_path.display()
            ))
        })?;
        let compute_units = u32::try_from(simd_count / simd_per_cu)
            .map_err(|_| TopologyError(format!("{}: absurd simd_count", props_path.display())))?;
        let vram_bytes = prop("drm_render_minor")
            .and_then(|minor| drm_vram(Path::new("/sys/class/drm"), minor))
            .or_else(|| kfd_vram(&node));
        gpus.push(GpuInfo {
            host_index: gpus.len() as u32,
            arch: arch_name(gfx_version),
            compute_units,
            vram_bytes,
            uuid: prop("unique_id")
                .filter(|&u| u != 0)
                .map(|u| format!("GPU-{u:016x}")),
        });
    }
    Ok(gpus)
}

/// `gfx_target_version` is major*10000 + minor*100 + stepping; the name prints minor and
/// stepping as one hex digit each (90010 -> gfx90a, 90402 -> gfx942, 110000 -> gfx1100).
pub fn arch_name(gfx_target_version: u64) -> String {
    let major = gfx_target_version / 10000;
    let minor = (gfx_target_version / 100) % 100;
    let stepping = gfx_target_version % 100;
    format!("gfx{major}{minor:x}{stepping:x}")
}

fn drm_vram(drm_root: &Path, render_minor: u64) -> Option<u64> {
    let path = drm_root
        .join(format!("renderD{render_minor}"))
        .join("device/mem_info_vram_total");
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Largest local (heap type 1 = public, 2 = private frame buffer) memory bank.
fn kfd_vram(node: &Path) -> Option<u64> {
    let banks = fs::read_dir(node.join("mem_banks")).ok()?;
    banks
        .filter_map(|bank| {
            let text = fs::read_to_string(bank.ok()?.path().join("properties")).ok()?;
            let field = |key: &str| -> Option<u64> {
                text.lines().find_map(|line| {
                    let (k, v) = line.split_once(' ')?;
                    (k == key).then(|| v.trim().parse().ok()).flatten()
                })
            };
            matches!(field("heap_type")?, 1 | 2)
                .then(|| field("size_in_bytes"))
                .flatten()
        })
        .max()
}

/// The simulated runtime's devices, from the same variables (and defaults) it reads.
pub fn from_hipsim(env: &dyn Fn(&str) -> Option<String>) -> Result<Topology, TopologyError> {
    let mut said = Vec::new();
    let mut setting = |name: &str, default: String| -> String {
        match env(name) {
            Some(value) => {
                said.push(format!("{name}={value}"));
                value
            }
            None => {
                said.push(format!("{name}={default} (default)"));
                default
            }
        }
    };
    let devices_text = setting("HIPSIM_DEVICES", HIPSIM_DEFAULT_DEVICES.to_string());
    let arch = setting("HIPSIM_ARCH", HIPSIM_DEFAULT_ARCH.to_string());
    let cus_text = setting("HIPSIM_CUS", HIPSIM_DEFAULT_CUS.to_string());
    let vram_text = setting("HIPSIM_VRAM", format!("{}G", HIPSIM_DEFAULT_VRAM >> 30));

    let devices: u32 = devices_text
        .trim()
        .parse()
        .ok()
        .filter(|&n| n <= 64)
        .ok_or_else(|| {
            TopologyError(format!(
                "HIPSIM_DEVICES=\"{devices_text}\": expected a device count 0..64, e.g. 2"
            ))
        })?;
    let compute_units: u32 = cus_text
        .trim()
        .parse()
        .ok()
        .filter(|&n| (1..=65536).contains(&n))
        .ok_or_else(|| {
            TopologyError(format!(
                "HIPSIM_CUS=\"{cus_text}\": expected a CU count 1..65536, e.g. 304"
            ))
        })?;
    let vram = parse_hipsim_vram(&vram_text).ok_or_else(|| {
        TopologyError(format!(
            "HIPSIM_VRAM=\"{vram_text}\": expected a size such as 64G, 512M or a byte count"
        ))
    })?;
    if !arch.starts_with("gfx") {
        return Err(TopologyError(format!(
            "HIPSIM_ARCH=\"{arch}\": expected an architecture name such as gfx942"
        )));
    }
    Ok(Topology {
        source: SourceKind::Hipsim,
        description: format!(
            "simulated runtime settings (no AMD GPU in {KFD_NODES}): {}",
            said.join(", ")
        ),
        gpus: (0..devices)
            .map(|host_index| GpuInfo {
                host_index,
                arch: arch.clone(),
                compute_units,
                vram_bytes: Some(vram),
                uuid: None,
            })
            .collect(),
    })
}

/// The simulator's grammar: decimal bytes with an optional binary suffix k, m, g or t
/// (either case), more than 0. Anything it would refuse is refused here too.
fn parse_hipsim_vram(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.as_bytes().last()?.to_ascii_lowercase() {
        b'k' => (&text[..text.len() - 1], 10),
        b'm' => (&text[..text.len() - 1], 20),
        b'g' => (&text[..text.len() - 1], 30),
        b't' => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits
        .parse::<u64>()
        .ok()?
        .checked_mul(1 << shift)
        .filter(|&bytes| bytes > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |key| map.get(key).cloned()
    }

    #[test]
    fn arch_names_follow_the_kernel_encoding() {
        assert_eq!(arch_name(90402), "gfx942");
        assert_eq!(arch_name(90010), "gfx90a");
        assert_eq!(arch_name(110000), "gfx1100");
        assert_eq!(arch_name(100300), "gfx1030");
    }

    #[test]
    fn kfd_tree_yields_gpus_in_node_order_and_skips_cpus() {
        let dir = tempfile::tempdir().unwrap();
        let nodes = dir.path();
        let write = |node: &str, props: &str| {
            fs::create_dir_all(nodes.join(node)).unwrap();
            fs::write(nodes.join(node).join("properties"), props).unwrap();
        };
        write(
            "0",
            "cpu_cores_count 64\nsimd_count 0\ngfx_target_version 0\n",
        );
        write(
            "1",
            "simd_count 1216\nsimd_per_cu 4\ngfx_target_version 90402\nunique_id 255\n",
        );
        write(
            "10",
            "simd_count 192\nsimd_per_cu 2\ngfx_target_version 110000\n",
        );
        fs::create_dir_all(nodes.join("1/mem_banks/0")).unwrap();
        fs::write(
            nodes.join("1/mem_banks/0/properties"),
            "heap_type 1\nsize_in_bytes 206141652992\n",
        )
        .unwrap();
        let gpus = from_kfd(nodes).unwrap();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].arch, "gfx942");
        assert_eq!(gpus[0].compute_units, 304);
        assert_eq!(gpus[0].vram_bytes, Some(206141652992));
        assert_eq!(gpus[0].uuid.as_deref(), Some("GPU-00000000000000ff"));
        assert_eq!(gpus[1].host_index, 1);
        assert_eq!(gpus[1].arch, "gfx1100");
        assert_eq!(gpus[1].compute_units, 96);
        assert_eq!(gpus[1].vram_bytes, None);
    }

    #[test]
    fn missing_kfd_tree_is_no_gpus() {
        assert!(from_kfd(Path::new("/nonexistent/kfd")).unwrap().is_empty());
    }

    #[test]
    fn hipsim_defaults_and_overrides_are_reported() {
        let topo = from_hipsim(&env_of(&[])).unwrap();
        assert_eq!(topo.gpus.len(), 1);
        assert_eq!(topo.gpus[0].compute_units, 304);
        assert_eq!(topo.gpus[0].arch, "gfx942");
        assert!(topo.description.contains("HIPSIM_CUS=304 (default)"));

        let topo = from_hipsim(&env_of(&[
            ("HIPSIM_DEVICES", "2"),
            ("HIPSIM_CUS", "120"),
            ("HIPSIM_VRAM", "8G"),
        ]))
        .unwrap();
        assert_eq!(topo.gpus.len(), 2);
        assert_eq!(topo.gpus[1].compute_units, 120);
        assert_eq!(topo.gpus[1].vram_bytes, Some(8 << 30));
        assert!(topo.description.contains("HIPSIM_DEVICES=2"));
    }

    #[test]
    fn bad_hipsim_settings_name_the_variable() {
        let err = from_hipsim(&env_of(&[("HIPSIM_CUS", "lots")])).unwrap_err();
        assert!(err.to_string().contains("HIPSIM_CUS=\"lots\""), "{err}");
        let err = from_hipsim(&env_of(&[("HIPSIM_DEVICES", "65")])).unwrap_err();
        assert!(err.to_string().contains("HIPSIM_DEVICES"), "{err}");
        let err = from_hipsim(&env_of(&[("HIPSIM_VRAM", "4GB")])).unwrap_err();
        assert!(err.to_string().contains("HIPSIM_VRAM=\"4GB\""), "{err}");
        assert!(from_hipsim(&env_of(&[("HIPSIM_DEVICES", "0")]))
            .unwrap()
            .gpus
            .is_empty());
        assert_eq!(parse_hipsim_vram("1073741824"), Some(1 << 30));
        assert_eq!(parse_hipsim_vram("64g"), Some(64 << 30));
        assert_eq!(parse_hipsim_vram("0"), None);
    }
}
