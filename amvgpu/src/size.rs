//! Memory sizes as users type them (`16G`, `512M`, `16GiB`) and as people read them.
//!
//! Units are binary (`G` = GiB), the convention of HAMi's `gpumem` and of the hook's
//! `HIP_DEVICE_MEMORY_LIMIT=16384m`. Decimal-looking units (`GB`) are refused rather than
//! guessed: a 7% misunderstanding in a memory limit is exactly the silent surprise a limit
//! must not have.

use std::fmt;

/// Why a size string was refused. The message names the text and shows good forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeError {
    input: String,
    reason: String,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "\"{}\": {} (examples: 16G, 512M, 16GiB, 1073741824B)",
            self.input, self.reason
        )
    }
}

impl std::error::Error for SizeError {}

const UNITS: &[(&str, u32)] = &[
    ("b", 0),
    ("k", 10),
    ("kib", 10),
    ("m", 20),
    ("mib", 20),
    ("g", 30),
    ("gib", 30),
    ("t", 40),
    ("tib", 40),
];

/// Parses a positive byte count with a mandatory binary unit.
///
/// A bare number is refused: `--memory 16` is far more likely a forgotten `G` than a
/// 16-byte limit. Write `B` for plain bytes.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let fail = |reason: String| SizeError {
        input: text.to_string(),
        reason,
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(fail("empty size".into()));
    }
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits_end);
    if number.is_empty() {
        return Err(fail("must start with a whole number".into()));
    }
    if unit.starts_with('.') || unit.starts_with(',') {
        return Err(fail(
            "fractions are not accepted; use a smaller unit (1.5G = 1536M)".into(),
        ));
    }
    if unit.is_empty() {
        return Err(fail(
            "missing unit; sizes need one of B, K, M, G, T (binary: G = GiB)".into(),
        ));
    }
    let lowered = unit.to_ascii_lowercase();
    let Some(&(_, shift)) = UNITS.iter().find(|(name, _)| *name == lowered) else {
        let hint = if matches!(lowered.as_str(), "kb" | "mb" | "gb" | "tb") {
            format!(
                "unit \"{unit}\" is ambiguous (decimal or binary?); write {}iB or {}",
                &unit[..1].to_ascii_uppercase(),
                &unit[..1].to_ascii_uppercase()
            )
        } else {
            format!("unknown unit \"{unit}\"; use B, K, M, G or T (binary, also KiB..TiB)")
        };
        return Err(fail(hint));
    };
    let value: u64 = number
        .parse()
        .map_err(|_| fail("number too large".into()))?;
    if value == 0 {
        return Err(fail(
            "a limit of zero would refuse every allocation; give a positive size".into(),
        ));
    }
    value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| fail("size does not fit in 64 bits".into()))
}

/// Renders bytes the way the table shows them: exact when a whole number of a unit,
/// else one decimal.
pub fn human(bytes: u64) -> String {
    const STEPS: &[(&str, u32)] = &[("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for &(name, shift) in STEPS {
        let unit = 1u64 << shift;
        if bytes >= unit {
            if bytes % unit == 0 {
                return format!("{} {name}", bytes >> shift);
            }
            return format!("{:.1} {name}", bytes as f64 / unit as f64);
        }
    }
    format!("{bytes} B")
}

/// The form the hook and the device plugin use: whole MiB with an `m` suffix when exact,
/// else plain bytes (which the hook also accepts).
pub fn limit_env_value(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    if bytes % MIB == 0 {
        format!("{}m", bytes / MIB)
    } else {
        bytes.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse_size("16G").unwrap(), 16 << 30);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("16GiB").unwrap(), 16 << 30);
        assert_eq!(parse_size("16g").unwrap(), 16 << 30);
        assert_eq!(parse_size("4096K").unwrap(), 4 << 20);
        assert_eq!(parse_size("2T").unwrap(), 2 << 40);
        assert_eq!(parse_size("1073741824B").unwrap(), 1 << 30);
    }

    #[test]
    fn refuses_fractions_with_a_hint() {
        let err = parse_size("1.5G").unwrap_err().to_string();
        assert!(err.contains("\"1.5G\""), "{err}");
        assert!(err.contains("1536M"), "{err}");
    }

    #[test]
    fn refuses_unknown_units_naming_them() {
        let err = parse_size("16XB").unwrap_err().to_string();
        assert!(err.contains("unknown unit \"XB\""), "{err}");
        assert!(err.contains("16G"), "examples are shown: {err}");
    }

    #[test]
    fn refuses_decimal_looking_units() {
        let err = parse_size("16GB").unwrap_err().to_string();
        assert!(err.contains("ambiguous"), "{err}");
        assert!(err.contains("GiB"), "{err}");
    }

    #[test]
    fn refuses_zero_missing_unit_empty_and_overflow() {
        assert!(parse_size("0")
            .unwrap_err()
            .to_string()
            .contains("missing unit"));
        assert!(parse_size("0G").unwrap_err().to_string().contains("zero"));
        assert!(parse_size("16")
            .unwrap_err()
            .to_string()
            .contains("missing unit"));
        assert!(parse_size("").is_err());
        assert!(parse_size("G")
            .unwrap_err()
            .to_string()
            .contains("whole number"));
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("99999999T")
            .unwrap_err()
            .to_string()
            .contains("64 bits"));
        assert!(parse_size("99999999999999999999999G")
            .unwrap_err()
            .to_string()
            .contains("too large"));
    }

    #[test]
    fn renders_sizes_for_people_and_for_the_hook() {
        assert_eq!(human(16 << 30), "16 GiB");
        assert_eq!(human(1536 << 20), "1.5 GiB");
        assert_eq!(human(100), "100 B");
        assert_eq!(limit_env_value(16 << 30), "16384m");
        assert_eq!(limit_env_value(1000), "1000");
    }
}
