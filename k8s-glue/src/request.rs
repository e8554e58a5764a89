//! A container's AMD resource limits, read as HAMi's scheduler reads them.
//!
//! | resource | meaning | accepted |
//! |---|---|---|
//! | `amd.com/gpu` | number of GPUs | integer >= 0; absent but another AMD resource set: 1 (the webhook adds it) |
//! | `amd.com/gpumem` | device memory per GPU, MiB | integer >= 1; wins over the percentage |
//! | `amd.com/gpumem-percentage` | device memory per GPU, % of the registered memory | integer 1..=100 |
//! | `amd.com/gpucores` | CUs per GPU, % of the GPU's CUs | integer 1..=100, else rejected |
//! | `amd.com/priority` | queue priority (`AMD_TASK_PRIORITY`: 0 high, >= 1 low) | integer >= 0 |
//!
//! No memory resource means the whole card's memory; no `gpucores` means all CUs. Values are
//! Kubernetes quantities (`16384`, `16Ki`, `2k`); a value that is not a whole number is an
//! error, where HAMi's `AsInt64` would silently ignore it.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{excerpt, Error, Result};
use crate::node::GpuInfo;
use crate::topology;

pub const RESOURCE_GPU: &str = "amd.com/gpu";
pub const RESOURCE_MEMORY: &str = "amd.com/gpumem";
pub const RESOURCE_MEMORY_PERCENTAGE: &str = "amd.com/gpumem-percentage";
pub const RESOURCE_CORES: &str = "amd.com/gpucores";
pub const RESOURCE_PRIORITY: &str = "amd.com/priority";

/// How much device memory a container asks for on each of its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum MemoryRequest {
    WholeCard,
    Mib(u32),
    Percent(u32),
}

/// One container's AMD request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GpuRequest {
    pub gpus: u32,
    pub memory: MemoryRequest,
    /// `None`: all CUs of each GPU.
    pub cores_percent: Option<u32>,
    pub priority: Option<u32>,
}

impl GpuRequest {
    /// Whole-GPU containers get neither the memory hook nor a CU mask.
    pub fn is_whole_gpu(&self) -> bool {
        self.memory == MemoryRequest::WholeCard && self.cores_percent.is_none()
    }

    /// MiB to book on `gpu`.
    pub fn memory_on(&self, gpu: &GpuInfo) -> i32 {
        let total = gpu.devmem.max(0);
        match self.memory {
            MemoryRequest::WholeCard => total,
            // A request larger than any i32 cannot fit anywhere; saturate so it simply fails.
            MemoryRequest::Mib(m) => i32::try_from(m).unwrap_or(i32::MAX),
            MemoryRequest::Percent(p) => (i64::from(total) * i64::from(p) / 100) as i32,
        }
    }

    /// CUs to book on `gpu`, through cumask so the scheduler and the plugin round alike.
    /// All CUs need no layout knowledge (every CU is always a valid mask); a percentage does.
    pub fn cores_on(&self, gpu: &GpuInfo) -> Result<u32> {
        match self.cores_percent {
            None => Ok(u32::try_from(gpu.devcore).unwrap_or(0)),
            Some(p) => {
                let topo = topology::of(gpu)?;
                topology::count_for_percent(gpu, &topo, p)
            }
        }
    }
}

/// Reads one container's limits (falling back to its requests, as HAMi does). `Ok(None)`: the
/// container asks for no AMD GPU.
pub fn container_request(
    limits: &BTreeMap<String, Value>,
    requests: &BTreeMap<String, Value>,
) -> Result<Option<GpuRequest>> {
    let get = |name: &str| limits.get(name).or_else(|| requests.get(name));
    let count = get(RESOURCE_GPU)
        .map(|v| quantity(RESOURCE_GPU, v))
        .transpose()?;
    let mem = get(RESOURCE_MEMORY)
        .map(|v| quantity(RESOURCE_MEMORY, v))
        .transpose()?;
    let mem_pct = get(RESOURCE_MEMORY_PERCENTAGE)
        .map(|v| quantity(RESOURCE_MEMORY_PERCENTAGE, v))
        .transpose()?;
    let cores = get(RESOURCE_CORES)
        .map(|v| quantity(RESOURCE_CORES, v))
        .transpose()?;
    let priority = get(RESOURCE_PRIORITY)
        .map(|v| quantity(RESOURCE_PRIORITY, v))
        .transpose()?;

    let percent = |name: &str, v: u64, raw: Option<&Value>| -> Result<u32> {
        if (1..=100).contains(&v) {
            Ok(v as u32)
        } else {
            Err(Error::new(
                name,
                raw.map(show).unwrap_or_default(),
                "must be an integer percent from 1 to 100",
            ))
        }
    };
    let cores_percent = cores
        .map(|c| percent(RESOURCE_CORES, c, get(RESOURCE_CORES)))
        .transpose()?;
    let mem_percent = mem_pct
        .map(|c| {
            percent(
                RESOURCE_MEMORY_PERCENTAGE,
                c,
                get(RESOURCE_MEMORY_PERCENTAGE),
            )
        })
        .transpose()?;
    let memory = match (mem, mem_percent) {
        (Some(0), _) => {
            return Err(Error::new(
                RESOURCE_MEMORY,
                show(get(RESOURCE_MEMORY).unwrap()),
                "must be at least 1 MiB",
            ))
        }
        (Some(m), _) => MemoryRequest::Mib(u32::try_from(m).map_err(|_| {
            Error::new(
                RESOURCE_MEMORY,
                show(get(RESOURCE_MEMORY).unwrap()),
                "is larger than any GPU (over 4 PiB)",
            )
        })?),
        (None, Some(p)) => MemoryRequest::Percent(p),
        (None, None) => MemoryRequest::WholeCard,
    };
    let asks_slice = mem.is_some() || mem_pct.is_some() || cores.is_some();
    let gpus = match count {
        Some(0) => return Ok(None),
        Some(n) => u32::try_from(n).map_err(|_| {
            Error::new(
                RESOURCE_GPU,
                show(get(RESOURCE_GPU).unwrap()),
                "is not a plausible GPU count",
            )
        })?,
        None if asks_slice => 1,
        None => return Ok(None),
    };
    let priority = priority
        .map(|p| {
            u32::try_from(p).map_err(|_| {
                Error::new(
                    RESOURCE_PRIORITY,
                    show(get(RESOURCE_PRIORITY).unwrap()),
                    "is too large",
                )
            })
        })
        .transpose()?;
    Ok(Some(GpuRequest {
        gpus,
        memory,
        cores_percent,
        priority,
    }))
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => excerpt(s),
        other => excerpt(&other.to_string()),
    }
}

/// A non-negative whole Kubernetes quantity: digits with an optional decimal (`k`, `M`, `G`,
/// `T`, `P`, `E`) or binary (`Ki` … `Ei`) suffix, or a JSON integer.
pub fn quantity(name: &str, value: &Value) -> Result<u64> {
    let text = match value {
        Value::Number(n) => {
            return n.as_u64().ok_or_else(|| {
                Error::new(name, n.to_string(), "must be a non-negative whole number")
            })
        }
        Value::String(s) => s.as_str(),
        other => {
            return Err(Error::new(
                name,
                show(other),
                "must be a quantity string or an integer",
            ))
        }
    };
    let bad = |why: &str| Error::new(name, excerpt(text), why.to_string());
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(bad(
            "must be a non-negative whole number (optionally with a k/M/G or Ki/Mi/Gi suffix)",
        ));
    }
    let (number, suffix) = t.split_at(digits);
    let multiplier: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        _ => {
            return Err(bad(
                "has an unknown or fractional suffix; only whole numbers are meaningful here",
            ))
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| bad("is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits(v: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(v).unwrap()
    }

    fn req(v: Value) -> Result<Option<GpuRequest>> {
        container_request(&limits(v), &BTreeMap::new())
    }

    #[test]
    fn seed_example_request() {
        let r = req(json!({"amd.com/gpu": "1", "amd.com/gpumem": "16384", "amd.com/gpucores": "25", "cpu": "2"})).unwrap().unwrap();
        assert_eq!(
            r,
            GpuRequest {
                gpus: 1,
                memory: MemoryRequest::Mib(16384),
                cores_percent: Some(25),
                priority: None
            }
        );
        assert!(!r.is_whole_gpu());
    }

    #[test]
    fn whole_gpu_and_defaults() {
        let r = req(json!({"amd.com/gpu": 2})).unwrap().unwrap();
        assert!(r.is_whole_gpu());
        assert_eq!(r.gpus, 2);
        // Only a percentage: the webhook adds one GPU.
        let r = req(json!({"amd.com/gpumem-percentage": "50"}))
            .unwrap()
            .unwrap();
        assert_eq!((r.gpus, r.memory), (1, MemoryRequest::Percent(50)));
        assert_eq!(req(json!({"cpu": "1"})).unwrap(), None);
        assert_eq!(
            req(json!({"amd.com/gpu": "0", "amd.com/gpucores": "5"})).unwrap(),
            None
        );
    }

    #[test]
    fn gpumem_wins_over_percentage() {
        let r = req(
            json!({"amd.com/gpu": "1", "amd.com/gpumem": "1Ki", "amd.com/gpumem-percentage": "50"}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.memory, MemoryRequest::Mib(1024));
    }

    #[test]
    fn requests_are_read_when_limits_lack_the_resource() {
        let r = container_request(
            &BTreeMap::new(),
            &limits(json!({"amd.com/gpu": "1", "amd.com/priority": "1"})),
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.priority, Some(1));
    }

    #[test]
    fn out_of_range_or_malformed_values_are_rejected_by_name() {
        let cases = [
            (
                json!({"amd.com/gpu": "1", "amd.com/gpucores": "0"}),
                "amd.com/gpucores",
                "0",
            ),
            (
                json!({"amd.com/gpu": "1", "amd.com/gpucores": "101"}),
                "amd.com/gpucores",
                "101",
            ),
            (
                json!({"amd.com/gpu": "1", "amd.com/gpucores": "2.5"}),
                "amd.com/gpucores",
                "2.5",
            ),
            (
                json!({"amd.com/gpu": "1", "amd.com/gpucores": "500m"}),
                "amd.com/gpucores",
                "500m",
            ),
            (
                json!({"amd.com/gpu": "1", "amd.com/gpumem-percentage": "0"}),
                "amd.com/gpumem-percentage",
                "0",
            ),
            (
                json!({"amd.com/gpu": "1", "amd.com/gpumem": "0"}),
                "amd.com/gpumem",
                "0",
            ),
            (
                json!({"amd.com/gpu": "1", "amd.com/gpumem": "4GB"}),
                "amd.com/gpumem",
                "4GB",
            ),
            (json!({"amd.com/gpu": "-1"}), "amd.com/gpu", "-1"),
            (json!({"amd.com/gpu": 1.5}), "amd.com/gpu", "1.5"),
            (
                json!({"amd.com/gpu": "1", "amd.com/priority": "-1"}),
                "amd.com/priority",
                "-1",
            ),
        ];
        for (l, name, text) in cases {
            let err = req(l.clone()).unwrap_err();
            assert_eq!((err.input.as_str(), err.text.as_str()), (name, text), "{l}");
        }
    }

    #[test]
    fn quantities() {
        for (text, want) in [("16384", 16384), ("2k", 2000), ("1Gi", 1 << 30), (" 7 ", 7)] {
            assert_eq!(quantity("q", &json!(text)).unwrap(), want, "{text}");
        }
        assert!(quantity("q", &json!("99999999999999999999")).is_err());
        assert!(quantity("q", &json!("16Ei")).is_err());
    }
}
