//! The node lock `hami.io/mutex.lock` = `<RFC3339 time>,<namespace>,<pod name>`, which
//! serialises CU range selection on a node. The device plugin may write a pod's CUs only while
//! that pod still owns the lock, and a lock older than the timeout (HAMi: 5 minutes) is stale.

use crate::error::{excerpt, Error, Result};

pub const NODE_LOCK: &str = "hami.io/mutex.lock";

/// A decoded lock value. `time` keeps the writer's spelling (Go writes the scheduler's local
/// offset), so re-encoding gives back the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLock {
    pub time: String,
    /// Seconds since the Unix epoch of `time` (fractions dropped).
    pub unix_seconds: i64,
    pub namespace: String,
    pub pod: String,
}

impl NodeLock {
    /// A lock taken at `unix_seconds`, spelled in UTC as Go's `Format(time.RFC3339)` does.
    pub fn new(unix_seconds: i64, namespace: &str, pod: &str) -> Result<Self> {
        check_name(&format!("{NODE_LOCK} namespace"), namespace)?;
        check_name(&format!("{NODE_LOCK} pod name"), pod)?;
        Ok(NodeLock {
            time: format_rfc3339_utc(unix_seconds),
            unix_seconds,
            namespace: namespace.into(),
            pod: pod.into(),
        })
    }

    pub fn encode(&self) -> String {
        format!("{},{},{}", self.time, self.namespace, self.pod)
    }

    pub fn owned_by(&self, namespace: &str, pod: &str) -> bool {
        self.namespace == namespace && self.pod == pod
    }

    /// Whether the lock is older than `timeout_seconds` at `now_unix_seconds`.
    pub fn is_expired(&self, now_unix_seconds: i64, timeout_seconds: i64) -> bool {
        now_unix_seconds.saturating_sub(self.unix_seconds) > timeout_seconds
    }
}

fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::new(what, name, "must not be empty"));
    }
    if name.contains(',') {
        return Err(Error::new(
            what,
            excerpt(name),
            "must not contain ',' (the lock's separator)",
        ));
    }
    Ok(())
}

/// Decodes a lock value. Exactly three comma-separated parts; Kubernetes names cannot hold a
/// comma, so a fourth part means the value is not a lock HAMi wrote.
pub fn decode_lock(text: &str) -> Result<NodeLock> {
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() != 3 {
        return Err(Error::new(
            NODE_LOCK,
            excerpt(text),
            format!(
                "has {} comma-separated parts, needs 3: <RFC3339 time>,<namespace>,<pod name>",
                parts.len()
            ),
        ));
    }
    let unix_seconds = parse_rfc3339(&format!("{NODE_LOCK} time"), parts[0])?;
    check_name(&format!("{NODE_LOCK} namespace"), parts[1])?;
    check_name(&format!("{NODE_LOCK} pod name"), parts[2])?;
    Ok(NodeLock {
        time: parts[0].into(),
        unix_seconds,
        namespace: parts[1].into(),
        pod: parts[2].into(),
    })
}

/// Parses what Go's `time.Parse(time.RFC3339, …)` accepts: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub fn parse_rfc3339(what: &str, text: &str) -> Result<i64> {
    let bad = |why: &str| {
        Error::new(
            what,
            excerpt(text),
            format!("is not an RFC3339 time ({why})"),
        )
    };
    let b = text.as_bytes();
    if b.len() < 20 {
        return Err(bad("too short"));
    }
    let num = |from: usize, len: usize| -> Option<i64> {
        let s = b.get(from..from + len)?;
        s.iter()
            .all(u8::is_ascii_digit)
            .then(|| s.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, c: u8| b.get(at) == Some(&c);
    if !(sep(4, b'-')
        && sep(7, b'-')
        && (sep(10, b'T') || sep(10, b't'))
        && sep(13, b':')
        && sep(16, b':'))
    {
        return Err(bad("expected YYYY-MM-DDTHH:MM:SS"));
    }
    let (Some(year), Some(month), Some(day), Some(hour), Some(min), Some(sec)) = (
        num(0, 4),
        num(5, 2),
        num(8, 2),
        num(11, 2),
        num(14, 2),
        num(17, 2),
    ) else {
        return Err(bad("non-digit in date or time"));
    };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad("no such date"));
    }
    if hour > 23 || min > 59 || sec > 59 {
        return Err(bad("no such time of day"));
    }
    let mut at = 19;
    if sep(at, b'.') {
        at += 1;
        let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(bad("'.' without fraction digits"));
        }
        at += digits;
    }
    let offset = match b.get(at) {
        Some(b'Z') | Some(b'z') if at + 1 == b.len() => 0,
        Some(&s @ (b'+' | b'-')) if at + 6 == b.len() && sep(at + 3, b':') => {
            let (Some(oh), Some(om)) = (num(at + 1, 2), num(at + 4, 2)) else {
                return Err(bad("bad zone offset"));
            };
            if oh > 23 || om > 59 {
                return Err(bad("bad zone offset"));
            }
            let off = oh * 3600 + om * 60;
            if s == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return Err(bad("expected Z or ±HH:MM at the end")),
    };
    Ok(days_from_civil(year, month, day) * 86400 + hour * 3600 + min * 60 + sec - offset)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ`, Go's RFC3339 spelling of a UTC time.
pub fn format_rfc3339_utc(unix_seconds: i64) -> String {
    let (y, m, d) = civil_from_days(unix_seconds.div_euclid(86400));
    let s = unix_seconds.rem_euclid(86400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hami_examples_decode_and_re_encode_unchanged() {
        for (text, unix) in [
            ("2024-02-21T10:30:00Z,default,my-pod", 1708511400),
            ("2025-04-19T10:30:00Z,my-namespace,my-pod", 1745058600),
            ("2024-01-15T18:30:00+08:00,default,my-gpu-pod", 1705314600),
            (
                "2024-01-15T10:30:00.123456789Z,default,my-gpu-pod",
                1705314600,
            ),
        ] {
            let lock = decode_lock(text).unwrap();
            assert_eq!(lock.unix_seconds, unix, "{text}");
            assert_eq!(lock.encode(), text);
        }
    }

    #[test]
    fn new_lock_spells_utc_like_go() {
        let lock = NodeLock::new(1708511400, "default", "my-pod").unwrap();
        assert_eq!(lock.encode(), "2024-02-21T10:30:00Z,default,my-pod");
        assert_eq!(format_rfc3339_utc(951782400), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339_utc(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn ownership_and_expiry() {
        let lock = decode_lock("2024-02-21T10:30:00Z,default,my-pod").unwrap();
        assert!(lock.owned_by("default", "my-pod"));
        assert!(!lock.owned_by("default", "other"));
        assert!(!lock.is_expired(1708511400 + 300, 300));
        assert!(lock.is_expired(1708511400 + 301, 300));
    }

    #[test]
    fn malformed_locks_name_the_part() {
        let cases = [
            ("2024-02-21T10:30:00Z", NODE_LOCK),
            ("2024-02-21T10:30:00Z,a,b,c", NODE_LOCK),
            ("2024-02-30T10:30:00Z,ns,p", "hami.io/mutex.lock time"),
            ("2024-02-21 10:30:00Z,ns,p", "hami.io/mutex.lock time"),
            ("2024-02-21T10:30:00,ns,p", "hami.io/mutex.lock time"),
            ("2024-02-21T24:30:00Z,ns,p", "hami.io/mutex.lock time"),
            ("2024-02-21T10:30:00Z,,p", "hami.io/mutex.lock namespace"),
            ("2024-02-21T10:30:00Z,ns,", "hami.io/mutex.lock pod name"),
        ];
        for (text, input) in cases {
            assert_eq!(decode_lock(text).unwrap_err().input, input, "{text}");
        }
        assert!(NodeLock::new(0, "a,b", "p").is_err());
    }
}
