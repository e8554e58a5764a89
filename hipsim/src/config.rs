//! The simulated machine, read once from the environment (pure parsing, no FFI).

use std::ffi::OsString;
use std::path::PathBuf;

/// Most devices a simulated machine (and a shared state file) can hold.
pub const MAX_DEVICES: usize = 64;

pub const DEFAULT_VRAM: u64 = 64 << 30;
pub const DEFAULT_ARCH: &str = "gfx942";
pub const DEFAULT_CUS: u32 = 304;

/// The simulated machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub devices: usize,
    pub vram: u64,
    pub arch: String,
    pub cus: u32,
    /// `HIPSIM_STATE`: the file shared by every process simulating the same machine.
    pub state: Option<PathBuf>,
}

/// Reads the configuration through `get` (so tests need not touch the process environment).
pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Result<Config, String> {
    let text = |name: &str| -> Result<Option<String>, String> {
        match get(name) {
            None => Ok(None),
            Some(raw) => raw
                .into_string()
                .map(Some)
                .map_err(|raw| format!("{name}={raw:?}: not valid UTF-8")),
        }
    };
    let devices = match text("HIPSIM_DEVICES")? {
        None => 1,
        Some(v) => parse_devices(&v).map_err(|why| format!("HIPSIM_DEVICES={v:?}: {why}"))?,
    };
    let vram = match text("HIPSIM_VRAM")? {
        None => DEFAULT_VRAM,
        Some(v) => parse_bytes(&v).map_err(|why| format!("HIPSIM_VRAM={v:?}: {why}"))?,
    };
    let arch = match text("HIPSIM_ARCH")? {
        None => DEFAULT_ARCH.to_owned(),
        Some(v) => parse_arch(&v).map_err(|why| format!("HIPSIM_ARCH={v:?}: {why}"))?,
    };
    let cus = match text("HIPSIM_CUS")? {
        None => DEFAULT_CUS,
        Some(v) => parse_cus(&v).map_err(|why| format!("HIPSIM_CUS={v:?}: {why}"))?,
    };
    let state = match get("HIPSIM_STATE") {
        None => None,
        Some(v) if v.is_empty() => {
            return Err("HIPSIM_STATE=\"\": empty path (unset it for process-local state)".into())
        }
        Some(v) => Some(PathBuf::from(v)),
    };
    Ok(Config {
        devices,
        vram,
        arch,
        cus,
        state,
    })
}

fn parse_devices(v: &str) -> Result<usize, String> {
    let n: usize = parse_decimal(v)?
        .try_into()
        .map_err(|_| "too large".to_string())?;
    if n > MAX_DEVICES {
        return Err(format!("at most {MAX_DEVICES} devices are supported"));
    }
    Ok(n)
}

fn parse_cus(v: &str) -> Result<u32, String> {
    let n = parse_decimal(v)?;
    if n == 0 || n > 65536 {
        return Err("must be between 1 and 65536".into());
    }
    Ok(n as u32)
}

fn parse_arch(v: &str) -> Result<String, String> {
    if v.is_empty() {
        return Err("empty".into());
    }
    if v.len() > 255 {
        return Err("longer than 255 bytes (gcnArchName holds 256 with the NUL)".into());
    }
    if !v.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("only printable ASCII without spaces is allowed (e.g. gfx942)".into());
    }
    Ok(v.to_owned())
}

fn parse_decimal(v: &str) -> Result<u64, String> {
    if v.is_empty() {
        return Err("empty".into());
    }
    if !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err("not a decimal number".into());
    }
    v.parse::<u64>().map_err(|_| "too large".into())
}

/// Parses a byte count: decimal digits with an optional binary suffix `k`, `m`, `g` or `t`
/// (either case; 1k = 1024). Zero is rejected: a device without memory is a configuration error.
pub fn parse_bytes(v: &str) -> Result<u64, String> {
    let (digits, shift) = match v.as_bytes().last() {
        Some(b'k' | b'K') => (&v[..v.len() - 1], 10),
        Some(b'm' | b'M') => (&v[..v.len() - 1], 20),
        Some(b'g' | b'G') => (&v[..v.len() - 1], 30),
        Some(b't' | b'T') => (&v[..v.len() - 1], 40),
        Some(b) if b.is_ascii_digit() => (v, 0),
        Some(_) => {
            let suffix: String = v.chars().skip_while(|c| c.is_ascii_digit()).collect();
            return Err(format!("unknown suffix {suffix:?} (use k, m, g or t)"));
        }
        None => return Err("empty".into()),
    };
    if !digits.is_empty() && !digits.bytes().all(|b| b.is_ascii_digit()) {
        let suffix: String = v.chars().skip_while(|c| c.is_ascii_digit()).collect();
        return Err(format!("unknown suffix {suffix:?} (use k, m, g or t)"));
    }
    let n = parse_decimal(digits)?;
    let bytes = n.checked_mul(1u64 << shift).ok_or("too large")?;
    if bytes == 0 {
        return Err("must be more than 0 bytes".into());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<Config, String> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_model_one_mi300x() {
        let c = cfg(&[]).unwrap();
        assert_eq!(
            c,
            Config {
                devices: 1,
                vram: 64 << 30,
                arch: "gfx942".into(),
                cus: 304,
                state: None
            }
        );
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("16k"), Ok(16 << 10));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("192g"), Ok(192 << 30));
        assert_eq!(parse_bytes("2T"), Ok(2 << 40));
    }

    #[test]
    fn bad_values_name_the_variable_and_the_problem() {
        let e = cfg(&[("HIPSIM_VRAM", "4GB")]).unwrap_err();
        assert!(
            e.contains("HIPSIM_VRAM=\"4GB\"") && e.contains("unknown suffix \"GB\""),
            "{e}"
        );
        let e = cfg(&[("HIPSIM_VRAM", "1.5g")]).unwrap_err();
        assert!(e.contains("HIPSIM_VRAM=\"1.5g\""), "{e}");
        assert!(cfg(&[("HIPSIM_VRAM", "0")])
            .unwrap_err()
            .contains("more than 0"));
        assert!(cfg(&[("HIPSIM_VRAM", "99999999999t")])
            .unwrap_err()
            .contains("too large"));
        assert!(cfg(&[("HIPSIM_DEVICES", "-1")])
            .unwrap_err()
            .contains("HIPSIM_DEVICES=\"-1\""));
        assert!(cfg(&[("HIPSIM_DEVICES", "65")])
            .unwrap_err()
            .contains("at most 64"));
        assert!(cfg(&[("HIPSIM_CUS", "0")])
            .unwrap_err()
            .contains("HIPSIM_CUS"));
        assert!(cfg(&[("HIPSIM_ARCH", "gfx 942")])
            .unwrap_err()
            .contains("HIPSIM_ARCH"));
        assert!(cfg(&[("HIPSIM_STATE", "")])
            .unwrap_err()
            .contains("HIPSIM_STATE"));
    }

    #[test]
    fn zero_devices_is_a_valid_machine() {
        assert_eq!(cfg(&[("HIPSIM_DEVICES", "0")]).unwrap().devices, 0);
    }
}
