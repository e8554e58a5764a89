//! HAMi's `amd.com/gpucores` percentage to a CU count.

use core::fmt;

/// A percentage or device size HAMi would reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PercentError {
    /// Not an integer in `1..=100`.
    OutOfRange {
        /// The value given.
        percent: u32,
    },
    /// The device reports 0 CUs.
    NoCus,
}

impl fmt::Display for PercentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PercentError::OutOfRange { percent } => {
                write!(f, "gpucores {percent} is not a percentage in 1..=100")
            }
            PercentError::NoCus => f.write_str("device reports 0 CUs (devcore)"),
        }
    }
}

/// `clamp(floor(percent × devcore / 100), 1, devcore)`: HAMi's CU count for a
/// `amd.com/gpucores` request on a device with `devcore` CUs.
///
/// This is the booked count; pass it through [`Topology::round_count`](crate::Topology::round_count)
/// for what the device can really give.
///
/// ```
/// use cumask::cu_count_from_percent;
/// assert_eq!(cu_count_from_percent(25, 304), Ok(76));
/// assert_eq!(cu_count_from_percent(33, 304), Ok(100));
/// assert_eq!(cu_count_from_percent(67, 304), Ok(203));
/// assert!(cu_count_from_percent(0, 304).is_err());
/// ```
pub fn cu_count_from_percent(percent: u32, devcore: u32) -> Result<u32, PercentError> {
    if !(1..=100).contains(&percent) {
        return Err(PercentError::OutOfRange { percent });
    }
    if devcore == 0 {
        return Err(PercentError::NoCus);
    }
    // u64: percent × devcore cannot overflow for any u32 devcore.
    let floor = u64::from(percent) * u64::from(devcore) / 100;
    Ok(floor.clamp(1, u64::from(devcore)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_numbers_for_mi300x() {
        assert_eq!(cu_count_from_percent(25, 304), Ok(76));
        assert_eq!(cu_count_from_percent(33, 304), Ok(100));
        assert_eq!(cu_count_from_percent(67, 304), Ok(203));
        assert_eq!(cu_count_from_percent(100, 304), Ok(304));
        assert_eq!(cu_count_from_percent(1, 304), Ok(3));
    }

    #[test]
    fn clamps_to_at_least_one_cu() {
        assert_eq!(cu_count_from_percent(1, 60), Ok(1));
        assert_eq!(cu_count_from_percent(100, 1), Ok(1));
        assert_eq!(cu_count_from_percent(100, u32::MAX), Ok(u32::MAX));
    }

    #[test]
    fn rejects_out_of_range() {
        assert_eq!(
            cu_count_from_percent(0, 304),
            Err(PercentError::OutOfRange { percent: 0 })
        );
        assert_eq!(
            cu_count_from_percent(101, 304),
            Err(PercentError::OutOfRange { percent: 101 })
        );
        assert_eq!(cu_count_from_percent(50, 0), Err(PercentError::NoCus));
    }
}
