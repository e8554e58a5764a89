//! Limits and log level from environment variables: pure functions, no FFI.
//!
//! Decisions (documented in the crate docs too):
//! - A size is decimal digits with an optional binary unit `k`, `m`, `g` or `t` (either case),
//!   optionally followed by `i`, `b` or `ib` (either case). So `16384m`, `16G`, `16GiB`, `16gb`
//!   and `4GB` are valid and all units are powers of 1024; a bare number is bytes.
//! - Anything else is an error naming the variable and value; the devices it governs get
//!   [`DeviceLimit::Invalid`]: every allocation is refused and queries report 0 bytes. An invalid
//!   limit never means "no limit".
//! - A limit of 0 is valid and behaves the same way: nothing can be allocated, queries say 0.
//! - `HIP_DEVICE_MEMORY_LIMIT_<i>` wins over `HIP_DEVICE_MEMORY_LIMIT` for device `i`, even when
//!   it is invalid (the more specific intent is the one that was got wrong).
//! - If a variable appears twice in the environment, the first occurrence counts (as `getenv`).

use core::fmt;

/// How many devices the hook can account for (device ids `0..MAX_DEVICES`).
pub const MAX_DEVICES: usize = 32;

/// The variable that limits every device.
pub const LIMIT_VAR: &[u8] = b"HIP_DEVICE_MEMORY_LIMIT";
/// The variable that sets the log level.
pub const LOG_LEVEL_VAR: &[u8] = b"LIBHIP_LOG_LEVEL";
/// The variable naming the shared ledger file.
pub const SHARED_CACHE_VAR: &[u8] = b"HIP_DEVICE_MEMORY_SHARED_CACHE";

/// The limit that applies to one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceLimit {
    /// No variable governs this device: its calls pass through unaccounted.
    Unlimited,
    /// At most this many bytes may be held on the device by the whole container.
    Bytes(u64),
    /// The governing variable could not be parsed: refuse every allocation.
    Invalid,
}

impl DeviceLimit {
    /// The number of bytes the container may hold, or `None` when unlimited.
    /// An invalid limit allows nothing.
    pub const fn allowance(self) -> Option<u64> {
        match self {
            DeviceLimit::Unlimited => None,
            DeviceLimit::Bytes(bytes) => Some(bytes),
            DeviceLimit::Invalid => Some(0),
        }
    }
}

/// Why a size string was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// The value is the empty string.
    Empty,
    /// The value does not start with a decimal digit (`-1`, ` 16G`, `G`).
    NotANumber,
    /// Digits followed by a decimal point or a fraction (`1.5G`).
    NotWholeNumber,
    /// Digits followed by something that is not a known unit (`16 G`, `0x10`, `16q`).
    UnknownSuffix,
    /// The value does not fit in 64 bits of bytes.
    TooLarge,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SizeError::Empty => "empty value",
            SizeError::NotANumber => {
                "not a number of bytes (expected digits, e.g. 16384m or 16GiB)"
            }
            SizeError::NotWholeNumber => "not a whole number",
            SizeError::UnknownSuffix => {
                "unknown suffix (expected k, m, g or t, optionally followed by i, b or ib)"
            }
            SizeError::TooLarge => "too large (more than 2^64-1 bytes)",
        })
    }
}

/// Parses a size such as `16384m`, `16GiB` or `1024` into bytes.
pub fn parse_size(value: &[u8]) -> Result<u64, SizeError> {
    if value.is_empty() {
        return Err(SizeError::Empty);
    }
    let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return Err(SizeError::NotANumber);
    }
    let mut number: u64 = 0;
    for &b in &value[..digits] {
        number = number
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(b - b'0')))
            .ok_or(SizeError::TooLarge)?;
    }
    let suffix = &value[digits..];
    if suffix.first() == Some(&b'.') {
        return Err(SizeError::NotWholeNumber);
    }
    let shift = match suffix.first().map(u8::to_ascii_lowercase) {
        None => return Ok(number),
        Some(b'k') => 10,
        Some(b'm') => 20,
        Some(b'g') => 30,
        Some(b't') => 40,
        Some(_) => return Err(SizeError::UnknownSuffix),
    };
    let mut rest = [0u8; 2];
    let tail = &suffix[1..];
    if tail.len() > rest.len() {
        return Err(SizeError::UnknownSuffix);
    }
    for (dst, src) in rest.iter_mut().zip(tail) {
        *dst = src.to_ascii_lowercase();
    }
    match &rest[..tail.len()] {
        b"" | b"i" | b"b" | b"ib" => {}
        _ => return Err(SizeError::UnknownSuffix),
    }
    number.checked_mul(1u64 << shift).ok_or(SizeError::TooLarge)
}

/// A configuration variable that was present but unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem<'a> {
    /// The variable's name, as found in the environment.
    pub var: &'a [u8],
    /// Its value, as found.
    pub value: &'a [u8],
    /// What is wrong with it.
    pub reason: ProblemReason,
}

/// What is wrong with a [`Problem`]'s variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemReason {
    /// A limit value that is not a size.
    BadSize(SizeError),
    /// `HIP_DEVICE_MEMORY_LIMIT_<x>` where `<x>` is not a device index below [`MAX_DEVICES`]
    /// written without leading zeros. The variable is ignored: it names no device.
    BadDeviceIndex,
    /// A log level that is not one of `0`..`4`.
    BadLogLevel,
}

impl fmt::Display for ProblemReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProblemReason::BadSize(e) => e.fmt(f),
            ProblemReason::BadDeviceIndex => write!(
                f,
                "the suffix is not a device index 0..{} (variable ignored)",
                MAX_DEVICES - 1
            ),
            ProblemReason::BadLogLevel => {
                f.write_str("not a log level 0..4 (using the default, 2 = warn)")
            }
        }
    }
}

/// The per-device limits of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Indexed by device id.
    pub per_device: [DeviceLimit; MAX_DEVICES],
}

impl Limits {
    /// True when at least one device is governed, i.e. the hook has work to do.
    pub fn any(&self) -> bool {
        self.per_device
            .iter()
            .any(|l| !matches!(l, DeviceLimit::Unlimited))
    }

    /// The limit of `device`; devices the hook cannot account for are unlimited when no limit
    /// is configured anywhere, and refused otherwise (a limit must not be escaped by naming a
    /// device past [`MAX_DEVICES`]).
    #[inline]
    pub fn get(&self, device: i32) -> DeviceLimit {
        match usize::try_from(device)
            .ok()
            .and_then(|d| self.per_device.get(d))
        {
            Some(limit) => *limit,
            None if self.any() => DeviceLimit::Invalid,
            None => DeviceLimit::Unlimited,
        }
    }
}

/// Parses the device index of a `HIP_DEVICE_MEMORY_LIMIT_<i>` suffix.
fn device_index(suffix: &[u8]) -> Option<usize> {
    let canonical = !suffix.is_empty()
        && suffix.len() <= 2
        && suffix.iter().all(u8::is_ascii_digit)
        && (suffix.len() == 1 || suffix[0] != b'0');
    if !canonical {
        return None;
    }
    let index = suffix
        .iter()
        .fold(0usize, |n, b| n * 10 + usize::from(b - b'0'));
    (index < MAX_DEVICES).then_some(index)
}

/// Computes the limits from environment variables (`(name, value)` pairs in environment
/// order), reporting every unusable variable to `report`.
pub fn limits_from_vars<'a>(
    vars: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    report: &mut dyn FnMut(Problem<'a>),
) -> Limits {
    let mut global: Option<DeviceLimit> = None;
    let mut specific: [Option<DeviceLimit>; MAX_DEVICES] = [None; MAX_DEVICES];
    let parse =
        |name: &'a [u8], value: &'a [u8], report: &mut dyn FnMut(Problem<'a>)| match parse_size(
            value,
        ) {
            Ok(bytes) => DeviceLimit::Bytes(bytes),
            Err(e) => {
                report(Problem {
                    var: name,
                    value,
                    reason: ProblemReason::BadSize(e),
                });
                DeviceLimit::Invalid
            }
        };
    for (name, value) in vars {
        let Some(rest) = name.strip_prefix(LIMIT_VAR) else {
            continue;
        };
        if rest.is_empty() {
            if global.is_none() {
                global = Some(parse(name, value, report));
            }
        } else if let Some(suffix) = rest.strip_prefix(b"_") {
            match device_index(suffix) {
                Some(i) if specific[i].is_none() => specific[i] = Some(parse(name, value, report)),
                Some(_) => {}
                None => report(Problem {
                    var: name,
                    value,
                    reason: ProblemReason::BadDeviceIndex,
                }),
            }
        }
    }
    let mut per_device = [DeviceLimit::Unlimited; MAX_DEVICES];
    for (limit, own) in per_device.iter_mut().zip(specific) {
        *limit = own.or(global).unwrap_or(DeviceLimit::Unlimited);
    }
    Limits { per_device }
}

/// Log verbosity, `LIBHIP_LOG_LEVEL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Off = 0,
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
}

impl Level {
    /// The default when the variable is unset or invalid.
    pub const DEFAULT: Level = Level::Warn;

    /// The level of a stored discriminant; out-of-range values are the most verbose.
    pub const fn from_u8(n: u8) -> Level {
        match n {
            0 => Level::Off,
            1 => Level::Error,
            2 => Level::Warn,
            3 => Level::Info,
            _ => Level::Debug,
        }
    }

    /// The word printed in each log line.
    pub const fn label(self) -> &'static str {
        match self {
            Level::Off => "OFF",
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
        }
    }
}

/// Parses `LIBHIP_LOG_LEVEL`: a single digit 0..4.
pub fn parse_log_level(value: &[u8]) -> Option<Level> {
    match value {
        [d @ b'0'..=b'4'] => Some(Level::from_u8(d - b'0')),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn accepts_every_documented_spelling() {
        for (text, bytes) in [
            ("1024", 1024),
            ("0", 0),
            ("16384m", 16384 << 20),
            ("16384M", 16384 << 20),
            ("16G", 16 * GIB),
            ("16g", 16 * GIB),
            ("16GiB", 16 * GIB),
            ("16gib", 16 * GIB),
            ("16GB", 16 * GIB),
            ("16gb", 16 * GIB),
            ("4GB", 4 * GIB),
            ("16Gi", 16 * GIB),
            ("3k", 3072),
            ("3KiB", 3072),
            ("2t", 2 << 40),
            ("2TB", 2 << 40),
            ("18446744073709551615", u64::MAX),
            ("16777215t", 16_777_215 << 40),
        ] {
            assert_eq!(parse_size(text.as_bytes()), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn rejects_everything_else_with_a_reason() {
        for (text, err) in [
            ("", SizeError::Empty),
            ("1.5G", SizeError::NotWholeNumber),
            ("1.", SizeError::NotWholeNumber),
            ("-1", SizeError::NotANumber),
            ("+1", SizeError::NotANumber),
            (" 16G", SizeError::NotANumber),
            ("G", SizeError::NotANumber),
            ("16 G", SizeError::UnknownSuffix),
            ("16G ", SizeError::UnknownSuffix),
            ("0x10", SizeError::UnknownSuffix),
            ("1024b", SizeError::UnknownSuffix),
            ("16GBi", SizeError::UnknownSuffix),
            ("16GiBs", SizeError::UnknownSuffix),
            ("16p", SizeError::UnknownSuffix),
            ("18446744073709551616", SizeError::TooLarge),
            ("16777216t", SizeError::TooLarge),
            ("99999999999999999999999g", SizeError::TooLarge),
        ] {
            assert_eq!(parse_size(text.as_bytes()), Err(err), "{text:?}");
        }
    }

    fn limits(vars: &[(&'static str, &'static str)]) -> (Limits, Vec<Problem<'static>>) {
        let mut problems = Vec::new();
        let limits = limits_from_vars(
            vars.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut |p| problems.push(p),
        );
        (limits, problems)
    }

    #[test]
    fn no_variable_means_no_work() {
        let (l, p) = limits(&[("PATH", "/bin"), ("HIP_DEVICE_MEMORY_LIMITX", "1g")]);
        assert!(!l.any());
        assert!(p.is_empty());
        assert_eq!(l.get(0), DeviceLimit::Unlimited);
        assert_eq!(l.get(100), DeviceLimit::Unlimited);
    }

    #[test]
    fn global_limit_applies_to_every_device_and_specific_wins() {
        let (l, p) = limits(&[
            ("HIP_DEVICE_MEMORY_LIMIT_1", "2g"),
            ("HIP_DEVICE_MEMORY_LIMIT", "16384m"),
        ]);
        assert!(p.is_empty());
        assert_eq!(l.get(0), DeviceLimit::Bytes(16 * GIB));
        assert_eq!(l.get(1), DeviceLimit::Bytes(2 * GIB));
        assert_eq!(l.get(31), DeviceLimit::Bytes(16 * GIB));
        // A device the ledger cannot hold must not escape the limit.
        assert_eq!(l.get(32), DeviceLimit::Invalid);
        assert_eq!(l.get(-1), DeviceLimit::Invalid);
    }

    #[test]
    fn only_specific_limits_leave_other_devices_unlimited() {
        let (l, _) = limits(&[("HIP_DEVICE_MEMORY_LIMIT_3", "1g")]);
        assert_eq!(l.get(3), DeviceLimit::Bytes(GIB));
        assert_eq!(l.get(0), DeviceLimit::Unlimited);
    }

    #[test]
    fn invalid_values_refuse_and_are_reported_with_name_and_value() {
        let (l, p) = limits(&[
            ("HIP_DEVICE_MEMORY_LIMIT", "8g"),
            ("HIP_DEVICE_MEMORY_LIMIT_1", "1.5G"),
        ]);
        assert_eq!(l.get(0), DeviceLimit::Bytes(8 * GIB));
        assert_eq!(l.get(1), DeviceLimit::Invalid);
        assert_eq!(l.get(1).allowance(), Some(0));
        assert_eq!(
            p,
            vec![Problem {
                var: b"HIP_DEVICE_MEMORY_LIMIT_1",
                value: b"1.5G",
                reason: ProblemReason::BadSize(SizeError::NotWholeNumber)
            }]
        );

        let (l, p) = limits(&[("HIP_DEVICE_MEMORY_LIMIT", "")]);
        assert_eq!(l.get(5), DeviceLimit::Invalid);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn bad_device_suffixes_are_reported_and_ignored() {
        let (l, p) = limits(&[
            ("HIP_DEVICE_MEMORY_LIMIT_32", "1g"),
            ("HIP_DEVICE_MEMORY_LIMIT_01", "1g"),
            ("HIP_DEVICE_MEMORY_LIMIT_x", "1g"),
            ("HIP_DEVICE_MEMORY_LIMIT_", "1g"),
        ]);
        assert!(!l.any());
        assert_eq!(p.len(), 4);
        assert!(p.iter().all(|p| p.reason == ProblemReason::BadDeviceIndex));
    }

    #[test]
    fn first_occurrence_wins() {
        let (l, _) = limits(&[
            ("HIP_DEVICE_MEMORY_LIMIT", "1g"),
            ("HIP_DEVICE_MEMORY_LIMIT", "2g"),
        ]);
        assert_eq!(l.get(0), DeviceLimit::Bytes(GIB));
    }

    #[test]
    fn zero_is_a_limit_not_unlimited() {
        let (l, p) = limits(&[("HIP_DEVICE_MEMORY_LIMIT", "0")]);
        assert!(p.is_empty());
        assert!(l.any());
        assert_eq!(l.get(0).allowance(), Some(0));
    }

    #[test]
    fn log_levels() {
        assert_eq!(parse_log_level(b"0"), Some(Level::Off));
        assert_eq!(parse_log_level(b"4"), Some(Level::Debug));
        assert_eq!(parse_log_level(b"5"), None);
        assert_eq!(parse_log_level(b""), None);
        assert_eq!(parse_log_level(b"02"), None);
        assert_eq!(parse_log_level(b"warn"), None);
    }

    #[test]
    fn messages_name_the_problem() {
        let reason = ProblemReason::BadSize(SizeError::NotWholeNumber);
        assert_eq!(reason.to_string(), "not a whole number");
        assert!(ProblemReason::BadDeviceIndex.to_string().contains("0..31"));
    }
}
