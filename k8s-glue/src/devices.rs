//! The pod annotations `hami.io/amd-devices-to-allocate` and `hami.io/amd-devices-allocated`.
//!
//! ```text
//! annotation      = *( container-group ";" )    ; ";" after every group, the last included
//! container-group = *( device ":" )             ; ":" after every device, the last included
//! device          = uuid "," type "," mem "," cores
//! ```
//!
//! Two decoders exist because HAMi's two readers disagree and both must be matched:
//! [`decode_scheduler_groups`] splits like the scheduler (every `;` ends a group, so `A,T,1,1:;`
//! is the group `[A]` followed by an empty group, and group `i` belongs to the `i`-th container
//! that asks for AMD GPUs), while [`decode_plugin_groups`] drops empty groups like the device
//! plugin, which serves "the next group that still has devices". Unlike HAMi's Go code, neither
//! decoder turns a bad number into 0: that would hand a container a silent 0 MiB or 0 CU grant.

use serde::{Deserialize, Serialize};

use crate::error::{excerpt, Error, Result};

pub const DEVICES_TO_ALLOCATE: &str = "hami.io/amd-devices-to-allocate";
pub const DEVICES_ALLOCATED: &str = "hami.io/amd-devices-allocated";

const DEVICE_END: char = ':';
const GROUP_END: char = ';';
const FIELD_SEP: char = ',';

/// One GPU granted to one container: which GPU, its product name, device memory (MiB) and the
/// number of CUs (a count, not a percent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceGrant {
    pub uuid: String,
    #[serde(rename = "type")]
    pub device_type: String,
    pub mem_mib: i32,
    pub cores: i32,
}

/// Grants of one container, in container-local GPU order.
pub type ContainerGroup = Vec<DeviceGrant>;

/// Encodes groups exactly as HAMi does: every device followed by `:`, every group by `;`.
/// Fails when a UUID or type contains a separator, because HAMi escapes nothing and the result
/// would decode to different devices.
pub fn encode_groups(groups: &[ContainerGroup]) -> Result<String> {
    let mut out = String::new();
    for (g, group) in groups.iter().enumerate() {
        for (d, dev) in group.iter().enumerate() {
            check_encodable(&format!("group {g} device {d} uuid"), &dev.uuid)?;
            check_encodable(&format!("group {g} device {d} type"), &dev.device_type)?;
            out.push_str(&dev.uuid);
            out.push(FIELD_SEP);
            out.push_str(&dev.device_type);
            out.push(FIELD_SEP);
            out.push_str(&dev.mem_mib.to_string());
            out.push(FIELD_SEP);
            out.push_str(&dev.cores.to_string());
            out.push(DEVICE_END);
        }
        out.push(GROUP_END);
    }
    Ok(out)
}

fn check_encodable(what: &str, text: &str) -> Result<()> {
    if let Some(c) = text
        .chars()
        .find(|c| [FIELD_SEP, DEVICE_END, GROUP_END].contains(c))
    {
        return Err(Error::new(
            what,
            excerpt(text),
            format!(
                "contains {c:?}, a separator of the device annotation, which HAMi cannot escape"
            ),
        ));
    }
    Ok(())
}

/// Decodes like HAMi's scheduler: every piece between `;` is a group, empty ones included (so
/// the encoder's final `;` yields a trailing empty group and `""` yields one empty group).
/// Pieces without a comma are ignored, a device with fewer than 4 fields or a non-integer
/// number is an error, and fields after the fourth are ignored.
pub fn decode_scheduler_groups(annotation: &str, text: &str) -> Result<Vec<ContainerGroup>> {
    text.split(GROUP_END)
        .enumerate()
        .map(|(g, group)| decode_group(annotation, g, group))
        .collect()
}

/// Decodes like HAMi's device plugin: the same device rules as the scheduler, but groups
/// without devices (served containers, the encoder's trailing `;`) are dropped.
pub fn decode_plugin_groups(annotation: &str, text: &str) -> Result<Vec<ContainerGroup>> {
    let mut groups = decode_scheduler_groups(annotation, text)?;
    groups.retain(|g| !g.is_empty());
    Ok(groups)
}

fn decode_group(annotation: &str, g: usize, group: &str) -> Result<ContainerGroup> {
    let mut devices = Vec::new();
    for piece in group.split(DEVICE_END) {
        if !piece.contains(FIELD_SEP) {
            // HAMi skips these (the empty piece after the last ':' among them).
            continue;
        }
        let fields: Vec<&str> = piece.split(FIELD_SEP).collect();
        let at = format!("{annotation} group {g} device {}", devices.len());
        if fields.len() < 4 {
            return Err(Error::new(
                at,
                excerpt(piece),
                format!(
                    "has {} comma-separated fields, needs 4: uuid,type,memMiB,cuCount",
                    fields.len()
                ),
            ));
        }
        devices.push(DeviceGrant {
            uuid: fields[0].to_string(),
            device_type: fields[1].to_string(),
            mem_mib: parse_count(&format!("{at} memory (MiB)"), fields[2])?,
            cores: parse_count(&format!("{at} cores (CU count)"), fields[3])?,
        });
    }
    Ok(devices)
}

/// A decimal int32 as Go's `strconv.ParseInt(s, 10, 32)` reads it, but never negative: a
/// negative memory or CU count has no meaning and would corrupt usage sums.
fn parse_count(what: &str, text: &str) -> Result<i32> {
    let value: i32 = text
        .parse()
        .map_err(|_| Error::new(what, excerpt(text), "is not a decimal 32-bit integer"))?;
    if value < 0 {
        return Err(Error::new(what, text, "must not be negative"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(uuid: &str, ty: &str, mem: i32, cores: i32) -> DeviceGrant {
        DeviceGrant {
            uuid: uuid.into(),
            device_type: ty.into(),
            mem_mib: mem,
            cores,
        }
    }

    const A: &str = DEVICES_ALLOCATED;

    #[test]
    fn protocol_examples_encode_byte_for_byte() {
        let mi300 = "AMD Instinct MI300X VF";
        let table: Vec<(Vec<ContainerGroup>, &str)> = vec![
            (
                vec![vec![dev("U1", mi300, 16384, 76)]],
                "U1,AMD Instinct MI300X VF,16384,76:;",
            ),
            (
                vec![vec![dev("U1", "T", 16384, 76), dev("U2", "T", 16384, 76)]],
                "U1,T,16384,76:U2,T,16384,76:;",
            ),
            (
                vec![vec![dev("A", "T", 1, 1)], vec![dev("B", "T", 1, 1)]],
                "A,T,1,1:;B,T,1,1:;",
            ),
            (vec![], ""),
            (vec![vec![], vec![dev("B", "T", 1, 1)]], ";B,T,1,1:;"),
        ];
        for (groups, text) in table {
            assert_eq!(encode_groups(&groups).unwrap(), text);
            let mut plugin_view = groups.clone();
            plugin_view.retain(|g| !g.is_empty());
            assert_eq!(
                decode_plugin_groups(A, text).unwrap(),
                plugin_view,
                "{text:?}"
            );
        }
    }

    #[test]
    fn scheduler_decoder_keeps_empty_groups_like_go_split() {
        let table: Vec<(&str, Vec<ContainerGroup>)> = vec![
            ("", vec![vec![]]),
            ("X:;", vec![vec![], vec![]]),
            ("U1,T,5,7:;", vec![vec![dev("U1", "T", 5, 7)], vec![]]),
            (
                ";B,T,1,1:;",
                vec![vec![], vec![dev("B", "T", 1, 1)], vec![]],
            ),
            (
                "A,T,1,1:;B,T,2,2:;",
                vec![vec![dev("A", "T", 1, 1)], vec![dev("B", "T", 2, 2)], vec![]],
            ),
        ];
        for (text, want) in table {
            assert_eq!(decode_scheduler_groups(A, text).unwrap(), want, "{text:?}");
        }
    }

    #[test]
    fn plugin_decoder_drops_empty_groups() {
        assert_eq!(
            decode_plugin_groups(A, "X:;").unwrap(),
            Vec::<ContainerGroup>::new()
        );
        assert_eq!(
            decode_plugin_groups(A, ";;B,T,1,1:;").unwrap(),
            vec![vec![dev("B", "T", 1, 1)]]
        );
    }

    #[test]
    fn extra_fields_and_comma_free_pieces_are_ignored() {
        let got = decode_scheduler_groups(A, "junk:U1,T,1,2,extra,more:").unwrap();
        assert_eq!(got, vec![vec![dev("U1", "T", 1, 2)]]);
    }

    #[test]
    fn type_keeps_its_spaces() {
        let got = decode_plugin_groups(A, "U1, AMD Radeon PRO W7900 ,1,2:;").unwrap();
        assert_eq!(got[0][0].device_type, " AMD Radeon PRO W7900 ");
    }

    #[test]
    fn malformed_devices_are_errors_naming_the_field_and_text() {
        let cases = [
            ("U1,T,5:;", "group 0 device 0", "U1,T,5"),
            ("U1,T,5,7:;U2,T,x,1:;", "group 1 device 0 memory (MiB)", "x"),
            ("U1,T,5,2.5:;", "group 0 device 0 cores (CU count)", "2.5"),
            ("U1,T,5, 7:;", "group 0 device 0 cores (CU count)", " 7"),
            (
                "U1,T,99999999999,7:;",
                "group 0 device 0 memory (MiB)",
                "99999999999",
            ),
            ("U1,T,-1,7:;", "group 0 device 0 memory (MiB)", "-1"),
        ];
        for (text, field, bad) in cases {
            for decode in [decode_scheduler_groups, decode_plugin_groups] {
                let err = decode(A, text).unwrap_err();
                assert_eq!(err.input, format!("{A} {field}"), "{text:?}");
                assert_eq!(err.text, bad, "{text:?}");
            }
        }
    }

    #[test]
    fn encoder_refuses_separators_instead_of_writing_ambiguous_text() {
        for (uuid, ty) in [("U:1", "T"), ("U1", "T;x"), ("U,1", "T")] {
            let err = encode_groups(&[vec![dev(uuid, ty, 1, 1)]]).unwrap_err();
            assert!(err.problem.contains("separator"), "{err}");
        }
    }
}
