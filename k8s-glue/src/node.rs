//! The node annotation `hami.io/node-amd-register`: one JSON object per GPU, written by the
//! device plugin and read by the scheduler.
//!
//! Field order and omission follow HAMi's Go `DeviceInfo` (`omitempty` on every field), so
//! [`encode_node`] writes HAMi's exact bytes. Unknown fields (`migtemplate`, `devicepairscore`,
//! anything newer) are accepted and dropped, as Go's decoder does. The newer fields of the seed
//! live in `custominfo`, where HAMi's plugin puts them, and old readers ignore them:
//!
//! | key | meaning |
//! |---|---|
//! | `pciBDF` | PCI address, lower case (`0000:0a:00.0`) |
//! | `cuPerWGP` | CUs per work-group processor; 2 on RDNA, where masks must keep pairs whole |
//! | `xgmiPeers` | PCI addresses of the GPUs this one reaches over XGMI |
//! | `architecture` | gfx target (`gfx942`); selects the CU topology (this crate's extension) |
//! | `rocrUUID` | the `GPU-<16 hex>` id ROCr accepts in `ROCR_VISIBLE_DEVICES` (this crate's extension) |
//!
//! NUMA is the top-level `numa` field.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{excerpt, Error, Result};
use crate::gojson::to_go_json;

pub const NODE_REGISTER: &str = "hami.io/node-amd-register";

/// One registered GPU. Numeric widths are those of the Go struct, so a value Go could not have
/// written is rejected rather than truncated.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GpuInfo {
    /// AMD SMI UUID; the key every pod annotation uses.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// DRM card number.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub index: u64,
    /// How many containers may share the GPU.
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub count: i32,
    /// Registered device memory in MiB (may be scaled above the VRAM for oversubscription).
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub devmem: i32,
    /// Active compute units.
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub devcore: i32,
    /// Product name, e.g. `AMD Instinct MI300X VF`.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub device_type: String,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub numa: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mode: String,
    #[serde(skip_serializing_if = "is_false")]
    pub health: bool,
    #[serde(rename = "devicevendor", skip_serializing_if = "String::is_empty")]
    pub device_vendor: String,
    #[serde(rename = "custominfo", skip_serializing_if = "Map::is_empty")]
    pub custom_info: Map<String, Value>,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}
fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

/// Encodes the registration exactly as HAMi's plugin (`json.Marshal` of `[]*DeviceInfo`).
pub fn encode_node(gpus: &[GpuInfo]) -> String {
    to_go_json(gpus)
}

/// Decodes and validates a registration. `null` (Go's encoding of an empty slice) is no GPUs.
/// Every extension in `custominfo` is type-checked here so a bad one is reported once, at the
/// node, instead of at every pod that lands there.
pub fn decode_node(text: &str) -> Result<Vec<GpuInfo>> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::new(NODE_REGISTER, excerpt(text), format!("is not JSON: {e}")))?;
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => {
            return Err(Error::new(
                NODE_REGISTER,
                excerpt(text),
                format!("must be a JSON array, found {}", kind(&other)),
            ))
        }
    };
    let gpus = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| decode_gpu(i, item))
        .collect::<Result<Vec<_>>>()?;
    for gpu in &gpus {
        gpu.validate_extensions()?;
    }
    Ok(gpus)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn decode_gpu(i: usize, item: Value) -> Result<GpuInfo> {
    let at = |field: &str| format!("{NODE_REGISTER}[{i}].{field}");
    let Value::Object(fields) = item else {
        return Err(Error::new(
            format!("{NODE_REGISTER}[{i}]"),
            excerpt(&item.to_string()),
            format!("must be an object, found {}", kind(&item)),
        ));
    };
    let mut gpu = GpuInfo::default();
    for (key, value) in fields {
        // Go's decoder leaves a field untouched on null; so do we.
        if value.is_null() {
            continue;
        }
        // Go matches JSON keys to struct fields case-insensitively.
        match key.to_ascii_lowercase().as_str() {
            "id" => gpu.id = string_field(&at("id"), &value)?,
            "index" => gpu.index = int_field(&at("index"), &value, 0, u64::MAX as i128)? as u64,
            "count" => {
                gpu.count =
                    int_field(&at("count"), &value, i32::MIN as i128, i32::MAX as i128)? as i32
            }
            "devmem" => {
                gpu.devmem =
                    int_field(&at("devmem"), &value, i32::MIN as i128, i32::MAX as i128)? as i32
            }
            "devcore" => {
                gpu.devcore =
                    int_field(&at("devcore"), &value, i32::MIN as i128, i32::MAX as i128)? as i32
            }
            "type" => gpu.device_type = string_field(&at("type"), &value)?,
            "numa" => {
                gpu.numa =
                    int_field(&at("numa"), &value, i64::MIN as i128, i64::MAX as i128)? as i64
            }
            "mode" => gpu.mode = string_field(&at("mode"), &value)?,
            "health" => {
                gpu.health = value.as_bool().ok_or_else(|| {
                    Error::new(at("health"), value.to_string(), "must be true or false")
                })?
            }
            "devicevendor" => gpu.device_vendor = string_field(&at("devicevendor"), &value)?,
            "custominfo" => match value {
                Value::Object(map) => gpu.custom_info = map,
                other => {
                    return Err(Error::new(
                        at("custominfo"),
                        excerpt(&other.to_string()),
                        "must be an object",
                    ))
                }
            },
            _ => {}
        }
    }
    Ok(gpu)
}

fn string_field(at: &str, value: &Value) -> Result<String> {
    value.as_str().map(str::to_string).ok_or_else(|| {
        Error::new(
            at,
            excerpt(&value.to_string()),
            format!("must be a string, found {}", kind(value)),
        )
    })
}

/// An integer within `[min, max]`. Go refuses `1.5` or `1e3` for an int field, so do we.
fn int_field(at: &str, value: &Value, min: i128, max: i128) -> Result<i128> {
    let text = value.to_string();
    let n = value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from))
        .ok_or_else(|| Error::new(at, excerpt(&text), "must be an integer"))?;
    if n < min || n > max {
        return Err(Error::new(at, text, format!("is outside {min}..={max}")));
    }
    Ok(n)
}

impl GpuInfo {
    fn at(&self, key: &str) -> String {
        format!("{NODE_REGISTER}[id={}].custominfo.{key}", self.id)
    }

    fn custom_str(&self, key: &str) -> Result<Option<&str>> {
        match self.custom_info.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(Error::new(
                self.at(key),
                excerpt(&other.to_string()),
                "must be a string",
            )),
        }
    }

    /// CUs per WGP (`custominfo.cuPerWGP`); `None` when absent. HAMi's scheduler ignores a
    /// fractional value, but treating a broken registration as "no pairs" could produce an
    /// invalid RDNA mask that runs unmasked, so here it is an error.
    pub fn cu_per_wgp(&self) -> Result<Option<u32>> {
        match self.custom_info.get("cuPerWGP") {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                let n = int_field(&self.at("cuPerWGP"), v, 1, 64)?;
                Ok(Some(n as u32))
            }
        }
    }

    pub fn pci_bdf(&self) -> Result<Option<&str>> {
        self.custom_str("pciBDF")
    }

    pub fn architecture(&self) -> Result<Option<&str>> {
        self.custom_str("architecture")
    }

    /// The ROCr id published in the registration, checked to be `GPU-` and 16 hex digits
    /// (anything else ROCr rejects, and then the container sees no GPU or the wrong one).
    pub fn rocr_uuid(&self) -> Result<Option<&str>> {
        let Some(id) = self.custom_str("rocrUUID")? else {
            return Ok(None);
        };
        check_rocr_id(&self.at("rocrUUID"), id)?;
        Ok(Some(id))
    }

    /// PCI addresses of the XGMI peers (`custominfo.xgmiPeers`), empty when absent.
    pub fn xgmi_peers(&self) -> Result<Vec<&str>> {
        match self.custom_info.get("xgmiPeers") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str().ok_or_else(|| {
                        Error::new(
                            self.at("xgmiPeers"),
                            excerpt(&v.to_string()),
                            "must hold strings (PCI addresses)",
                        )
                    })
                })
                .collect(),
            Some(other) => Err(Error::new(
                self.at("xgmiPeers"),
                excerpt(&other.to_string()),
                "must be an array of PCI addresses",
            )),
        }
    }

    /// Whether two GPUs are linked over XGMI. A link counts when either end reports it: KFD
    /// reports links from both ends, and a one-sided entry is more likely a partial registration
    /// than a missing link.
    pub fn linked_to(&self, other: &GpuInfo) -> bool {
        let (Ok(Some(mine)), Ok(Some(theirs))) = (self.pci_bdf(), other.pci_bdf()) else {
            return false;
        };
        let lists = |g: &GpuInfo, bdf: &str| {
            g.xgmi_peers()
                .map(|p| p.iter().any(|x| x.eq_ignore_ascii_case(bdf)))
                .unwrap_or(false)
        };
        lists(self, theirs) || lists(other, mine)
    }

    fn validate_extensions(&self) -> Result<()> {
        self.cu_per_wgp()?;
        self.pci_bdf()?;
        self.architecture()?;
        self.rocr_uuid()?;
        self.xgmi_peers()?;
        Ok(())
    }
}

/// ROCr accepts `GPU-` followed by the 16 hex digits of the KFD unique id.
pub fn check_rocr_id(input: &str, id: &str) -> Result<()> {
    let ok =
        id.len() == 20 && id.starts_with("GPU-") && id[4..].bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err(Error::new(
            input,
            excerpt(id),
            "must be a ROCr id: \"GPU-\" and 16 hex digits",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED_EXAMPLE: &str = r#"[
  {
    "id": "<device-id>",
    "index": 0,
    "count": 1,
    "devmem": 196608,
    "devcore": 304,
    "type": "AMD Instinct MI300X VF",
    "numa": 0,
    "mode": "hami-core",
    "health": true
  }
]"#;

    #[test]
    fn seed_example_decodes_and_encodes_like_go_with_zeros_omitted() {
        let gpus = decode_node(SEED_EXAMPLE).unwrap();
        assert_eq!(gpus.len(), 1);
        assert_eq!(
            (gpus[0].devmem, gpus[0].devcore, gpus[0].count),
            (196608, 304, 1)
        );
        // Go drops index 0 and numa 0 (omitempty) and escapes <, > in strings.
        assert_eq!(
            encode_node(&gpus),
            r#"[{"id":"\u003cdevice-id\u003e","count":1,"devmem":196608,"devcore":304,"type":"AMD Instinct MI300X VF","mode":"hami-core","health":true}]"#
        );
    }

    #[test]
    fn plugin_registration_round_trips_byte_for_byte() {
        // The shape HAMi's amd-device-plugin writes: custominfo keys sorted, no spaces.
        let text = r#"[{"id":"U1","index":1,"count":10,"devmem":196608,"devcore":304,"type":"AMD Instinct MI300X","numa":1,"health":true,"devicevendor":"amd","custominfo":{"architecture":"gfx942","computeQueues":4,"pciBDF":"0000:0a:00.0","rocrUUID":"GPU-0123456789abcdef","xgmiPeers":["0000:0b:00.0"]}}]"#;
        let gpus = decode_node(text).unwrap();
        assert_eq!(encode_node(&gpus), text);
        let g = &gpus[0];
        assert_eq!(g.pci_bdf().unwrap(), Some("0000:0a:00.0"));
        assert_eq!(g.architecture().unwrap(), Some("gfx942"));
        assert_eq!(g.rocr_uuid().unwrap(), Some("GPU-0123456789abcdef"));
        assert_eq!(g.xgmi_peers().unwrap(), vec!["0000:0b:00.0"]);
        assert_eq!(g.cu_per_wgp().unwrap(), None);
    }

    #[test]
    fn unknown_fields_and_nulls_are_tolerated() {
        let text = r#"[{"id":"U1","migtemplate":null,"devicepairscore":{},"future":[1,2],"devmem":null,"DevCore":60}]"#;
        let gpus = decode_node(text).unwrap();
        assert_eq!(gpus[0].devcore, 60);
        assert_eq!(gpus[0].devmem, 0);
        assert_eq!(decode_node("null").unwrap(), vec![]);
    }

    #[test]
    fn malformed_registrations_name_the_field() {
        let cases = [
            (r#"{"id":"U1"}"#, "hami.io/node-amd-register"),
            (
                r#"[{"id":"U1","devmem":"lots"}]"#,
                "hami.io/node-amd-register[0].devmem",
            ),
            (
                r#"[{"id":"U1","devcore":1.5}]"#,
                "hami.io/node-amd-register[0].devcore",
            ),
            (
                r#"[{"id":"U1","count":3000000000}]"#,
                "hami.io/node-amd-register[0].count",
            ),
            (
                r#"[{"id":"U1","index":-1}]"#,
                "hami.io/node-amd-register[0].index",
            ),
            (r#"[{"id":7}]"#, "hami.io/node-amd-register[0].id"),
            (
                r#"[{"id":"U1","health":"yes"}]"#,
                "hami.io/node-amd-register[0].health",
            ),
            (
                r#"[{"id":"U1","custominfo":{"cuPerWGP":2.5}}]"#,
                "hami.io/node-amd-register[id=U1].custominfo.cuPerWGP",
            ),
            (
                r#"[{"id":"U1","custominfo":{"rocrUUID":"0123"}}]"#,
                "hami.io/node-amd-register[id=U1].custominfo.rocrUUID",
            ),
            (
                r#"[{"id":"U1","custominfo":{"xgmiPeers":"0000:0b:00.0"}}]"#,
                "hami.io/node-amd-register[id=U1].custominfo.xgmiPeers",
            ),
            ("[{", "hami.io/node-amd-register"),
        ];
        for (text, field) in cases {
            let err = decode_node(text).unwrap_err();
            assert_eq!(err.input, field, "{text}: {err}");
        }
    }

    #[test]
    fn xgmi_links_count_from_either_end() {
        let gpu = |bdf: &str, peers: &[&str]| {
            let mut g = GpuInfo {
                id: bdf.into(),
                ..Default::default()
            };
            g.custom_info.insert("pciBDF".into(), bdf.into());
            g.custom_info.insert(
                "xgmiPeers".into(),
                peers.iter().map(|p| Value::from(*p)).collect(),
            );
            g
        };
        let a = gpu("0000:0a:00.0", &["0000:0b:00.0"]);
        let b = gpu("0000:0b:00.0", &[]);
        let c = gpu("0000:0c:00.0", &[]);
        assert!(a.linked_to(&b) && b.linked_to(&a));
        assert!(!a.linked_to(&c) && !c.linked_to(&b));
    }
}
