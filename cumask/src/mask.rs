//! Whole `HSA_CU_MASK` values (`GPU_list:CU_list[;...]`) and `ROC_GLOBAL_CU_MASK` (hex).
//!
//! `HSA_CU_MASK` grammar (ROCr `Flag::parse_masks`):
//!
//! ```text
//! GPU_list    = ID_list                  ex. 0,2-4,7
//! CU_Set      = GPU_list : CU_list       ex. 0,2-4,7:0-15,32-47 OR 3-9:0x337F
//! HSA_CU_MASK = CU_Set [; CU_Set]*
//! ```
//!
//! GPU indices count GPUs after `ROCR_VISIBLE_DEVICES` reordering. ROCr stops at the first
//! set with an error, silently, and leaves that GPU and every later one unmasked; a GPU
//! named in two sets is such an error. Here any error rejects the whole value.

use core::fmt;

use crate::list::{IdKind, ParseError, ParseErrorKind, Parser, Subject};
use crate::set::{CuSet, CAPACITY};
use crate::text::{format_into, BufferTooSmall};

/// How many GPUs one [`HsaCuMask`] can describe (indices `0..MAX_GPUS`).
pub const MAX_GPUS: usize = 64;

/// A parsed or built `HSA_CU_MASK`: for each GPU index, the CUs it may use.
///
/// Fixed capacity ([`MAX_GPUS`] GPUs), no allocation. GPUs without an entry are unmasked.
/// [`Display`](fmt::Display) is canonical: one set per GPU in ascending GPU order, each CU
/// list canonical, e.g. `0:0-75;1:0-75`. An entry is never empty (ROCr rejects `0x0`).
///
/// ```
/// use cumask::{CuSet, HsaCuMask};
/// let mask = HsaCuMask::parse("0,1:0-75 ; 3:0xff").unwrap();
/// assert_eq!(mask.get(1), Some(&CuSet::range(0, 76)));
/// assert_eq!(mask.get(2), None);
/// assert_eq!(mask.to_string(), "0:0-75;1:0-75;3:0-7");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HsaCuMask {
    present: u64,
    sets: [CuSet; MAX_GPUS],
}

/// A GPU index or CU set that [`HsaCuMask::set`] cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskEntryError {
    /// GPU index at or past [`MAX_GPUS`].
    GpuPastCapacity {
        /// The index.
        gpu: usize,
    },
    /// An empty CU set: ROCr rejects a mask with no CU and runs the GPU unmasked.
    EmptySet {
        /// The GPU index.
        gpu: usize,
    },
}

impl fmt::Display for MaskEntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MaskEntryError::GpuPastCapacity { gpu } => {
                write!(f, "GPU index {gpu} is past the supported {MAX_GPUS} GPUs")
            }
            MaskEntryError::EmptySet { gpu } => {
                write!(f, "GPU {gpu}: an empty CU set would leave the GPU unmasked")
            }
        }
    }
}

impl Default for HsaCuMask {
    fn default() -> Self {
        HsaCuMask::new()
    }
}

impl HsaCuMask {
    /// No GPU masked.
    pub const fn new() -> Self {
        HsaCuMask {
            present: 0,
            sets: [CuSet::new(); MAX_GPUS],
        }
    }

    /// Parses a whole `HSA_CU_MASK` with the crate's limits: GPU indices below [`MAX_GPUS`],
    /// CU ids below [`CAPACITY`]. Use [`parse_for`](Self::parse_for) to hold ids to the
    /// real device counts.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        HsaCuMask::parse_for(text, MAX_GPUS as u32, CAPACITY as u32)
    }

    /// Parses a whole `HSA_CU_MASK` for `gpu_count` GPUs of at most `cu_count` CUs each.
    ///
    /// The empty string is an error here (ROCr would run every GPU unmasked).
    ///
    /// ```
    /// use cumask::HsaCuMask;
    /// let err = HsaCuMask::parse_for("0:0-3;1:0-3", 1, 304).unwrap_err();
    /// assert_eq!(err.offset, 6);
    /// assert_eq!(
    ///     err.to_string(),
    ///     "HSA_CU_MASK: at byte 6 (\"1\"): GPU 1 does not exist: there are 1 GPUs (ids 0-0)"
    /// );
    /// ```
    pub fn parse_for(text: &str, gpu_count: u32, cu_count: u32) -> Result<Self, ParseError> {
        let parser = Parser {
            text,
            subject: Subject::HsaCuMask,
        };
        let gpu_limit = gpu_count.min(MAX_GPUS as u32);
        let mut mask = HsaCuMask::new();
        if parser.significant(0..text.len()).next().is_none() {
            return Err(parser.error(0..text.len(), ParseErrorKind::Empty));
        }
        for set_span in parser.split(0..text.len(), b';') {
            if parser.significant(set_span.clone()).next().is_none() {
                let around = set_span.start.saturating_sub(1)..(set_span.end + 1).min(text.len());
                return Err(parser.error(around, ParseErrorKind::EmptyItem));
            }
            let mut parts = parser.split(set_span.clone(), b':');
            let gpu_span = parts.next().unwrap_or(set_span.clone());
            let Some(cu_span) = parts.next() else {
                return Err(parser.error(set_span, ParseErrorKind::MissingColon));
            };
            if let Some(extra) = parts.next() {
                let colon = extra.start - 1;
                return Err(parser.error(colon..set_span.end, ParseErrorKind::ExtraColon));
            }
            let mut gpus = CuSet::new();
            parser.id_list(gpu_span.clone(), gpu_limit, IdKind::Gpu, &mut gpus)?;
            let cus = parser.cu_list(cu_span, cu_count)?;
            for gpu in gpus.iter() {
                let gpu = usize::from(gpu);
                if mask.present & (1 << gpu) != 0 {
                    let kind = ParseErrorKind::GpuInTwoSets { gpu: gpu as u32 };
                    return Err(parser.error(gpu_span, kind));
                }
                mask.present |= 1 << gpu;
                mask.sets[gpu] = cus;
            }
        }
        Ok(mask)
    }

    /// Sets GPU `gpu`'s CUs, replacing any earlier entry.
    pub fn set(&mut self, gpu: usize, cus: CuSet) -> Result<(), MaskEntryError> {
        if gpu >= MAX_GPUS {
            return Err(MaskEntryError::GpuPastCapacity { gpu });
        }
        if cus.is_empty() {
            return Err(MaskEntryError::EmptySet { gpu });
        }
        self.present |= 1 << gpu;
        self.sets[gpu] = cus;
        Ok(())
    }

    /// GPU `gpu`'s CUs, or `None` if it is unmasked.
    pub fn get(&self, gpu: usize) -> Option<&CuSet> {
        (gpu < MAX_GPUS && self.present & (1 << gpu) != 0).then(|| &self.sets[gpu])
    }

    /// Drops GPU `gpu`'s entry; returns it.
    pub fn remove(&mut self, gpu: usize) -> Option<CuSet> {
        let old = self.get(gpu).copied();
        if old.is_some() {
            self.present &= !(1 << gpu);
            self.sets[gpu] = CuSet::new();
        }
        old
    }

    /// Number of masked GPUs.
    pub fn len(&self) -> usize {
        self.present.count_ones() as usize
    }

    /// Whether no GPU is masked (formats as the empty string).
    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    /// `(gpu, cus)` for every masked GPU, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &CuSet)> + '_ {
        (0..MAX_GPUS).filter_map(move |gpu| self.get(gpu).map(|set| (gpu, set)))
    }

    /// Writes the canonical form into any [`fmt::Write`].
    pub fn write_to(&self, out: &mut dyn fmt::Write) -> fmt::Result {
        write!(out, "{self}")
    }

    /// Writes the canonical form into `buf`; see [`format_into`].
    pub fn format_into<'b>(&self, buf: &'b mut [u8]) -> Result<&'b str, BufferTooSmall> {
        format_into(self, buf)
    }
}

impl fmt::Display for HsaCuMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (gpu, cus)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            write!(f, "{gpu}:{cus}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for HsaCuMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HsaCuMask({self})")
    }
}

impl core::str::FromStr for HsaCuMask {
    type Err = ParseError;
    fn from_str(text: &str) -> Result<Self, ParseError> {
        HsaCuMask::parse(text)
    }
}

/// Parses `ROC_GLOBAL_CU_MASK` (the HIP runtime's hex mask, applied to every queue HIP
/// creates) for a device with `cu_count` CUs.
///
/// HIP (CLR `Device::getGlobalCUMask`) takes an optional `0x`/`0X` prefix and hex digits,
/// with no whitespace. It reads only the lowest `cu_count / 4` digits and drops anything
/// above without a word, and it runs unmasked when the result is zero or not hex. So here
/// a bit at or past `4 * (cu_count / 4)` is an error, as is an empty, zero or non-hex mask.
/// Format with [`CuSet::hex`].
///
/// ```
/// use cumask::{parse_roc_global_cu_mask, CuSet};
/// let set = parse_roc_global_cu_mask("0xff", 304).unwrap();
/// assert_eq!(set, CuSet::range(0, 8));
/// assert_eq!(set.hex().to_string(), "0xff");
/// assert!(parse_roc_global_cu_mask("0x0", 304).is_err());
/// ```
pub fn parse_roc_global_cu_mask(text: &str, cu_count: u32) -> Result<CuSet, ParseError> {
    let parser = Parser {
        text,
        subject: Subject::RocGlobalCuMask,
    };
    let bytes = text.as_bytes();
    let digits_start =
        if bytes.len() >= 2 && bytes[0] == b'0' && bytes[1].eq_ignore_ascii_case(&b'x') {
            2
        } else {
            0
        };
    let limit = (cu_count.min(CAPACITY as u32) / 4) * 4;
    parser.hex_digits(digits_start..text.len(), 0..text.len(), limit, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn seed_example_round_trips() {
        let mask = HsaCuMask::parse("0:0-75;1:0-75").unwrap();
        assert_eq!(mask.len(), 2);
        assert_eq!(mask.get(0), Some(&CuSet::range(0, 76)));
        assert_eq!(mask.to_string(), "0:0-75;1:0-75");
    }

    #[test]
    fn gpu_lists_share_one_cu_list() {
        let mask = HsaCuMask::parse("0,2-4,7:0-15,32-47; 5-6:0x337F").unwrap();
        assert_eq!(mask.len(), 7);
        assert_eq!(mask.get(4).unwrap().to_string(), "0-15,32-47");
        assert_eq!(mask.get(6).unwrap().to_string(), "0-6,8-9,12-13");
        assert_eq!(mask.get(1), None);
    }

    #[test]
    fn rejects_broken_sets_with_offsets() {
        let cases: [(&str, usize, ParseErrorKind); 8] = [
            ("", 0, ParseErrorKind::Empty),
            ("0:0-3;", 5, ParseErrorKind::EmptyItem),
            ("0:0-3;;1:0", 5, ParseErrorKind::EmptyItem),
            ("0-3", 0, ParseErrorKind::MissingColon),
            ("0:1:2", 3, ParseErrorKind::ExtraColon),
            ("0:0-3;0:4-7", 6, ParseErrorKind::GpuInTwoSets { gpu: 0 }),
            (
                "0,0:0-3",
                2,
                ParseErrorKind::Repeated {
                    kind: IdKind::Gpu,
                    id: 0,
                },
            ),
            (
                "64:0-3",
                0,
                ParseErrorKind::PastLimit {
                    kind: IdKind::Gpu,
                    id: 64,
                    limit: 64,
                },
            ),
        ];
        for (text, offset, kind) in cases {
            let err = HsaCuMask::parse(text).unwrap_err();
            assert_eq!((err.offset, err.kind), (offset, kind), "input {text:?}");
            assert_eq!(err.subject, Subject::HsaCuMask);
        }
        let err = HsaCuMask::parse_for("0:0-3;1:0x0", 2, 304).unwrap_err();
        assert_eq!((err.offset, err.kind), (8, ParseErrorKind::ZeroMask));
        let err = HsaCuMask::parse_for("0:0-304", 1, 304).unwrap_err();
        assert_eq!(err.to_string(), "HSA_CU_MASK: at byte 2 (\"0-304\"): CU 304 does not exist: there are 304 CUs (ids 0-303)");
    }

    #[test]
    fn set_refuses_empty_and_out_of_range() {
        let mut mask = HsaCuMask::new();
        assert_eq!(
            mask.set(0, CuSet::new()),
            Err(MaskEntryError::EmptySet { gpu: 0 })
        );
        assert_eq!(
            mask.set(64, CuSet::range(0, 1)),
            Err(MaskEntryError::GpuPastCapacity { gpu: 64 })
        );
        mask.set(63, CuSet::range(0, 1)).unwrap();
        assert_eq!(mask.to_string(), "63:0");
        assert_eq!(mask.remove(63), Some(CuSet::range(0, 1)));
        assert!(mask.is_empty());
        assert_eq!(mask.to_string(), "");
    }

    #[test]
    fn global_mask_follows_hip_digit_limit() {
        assert_eq!(
            parse_roc_global_cu_mask("F", 304).unwrap(),
            CuSet::range(0, 4)
        );
        assert_eq!(
            parse_roc_global_cu_mask("0X0f0", 304).unwrap(),
            CuSet::range(4, 8)
        );
        // 38 CUs: HIP reads 9 digits (36 bits); bits 36 and 37 would be dropped silently.
        let err = parse_roc_global_cu_mask("0x1000000000", 38).unwrap_err();
        assert_eq!(
            err.kind,
            ParseErrorKind::HexBitPastLimit { bit: 36, limit: 36 }
        );
        assert_eq!(
            parse_roc_global_cu_mask("0x", 304).unwrap_err().kind,
            ParseErrorKind::EmptyHex
        );
        assert_eq!(
            parse_roc_global_cu_mask("0x00", 304).unwrap_err().kind,
            ParseErrorKind::ZeroMask
        );
        let err = parse_roc_global_cu_mask("0x f", 304).unwrap_err();
        assert_eq!((err.offset, err.kind), (2, ParseErrorKind::BadHexDigit));
        assert_eq!(err.subject, Subject::RocGlobalCuMask);
    }

    #[test]
    fn format_into_buffer_reports_needed_length() {
        let mut mask = HsaCuMask::new();
        mask.set(0, CuSet::range(0, 76)).unwrap();
        mask.set(1, CuSet::range(76, 152)).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(mask.format_into(&mut buf), Ok("0:0-75;1:76-151"));
        let mut small = [0u8; 5];
        assert_eq!(
            mask.format_into(&mut small),
            Err(BufferTooSmall { needed: 15 })
        );
    }
}
