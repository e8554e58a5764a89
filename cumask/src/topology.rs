//! Which CU sets a device can really run, per architecture, and how counts are rounded.
//!
//! Three layouts cover the ROCm devices:
//!
//! * [`Layout::Interleaved`], multi-XCD CDNA3/CDNA4 (gfx940/941/942, gfx950; MI300X/MI325X
//!   have 8 XCDs × 38 CUs = 304). The kernel hands mask bit `i` to XCD `i % xcds`, and an
//!   XCD that receives no bit runs **unmasked**: `0:0-3` on MI300X reaches 156 CUs, not 4.
//!   A set is safe only if every XCD gets at least one bit.
//! * [`Layout::WorkGroupProcessors`], RDNA (gfx10, gfx11, gfx12): CUs `2n` and `2n+1` form
//!   WGP `n`. Enabling one CU of a pair is invalid and has been seen to fail open.
//! * [`Layout::Independent`], single-XCD CDNA and GCN (gfx900 … gfx90a): any non-empty set.
//!
//! ## Rounding ([`Topology::round_count`])
//!
//! The scheduler books a CU count and the device plugin later picks the CUs; both call
//! `round_count` so they agree on the number.
//!
//! * RDNA rounds **up** to whole WGPs (the published `cuPerWGP` is 2): a half WGP cannot
//!   be enabled, and rounding up adds at most one CU.
//! * Multi-XCD parts round **down** to a multiple of the XCD count, and never below it
//!   (one CU per XCD). Why multiples: a contiguous range of `8k` CUs gives every XCD
//!   exactly `k`, while 76 CUs give four XCDs 10 and four 9. The hardware spreads
//!   workgroups evenly over XCDs, so the slice runs at the pace of its smallest XCD share
//!   and the 4 extra CUs buy almost nothing, while no other tenant can use them. Why
//!   down: rounding 25 % (76 CUs) up to 80 would make four 25 % tenants need 320 of 304
//!   CUs; rounding down keeps any set of requests summing to at most 100 % placeable
//!   (apart from the one-per-XCD floor). 304 CUs: 25 % → 72, 33 % → 96, 67 % → 200.
//! * Independent devices take the count as it is.

use core::fmt;

use crate::set::{CuSet, CAPACITY};
use crate::text::Fragment;

/// How a device's CU ids map onto hardware, as far as masking is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// Every CU is masked on its own (gfx908, gfx90a, other single-XCD gfx9).
    Independent,
    /// RDNA: CUs `2n` and `2n+1` form one WGP and must be enabled together.
    WorkGroupProcessors,
    /// Multi-XCD: mask bit `i` lands on XCD `i % xcds`; every XCD needs a bit.
    Interleaved {
        /// Number of XCDs in the device (or partition).
        xcds: u8,
    },
}

/// One device's CU layout and CU count.
///
/// ```
/// use cumask::{CuSet, Topology};
/// let mi300x = Topology::from_target("gfx942:sramecc+:xnack-", 304).unwrap();
/// assert_eq!(mi300x.xcd_count(), 8);
/// assert!(mi300x.validate(&CuSet::range(0, 8)).is_ok());
/// assert_eq!(
///     mi300x.validate(&CuSet::range(0, 4)).unwrap_err().to_string(),
///     "XCD 4 of 8 gets no CU from the mask and would run unmasked"
/// );
/// assert_eq!(mi300x.round_count(76), Ok(72));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Topology {
    layout: Layout,
    cu_count: u16,
}

/// A topology that cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopologyError {
    /// The gfx target is not one this crate knows; guessing could fail open.
    UnknownTarget {
        /// The target as given.
        target: Fragment,
    },
    /// A device with no CUs.
    NoCus,
    /// More CUs than [`CAPACITY`].
    TooManyCus {
        /// The count given.
        cu_count: u32,
    },
    /// An RDNA device must have whole WGPs.
    OddCuCount {
        /// The count given.
        cu_count: u32,
    },
    /// A multi-XCD target whose CU count matches no known XCD configuration.
    UnknownXcdLayout {
        /// The target as given.
        target: Fragment,
        /// The count given.
        cu_count: u32,
        /// CUs per XCD on this architecture.
        cus_per_xcd: u32,
    },
    /// An XCD count of 0, above 64, or above the CU count.
    BadXcdCount {
        /// The XCD count given.
        xcds: u32,
        /// The CU count given.
        cu_count: u32,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TopologyError::UnknownTarget { target } => write!(
                f,
                "unknown GPU target {target}: expected gfx9 (gfx900-gfx90c), multi-XCD (gfx940/941/942/950) or RDNA (gfx10xx/gfx11xx/gfx12xx)"
            ),
            TopologyError::NoCus => f.write_str("a device with 0 CUs cannot be masked"),
            TopologyError::TooManyCus { cu_count } => {
                write!(f, "{cu_count} CUs is more than the supported {CAPACITY}")
            }
            TopologyError::OddCuCount { cu_count } => {
                write!(f, "{cu_count} CUs on an RDNA device is not a whole number of 2-CU WGPs")
            }
            TopologyError::UnknownXcdLayout { target, cu_count, cus_per_xcd } => write!(
                f,
                "{target} with {cu_count} CUs is not 1-8 XCDs of {cus_per_xcd} CUs; build it with Topology::new(Layout::Interleaved {{ xcds }}, {cu_count})"
            ),
            TopologyError::BadXcdCount { xcds, cu_count } => {
                write!(f, "{xcds} XCDs is not possible with {cu_count} CUs (1-64 XCDs, at most one per CU)")
            }
        }
    }
}

/// Why a CU set is not safe on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidSet {
    /// No CU at all: ROCr rejects it and runs unmasked.
    Empty,
    /// A CU id the device does not have.
    PastDevice {
        /// The first such id.
        cu: u16,
        /// The device's CU count.
        cu_count: u32,
    },
    /// RDNA: one CU of a WGP enabled without its partner.
    SplitWgp {
        /// The WGP index.
        wgp: u16,
        /// The enabled CU.
        enabled: u16,
        /// Its partner, not enabled.
        disabled: u16,
    },
    /// Multi-XCD: an XCD that receives no bit and would run unmasked.
    XcdUncovered {
        /// The first such XCD.
        xcd: u32,
        /// How many XCDs the device has.
        xcds: u32,
    },
}

impl fmt::Display for InvalidSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            InvalidSet::Empty => f.write_str("the set enables no CU; ROCr would run unmasked"),
            InvalidSet::PastDevice { cu, cu_count } => {
                write!(f, "CU {cu} is past the device's {cu_count} CUs")
            }
            InvalidSet::SplitWgp { wgp, enabled, disabled } => write!(
                f,
                "WGP {wgp} is split: CU {enabled} is enabled but CU {disabled} is not (RDNA enables CUs in pairs)"
            ),
            InvalidSet::XcdUncovered { xcd, xcds } => {
                write!(f, "XCD {xcd} of {xcds} gets no CU from the mask and would run unmasked")
            }
        }
    }
}

/// A CU count that cannot be rounded for a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountError {
    /// A request for no CUs.
    Zero,
    /// More CUs than the device has.
    PastDevice {
        /// The count asked for.
        count: u32,
        /// The device's CU count.
        cu_count: u32,
    },
}

impl fmt::Display for CountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CountError::Zero => f.write_str("a request for 0 CUs"),
            CountError::PastDevice { count, cu_count } => {
                write!(f, "{count} CUs requested but the device has {cu_count}")
            }
        }
    }
}

/// Multi-XCD targets and their CUs per XCD (MI300X 38, MI355X 32).
const INTERLEAVED_TARGETS: [(&str, u32); 4] = [
    ("gfx940", 38),
    ("gfx941", 38),
    ("gfx942", 38),
    ("gfx950", 32),
];

/// Single-XCD gfx9 targets: one XCD, so no interleaving, and no WGPs.
const INDEPENDENT_TARGETS: [&str; 8] = [
    "gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c",
];

impl Topology {
    /// A topology from its layout and CU count.
    pub fn new(layout: Layout, cu_count: u32) -> Result<Self, TopologyError> {
        if cu_count == 0 {
            return Err(TopologyError::NoCus);
        }
        if cu_count > CAPACITY as u32 {
            return Err(TopologyError::TooManyCus { cu_count });
        }
        match layout {
            Layout::WorkGroupProcessors if cu_count % 2 != 0 => {
                return Err(TopologyError::OddCuCount { cu_count });
            }
            Layout::Interleaved { xcds }
                if xcds == 0 || xcds > 64 || u32::from(xcds) > cu_count =>
            {
                return Err(TopologyError::BadXcdCount {
                    xcds: u32::from(xcds),
                    cu_count,
                });
            }
            _ => {}
        }
        Ok(Topology {
            layout,
            cu_count: cu_count as u16,
        })
    }

    /// A topology from a gfx target name as HIP reports it (`gcnArchName`), feature
    /// suffixes allowed (`gfx942:sramecc+:xnack-`), and the CU count.
    ///
    /// Unknown targets are an error rather than a guess: treating a multi-XCD part as
    /// independent CUs would emit masks that leave XCDs unmasked. For multi-XCD targets the
    /// XCD count is derived from the CU count (304 on gfx942 is 8 XCDs, 228 (MI300A) 6,
    /// a CPX partition's 38 is 1); other counts are an error naming [`Topology::new`].
    ///
    /// ```
    /// use cumask::{Layout, Topology};
    /// assert_eq!(Topology::from_target("gfx1100", 96).unwrap().layout(), Layout::WorkGroupProcessors);
    /// assert_eq!(Topology::from_target("gfx90a", 104).unwrap().layout(), Layout::Independent);
    /// assert_eq!(Topology::from_target("gfx942", 38).unwrap().xcd_count(), 1);
    /// assert!(Topology::from_target("gfx9999", 64).is_err());
    /// ```
    pub fn from_target(target: &str, cu_count: u32) -> Result<Self, TopologyError> {
        let unknown = || TopologyError::UnknownTarget {
            target: Fragment::new(target),
        };
        let full = target.trim();
        let full = full.strip_prefix("amdgcn-amd-amdhsa--").unwrap_or(full);
        let name = full.split(':').next().unwrap_or("");
        if let Some(&(_, per_xcd)) = INTERLEAVED_TARGETS
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            if cu_count == 0 {
                return Err(TopologyError::NoCus);
            }
            let xcds = cu_count / per_xcd;
            if cu_count % per_xcd != 0 || !(1..=8).contains(&xcds) {
                return Err(TopologyError::UnknownXcdLayout {
                    target: Fragment::new(target),
                    cu_count,
                    cus_per_xcd: per_xcd,
                });
            }
            return Topology::new(Layout::Interleaved { xcds: xcds as u8 }, cu_count);
        }
        if INDEPENDENT_TARGETS
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name))
        {
            return Topology::new(Layout::Independent, cu_count);
        }
        if is_rdna(name) {
            return Topology::new(Layout::WorkGroupProcessors, cu_count);
        }
        Err(unknown())
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Number of CUs (valid ids are `0..cu_count`).
    pub fn cu_count(&self) -> u32 {
        u32::from(self.cu_count)
    }

    /// CUs that must be enabled together: 2 on RDNA (the plugin's `cuPerWGP`), else 1.
    pub fn cu_per_wgp(&self) -> u32 {
        match self.layout {
            Layout::WorkGroupProcessors => 2,
            _ => 1,
        }
    }

    /// Number of XCDs mask bits are spread over (1 unless [`Layout::Interleaved`]).
    pub fn xcd_count(&self) -> u32 {
        match self.layout {
            Layout::Interleaved { xcds } => u32::from(xcds),
            _ => 1,
        }
    }

    /// The XCD that mask bit `cu` lands on.
    pub fn xcd_of(&self, cu: u16) -> u32 {
        u32::from(cu) % self.xcd_count()
    }

    /// Every CU of the device.
    pub fn all(&self) -> CuSet {
        CuSet::range(0, self.cu_count)
    }

    /// Checks that `set` is non-empty, within the device, and safe on this layout: no split
    /// WGP on RDNA, every XCD covered on multi-XCD parts. The first problem (lowest id) is
    /// reported.
    pub fn validate(&self, set: &CuSet) -> Result<(), InvalidSet> {
        let Some(last) = set.last() else {
            return Err(InvalidSet::Empty);
        };
        if u32::from(last) >= self.cu_count() {
            let cu = set.next_set(usize::from(self.cu_count)).unwrap_or(last);
            return Err(InvalidSet::PastDevice {
                cu,
                cu_count: self.cu_count(),
            });
        }
        match self.layout {
            Layout::Independent => Ok(()),
            Layout::WorkGroupProcessors => {
                const EVEN_BITS: u64 = 0x5555_5555_5555_5555;
                for (index, &word) in set.words().iter().enumerate() {
                    let split = (word ^ (word >> 1)) & EVEN_BITS;
                    if split != 0 {
                        let low = (index * 64) as u16 + split.trailing_zeros() as u16;
                        let (enabled, disabled) = if set.contains(low) {
                            (low, low + 1)
                        } else {
                            (low + 1, low)
                        };
                        return Err(InvalidSet::SplitWgp {
                            wgp: low / 2,
                            enabled,
                            disabled,
                        });
                    }
                }
                Ok(())
            }
            Layout::Interleaved { xcds } => {
                let xcds = u32::from(xcds);
                let mut covered: u64 = 0;
                let full = if xcds == 64 {
                    u64::MAX
                } else {
                    (1u64 << xcds) - 1
                };
                for cu in set.iter() {
                    covered |= 1 << self.xcd_of(cu);
                    if covered == full {
                        return Ok(());
                    }
                }
                let xcd = (!covered).trailing_zeros();
                Err(InvalidSet::XcdUncovered { xcd, xcds })
            }
        }
    }

    /// The CU count a request for `count` CUs really gets on this device; see the module
    /// docs for the rule and why. Idempotent, and never above the device's CU count.
    pub fn round_count(&self, count: u32) -> Result<u32, CountError> {
        if count == 0 {
            return Err(CountError::Zero);
        }
        if count > self.cu_count() {
            return Err(CountError::PastDevice {
                count,
                cu_count: self.cu_count(),
            });
        }
        Ok(match self.layout {
            Layout::Independent => count,
            // cu_count is even, so rounding up stays within the device.
            Layout::WorkGroupProcessors => count + count % 2,
            Layout::Interleaved { xcds } => {
                let xcds = u32::from(xcds);
                (count - count % xcds).max(xcds)
            }
        })
    }
}

/// `gfx10xx`, `gfx11xx`, `gfx12xx` with two lowercase hex-ish characters (gfx1030, gfx110c).
fn is_rdna(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() == 7
        && name[..3].eq_ignore_ascii_case("gfx")
        && matches!(&name[3..5], "10" | "11" | "12")
        && bytes[5..].iter().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    fn mi300x() -> Topology {
        Topology::from_target("gfx942", 304).unwrap()
    }

    #[test]
    fn targets_map_to_layouts() {
        assert_eq!(mi300x().layout(), Layout::Interleaved { xcds: 8 });
        assert_eq!(
            Topology::from_target("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", 228)
                .unwrap()
                .xcd_count(),
            6
        );
        assert_eq!(Topology::from_target("gfx950", 256).unwrap().xcd_count(), 8);
        assert_eq!(
            Topology::from_target("gfx908", 120).unwrap().layout(),
            Layout::Independent
        );
        for rdna in ["gfx1030", "gfx1100", "gfx1151", "gfx1201"] {
            let topo = Topology::from_target(rdna, 64).unwrap();
            assert_eq!(topo.layout(), Layout::WorkGroupProcessors, "{rdna}");
            assert_eq!(topo.cu_per_wgp(), 2);
        }
    }

    #[test]
    fn unknown_targets_and_counts_are_errors() {
        assert!(matches!(
            Topology::from_target("gfx960", 64),
            Err(TopologyError::UnknownTarget { .. })
        ));
        assert!(matches!(
            Topology::from_target("sm_90", 132),
            Err(TopologyError::UnknownTarget { .. })
        ));
        assert!(matches!(
            Topology::from_target("", 132),
            Err(TopologyError::UnknownTarget { .. })
        ));
        assert!(matches!(
            Topology::from_target("gfx942", 300),
            Err(TopologyError::UnknownXcdLayout { .. })
        ));
        assert_eq!(
            Topology::from_target("gfx1100", 95),
            Err(TopologyError::OddCuCount { cu_count: 95 })
        );
        assert_eq!(
            Topology::from_target("gfx90a", 0),
            Err(TopologyError::NoCus)
        );
        assert_eq!(
            Topology::from_target("gfx90a", 1025),
            Err(TopologyError::TooManyCus { cu_count: 1025 })
        );
        assert_eq!(
            Topology::new(Layout::Interleaved { xcds: 9 }, 8),
            Err(TopologyError::BadXcdCount {
                xcds: 9,
                cu_count: 8
            })
        );
        let err = Topology::from_target("gfx9999:xnack-", 64).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unknown GPU target \"gfx9999:xnack-\""),
            "{err}"
        );
    }

    #[test]
    fn gfx942_needs_every_xcd_covered() {
        let topo = mi300x();
        assert_eq!(
            topo.validate(&CuSet::range(0, 4)),
            Err(InvalidSet::XcdUncovered { xcd: 4, xcds: 8 })
        );
        assert_eq!(topo.validate(&CuSet::range(0, 8)), Ok(()));
        assert_eq!(topo.validate(&CuSet::range(100, 108)), Ok(()));
        // Eight CUs that all sit on XCD 0.
        let same_xcd: CuSet = (0..8).map(|i| i * 8).collect();
        assert_eq!(
            topo.validate(&same_xcd),
            Err(InvalidSet::XcdUncovered { xcd: 1, xcds: 8 })
        );
        assert_eq!(topo.validate(&CuSet::new()), Err(InvalidSet::Empty));
        assert_eq!(
            topo.validate(&CuSet::range(300, 310)),
            Err(InvalidSet::PastDevice {
                cu: 304,
                cu_count: 304
            })
        );
    }

    #[test]
    fn rdna_rejects_split_wgps() {
        let topo = Topology::from_target("gfx1100", 96).unwrap();
        assert_eq!(topo.validate(&CuSet::range(0, 4)), Ok(()));
        assert_eq!(
            topo.validate(&CuSet::range(0, 3)),
            Err(InvalidSet::SplitWgp {
                wgp: 1,
                enabled: 2,
                disabled: 3
            })
        );
        assert_eq!(
            topo.validate(&CuSet::range(65, 67)),
            Err(InvalidSet::SplitWgp {
                wgp: 32,
                enabled: 65,
                disabled: 64
            })
        );
        let err = topo.validate(&CuSet::range(1, 2)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "WGP 0 is split: CU 1 is enabled but CU 0 is not (RDNA enables CUs in pairs)"
        );
    }

    #[test]
    fn round_count_per_layout() {
        let topo = mi300x();
        assert_eq!(topo.round_count(76), Ok(72));
        assert_eq!(topo.round_count(100), Ok(96));
        assert_eq!(topo.round_count(203), Ok(200));
        assert_eq!(topo.round_count(304), Ok(304));
        assert_eq!(topo.round_count(3), Ok(8));
        assert_eq!(topo.round_count(0), Err(CountError::Zero));
        assert_eq!(
            topo.round_count(305),
            Err(CountError::PastDevice {
                count: 305,
                cu_count: 304
            })
        );
        let rdna = Topology::from_target("gfx1100", 96).unwrap();
        assert_eq!(rdna.round_count(15), Ok(16));
        assert_eq!(rdna.round_count(95), Ok(96));
        assert_eq!(rdna.round_count(16), Ok(16));
        let plain = Topology::from_target("gfx90a", 104).unwrap();
        assert_eq!(plain.round_count(13), Ok(13));
    }

    #[test]
    fn round_count_is_idempotent_and_within_device() {
        for topo in [
            mi300x(),
            Topology::from_target("gfx1100", 96).unwrap(),
            Topology::from_target("gfx90a", 104).unwrap(),
        ] {
            for count in 1..=topo.cu_count() {
                let rounded = topo.round_count(count).unwrap();
                assert!(rounded <= topo.cu_count());
                assert_eq!(topo.round_count(rounded), Ok(rounded));
                assert_eq!(rounded % topo.cu_per_wgp(), 0);
            }
        }
    }
}
