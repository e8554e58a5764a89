//! The pod annotation `hami.io/amd-cu-allocated`: which CUs a pod holds on each GPU, written by
//! the device plugin. A JSON object from AMD SMI UUID to a CU list, keys sorted, no spaces:
//! `{"U1":"0-75","U2":"0-75"}`.
//!
//! Lists are read leniently where HAMi's plugin is (spaces around items trimmed, empty items
//! skipped) and strictly everywhere else: the ids themselves go through cumask's ROCr-grammar
//! parser, so a repeated id, a descending range or an id past the GPU is an error, never a
//! silently smaller or larger claim.

use std::collections::BTreeMap;

use cumask::{parse_cu_list, CuSet, CAPACITY};
use serde_json::Value;

use crate::error::{excerpt, Error, Result};
use crate::gojson::to_go_json;

pub const CU_ALLOCATED: &str = "hami.io/amd-cu-allocated";

/// A pod's CUs per GPU UUID.
pub type CuClaims = BTreeMap<String, CuSet>;

/// Encodes claims as HAMi's plugin does. GPUs with no CUs are left out, so the encoding of a
/// set of claims is unique.
pub fn encode_cu_allocated(claims: &CuClaims) -> String {
    let lists: BTreeMap<&str, String> = claims
        .iter()
        .filter(|(_, cus)| !cus.is_empty())
        .map(|(uuid, cus)| (uuid.as_str(), cus.to_string()))
        .collect();
    to_go_json(&lists)
}

/// Decodes the annotation. An empty or whitespace-only value means "no claims" (the annotation
/// is how the plugin marks a pod done, and an empty one marks nothing). Ids are checked against
/// [`CAPACITY`] here; the allocator checks them against each GPU's CU count.
pub fn decode_cu_allocated(text: &str) -> Result<CuClaims> {
    if text.trim().is_empty() {
        return Ok(CuClaims::new());
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::new(CU_ALLOCATED, excerpt(text), format!("is not JSON: {e}")))?;
    let Value::Object(entries) = value else {
        return Err(Error::new(
            CU_ALLOCATED,
            excerpt(text),
            "must be a JSON object from GPU UUID to CU list",
        ));
    };
    let mut claims = CuClaims::new();
    for (uuid, list) in entries {
        let at = format!("{CU_ALLOCATED}[{uuid:?}]");
        if uuid.is_empty() {
            return Err(Error::new(at, "", "GPU UUID must not be empty"));
        }
        let Value::String(list) = list else {
            return Err(Error::new(
                at,
                excerpt(&list.to_string()),
                "must be a CU list string such as \"0-75\"",
            ));
        };
        claims.insert(uuid, parse_claim_list(&at, &list, CAPACITY as u32)?);
    }
    Ok(claims)
}

/// Parses one CU list of the annotation for a GPU with `cu_count` CUs.
pub fn parse_claim_list(at: &str, list: &str, cu_count: u32) -> Result<CuSet> {
    let mut items = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        // ROCr would delete inner whitespace (`1 2` = 12); HAMi's plugin rejects it. A claim
        // must mean one thing to every reader, so reject.
        if item.chars().any(char::is_whitespace) {
            return Err(Error::new(
                at,
                excerpt(list),
                format!("item {item:?} has whitespace inside a CU id"),
            ));
        }
        if item.len() > 1 && item.as_bytes()[..2].eq_ignore_ascii_case(b"0x") {
            return Err(Error::new(
                at,
                excerpt(list),
                format!(
                    "item {item:?} is a hex mask; this annotation holds decimal ids and ranges"
                ),
            ));
        }
        items.push(item);
    }
    if items.is_empty() {
        return Ok(CuSet::new());
    }
    parse_cu_list(&items.join(","), cu_count)
        .map_err(|e| Error::new(at, excerpt(list), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(entries: &[(&str, CuSet)]) -> CuClaims {
        entries.iter().map(|(u, s)| (u.to_string(), *s)).collect()
    }

    #[test]
    fn protocol_example_round_trips_byte_for_byte() {
        let text = r#"{"U1":"0-75","U2":"0-75"}"#;
        let got = decode_cu_allocated(text).unwrap();
        assert_eq!(
            got,
            claims(&[("U1", CuSet::range(0, 76)), ("U2", CuSet::range(0, 76))])
        );
        assert_eq!(encode_cu_allocated(&got), text);
    }

    #[test]
    fn encoding_sorts_keys_and_writes_canonical_lists() {
        let mut odd = CuSet::new();
        for id in [9, 0, 1, 2, 5] {
            odd.insert(id);
        }
        let c = claims(&[
            ("b", odd),
            ("a", CuSet::range(8, 16)),
            ("empty", CuSet::new()),
        ]);
        assert_eq!(encode_cu_allocated(&c), r#"{"a":"8-15","b":"0-2,5,9"}"#);
        assert_eq!(encode_cu_allocated(&CuClaims::new()), "{}");
    }

    #[test]
    fn parsing_trims_spaces_and_skips_empty_parts() {
        let got = decode_cu_allocated(r#"{ "U1" : " 0-3 , ,8,, 10-12 ," }"#).unwrap();
        assert_eq!(got["U1"].to_string(), "0-3,8,10-12");
        assert_eq!(decode_cu_allocated("").unwrap(), CuClaims::new());
        assert_eq!(
            decode_cu_allocated(r#"{"U1":" "}"#).unwrap()["U1"],
            CuSet::new()
        );
    }

    #[test]
    fn malformed_claims_name_the_gpu_and_the_text() {
        let cases = [
            (
                r#"{"U1":"0-3,2"}"#,
                r#"hami.io/amd-cu-allocated["U1"]"#,
                "0-3,2",
            ),
            (
                r#"{"U1":"5-3"}"#,
                r#"hami.io/amd-cu-allocated["U1"]"#,
                "5-3",
            ),
            (
                r#"{"U1":"1024"}"#,
                r#"hami.io/amd-cu-allocated["U1"]"#,
                "1024",
            ),
            (r#"{"U1":"a"}"#, r#"hami.io/amd-cu-allocated["U1"]"#, "a"),
            (
                r#"{"U1":"1 2"}"#,
                r#"hami.io/amd-cu-allocated["U1"]"#,
                "1 2",
            ),
            (
                r#"{"U1":"0xff"}"#,
                r#"hami.io/amd-cu-allocated["U1"]"#,
                "0xff",
            ),
            (r#"{"U1":"-3"}"#, r#"hami.io/amd-cu-allocated["U1"]"#, "-3"),
            // Found by fuzzing: a multi-byte character where the hex check looks.
            (
                "{\"U1\":\"?\u{10475e}\"}",
                r#"hami.io/amd-cu-allocated["U1"]"#,
                "?\u{10475e}",
            ),
            (r#"{"U1":7}"#, r#"hami.io/amd-cu-allocated["U1"]"#, "7"),
            (r#"{"":"1"}"#, r#"hami.io/amd-cu-allocated[""]"#, ""),
            (r#"["U1"]"#, "hami.io/amd-cu-allocated", r#"["U1"]"#),
            (
                r#"{"U1":"0-3""#,
                "hami.io/amd-cu-allocated",
                r#"{"U1":"0-3""#,
            ),
        ];
        for (text, input, bad) in cases {
            let err = decode_cu_allocated(text).unwrap_err();
            assert_eq!(
                (err.input.as_str(), err.text.as_str()),
                (input, bad),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn ids_past_the_gpu_are_rejected_against_its_cu_count() {
        assert!(parse_claim_list("x", "300-303", 304).is_ok());
        let err = parse_claim_list("x", "300-304", 304).unwrap_err();
        assert_eq!(err.text, "300-304");
    }
}
