//! ROCr's CU list grammar (`0-3,8,10-12` or `0x1f0f`) and the errors of every parser here.
//!
//! The grammar, from ROCr's `Flag::parse_masks` (ROCR-Runtime `src/core/util/flag.cpp`):
//!
//! ```text
//! ID       = [0-9]+                      base 10
//! ID_list  = (ID | ID-ID) [, (ID | ID-ID)]*
//! CU_list  = 0x[0-9A-Fa-f]+ | ID_list    a hex mask OR ids, never both
//! ```
//!
//! ROCr deletes all whitespace before parsing (so `1 2` means `12`) and ignores case; this
//! parser does the same. Where ROCr is lax, this parser is strict, so that every string it
//! accepts means the same to ROCr, and a string ROCr would reject, or quietly reinterpret,
//! is an error here that names the byte offset and the text:
//!
//! | input | ROCr | here |
//! |---|---|---|
//! | repeated id, overlapping ranges (`0-3,2`) | error, runs **unmasked** | error |
//! | `0x0`, `0x` | error, runs unmasked | error |
//! | descending range `5-3` | error | error |
//! | id past the device (`400` on 304 CUs) | silently dropped | error |
//! | empty item (`0,,1`, `0-3,`), `0-` | undefined behaviour or accepted as something else | error |
//! | `+5`, `-5` (strtoul signs) | accepted | error |
//! | hex bits past the device | silently dropped | error |

use core::fmt;

use crate::set::{CuSet, CAPACITY};
use crate::text::Fragment;

/// Which input an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subject {
    /// A CU list on its own (`0-3,8`).
    CuList,
    /// A whole `HSA_CU_MASK` value.
    HsaCuMask,
    /// A `ROC_GLOBAL_CU_MASK` value.
    RocGlobalCuMask,
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Subject::CuList => "CU list",
            Subject::HsaCuMask => "HSA_CU_MASK",
            Subject::RocGlobalCuMask => "ROC_GLOBAL_CU_MASK",
        })
    }
}

/// Whether an id names a compute unit or a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdKind {
    /// A compute-unit id.
    Cu,
    /// A GPU index (after `ROCR_VISIBLE_DEVICES` reordering).
    Gpu,
}

impl fmt::Display for IdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IdKind::Cu => "CU",
            IdKind::Gpu => "GPU",
        })
    }
}

/// What is wrong; see [`ParseError`] for where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The input (or one list) has no content.
    Empty,
    /// Nothing between two separators, or a separator at an end.
    EmptyItem,
    /// An id is not a plain base-10 number.
    NotAnId,
    /// An id does not fit in 32 bits.
    IdTooLarge,
    /// More than one `-` in one item.
    TooManyDashes,
    /// `first-last` with `last < first`.
    DescendingRange {
        /// Range start.
        first: u32,
        /// Range end.
        last: u32,
    },
    /// An id at or past the number of CUs (or GPUs).
    PastLimit {
        /// CU or GPU.
        kind: IdKind,
        /// The id.
        id: u32,
        /// How many ids exist (valid ids are `0..limit`).
        limit: u32,
    },
    /// The same id listed twice (also through overlapping ranges).
    Repeated {
        /// CU or GPU.
        kind: IdKind,
        /// The first repeated id.
        id: u32,
    },
    /// `x` as the second character of a CU list, but the first is not `0`.
    BadHexPrefix,
    /// `0x` with no digits.
    EmptyHex,
    /// A character that is not a hex digit in a hex mask.
    BadHexDigit,
    /// A hex mask sets a bit at or past the number of CUs.
    HexBitPastLimit {
        /// The bit (CU id).
        bit: u32,
        /// How many bits the device takes.
        limit: u32,
    },
    /// A hex mask with no bit set: ROCr rejects `0x0` and then runs the GPU unmasked.
    ZeroMask,
    /// A `HSA_CU_MASK` set without `:` between GPU list and CU list.
    MissingColon,
    /// A `HSA_CU_MASK` set with more than one `:`.
    ExtraColon,
    /// A GPU listed in two `HSA_CU_MASK` sets.
    GpuInTwoSets {
        /// The GPU index.
        gpu: u32,
    },
}

impl fmt::Display for ParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ParseErrorKind::Empty => f.write_str("empty list: ROCr would leave the GPU unmasked"),
            ParseErrorKind::EmptyItem => f.write_str("empty item between separators"),
            ParseErrorKind::NotAnId => f.write_str("expected a base-10 id"),
            ParseErrorKind::IdTooLarge => f.write_str("id does not fit in 32 bits"),
            ParseErrorKind::TooManyDashes => f.write_str("an item is an id or one a-b range"),
            ParseErrorKind::DescendingRange { first, last } => {
                write!(f, "range {first}-{last} is descending")
            }
            ParseErrorKind::PastLimit { kind, id, limit } => {
                write!(
                    f,
                    "{kind} {id} does not exist: there are {limit} {kind}s (ids 0-{})",
                    limit.saturating_sub(1)
                )
            }
            ParseErrorKind::Repeated { kind, id } => {
                write!(
                    f,
                    "{kind} {id} is listed twice (ROCr rejects the whole mask)"
                )
            }
            ParseErrorKind::BadHexPrefix => f.write_str("a hex mask starts with 0x"),
            ParseErrorKind::EmptyHex => f.write_str("0x without hex digits"),
            ParseErrorKind::BadHexDigit => {
                f.write_str("not a hex digit (a hex mask cannot be combined with ids)")
            }
            ParseErrorKind::HexBitPastLimit { bit, limit } => {
                write!(
                    f,
                    "hex mask sets bit {bit}, but only bits 0-{} exist",
                    limit.saturating_sub(1)
                )
            }
            ParseErrorKind::ZeroMask => {
                f.write_str("mask enables no CU (ROCr rejects it and runs unmasked)")
            }
            ParseErrorKind::MissingColon => f.write_str("expected GPU_list:CU_list"),
            ParseErrorKind::ExtraColon => {
                f.write_str("more than one ':' in one GPU_list:CU_list set")
            }
            ParseErrorKind::GpuInTwoSets { gpu } => write!(f, "GPU {gpu} appears in two sets"),
        }
    }
}

/// A rejected CU list, `HSA_CU_MASK` or `ROC_GLOBAL_CU_MASK`: which input, the byte offset
/// into it, a copy of the offending text and what is wrong.
///
/// ```
/// let err = cumask::parse_cu_list("0-3,3", 304).unwrap_err();
/// assert_eq!(err.to_string(), "CU list: at byte 4 (\"3\"): CU 3 is listed twice (ROCr rejects the whole mask)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParseError {
    /// Which input.
    pub subject: Subject,
    /// Byte offset of the offending text in the input.
    pub offset: usize,
    /// The offending text (possibly shortened).
    pub fragment: Fragment,
    /// What is wrong.
    pub kind: ParseErrorKind,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: at byte {} ({}): {}",
            self.subject, self.offset, self.fragment, self.kind
        )
    }
}

/// Parses a CU list (`0-3,8,10-12` or `0xff`) for a device with `cu_count` CUs.
///
/// Every id must be below `cu_count` (and below [`CAPACITY`]). The result is never empty.
///
/// ```
/// use cumask::{parse_cu_list, CuSet};
/// assert_eq!(parse_cu_list("0-3, 8,10-12", 304).unwrap().to_string(), "0-3,8,10-12");
/// assert_eq!(parse_cu_list("0xF0", 304).unwrap(), CuSet::range(4, 8));
/// assert!(parse_cu_list("300-310", 304).is_err());
/// ```
pub fn parse_cu_list(text: &str, cu_count: u32) -> Result<CuSet, ParseError> {
    let parser = Parser {
        text,
        subject: Subject::CuList,
    };
    parser.cu_list(0..text.len(), cu_count)
}

impl core::str::FromStr for CuSet {
    type Err = ParseError;

    /// Parses a CU list with no device limit other than [`CAPACITY`].
    fn from_str(text: &str) -> Result<CuSet, ParseError> {
        parse_cu_list(text, CAPACITY as u32)
    }
}

/// ROCr's `isspace` in the C locale.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

type Span = core::ops::Range<usize>;

/// Parsing state shared by the CU-list, `HSA_CU_MASK` and `ROC_GLOBAL_CU_MASK` parsers:
/// the whole input, so that offsets are absolute.
pub(crate) struct Parser<'a> {
    pub(crate) text: &'a str,
    pub(crate) subject: Subject,
}

impl Parser<'_> {
    pub(crate) fn error(&self, span: Span, kind: ParseErrorKind) -> ParseError {
        let fragment = self.text.get(span.clone()).unwrap_or("");
        ParseError {
            subject: self.subject,
            offset: span.start,
            fragment: Fragment::new(fragment),
            kind,
        }
    }

    /// Offsets of the non-space bytes in `span`.
    pub(crate) fn significant(&self, span: Span) -> impl DoubleEndedIterator<Item = usize> + '_ {
        let bytes = self.text.as_bytes();
        span.filter(move |&i| !is_space(bytes[i]))
    }

    /// Sub-spans of `span` between `sep` bytes.
    pub(crate) fn split(&self, span: Span, sep: u8) -> impl Iterator<Item = Span> + '_ {
        let bytes = self.text.as_bytes();
        let end = span.end;
        let mut start = Some(span.start);
        core::iter::from_fn(move || {
            let from = start?;
            match (from..end).find(|&i| bytes[i] == sep) {
                Some(at) => {
                    start = Some(at + 1);
                    Some(from..at)
                }
                None => {
                    start = None;
                    Some(from..end)
                }
            }
        })
    }

    /// A CU list: a hex mask or an id list.
    pub(crate) fn cu_list(&self, span: Span, cu_count: u32) -> Result<CuSet, ParseError> {
        let limit = cu_count.min(CAPACITY as u32);
        let bytes = self.text.as_bytes();
        let mut first_two = self.significant(span.clone());
        let (first, second) = (first_two.next(), first_two.next());
        if let Some(x) = second.filter(|&i| bytes[i].eq_ignore_ascii_case(&b'x')) {
            let zero = first.unwrap_or(span.start);
            if bytes[zero] != b'0' {
                return Err(self.error(zero..x + 1, ParseErrorKind::BadHexPrefix));
            }
            return self.hex_digits(x + 1..span.end, span, limit, true);
        }
        let mut set = CuSet::new();
        self.id_list(span, limit, IdKind::Cu, &mut set)?;
        Ok(set)
    }

    /// An id list into `set`; every id below `limit` (`limit <= CAPACITY`).
    pub(crate) fn id_list(
        &self,
        span: Span,
        limit: u32,
        kind: IdKind,
        set: &mut CuSet,
    ) -> Result<(), ParseError> {
        if self.significant(span.clone()).next().is_none() {
            return Err(self.error(span, ParseErrorKind::Empty));
        }
        for item in self.split(span.clone(), b',') {
            if self.significant(item.clone()).next().is_none() {
                // Show the neighbourhood: an empty item has no text of its own.
                let around = item.start.saturating_sub(1)..(item.end + 1).min(span.end);
                return Err(self.error(around, ParseErrorKind::EmptyItem));
            }
            let mut parts = self.split(item.clone(), b'-');
            let first_part = parts.next().unwrap_or(item.clone());
            let last_part = parts.next();
            if parts.next().is_some() {
                return Err(self.error(item, ParseErrorKind::TooManyDashes));
            }
            let first = self.decimal(first_part.clone(), &item)?;
            let last = match last_part {
                Some(part) => self.decimal(part, &item)?,
                None => first,
            };
            if last < first {
                return Err(self.error(item, ParseErrorKind::DescendingRange { first, last }));
            }
            for id in [first, last] {
                if id >= limit {
                    return Err(self.error(item, ParseErrorKind::PastLimit { kind, id, limit }));
                }
            }
            let range = CuSet::range(first as u16, last as u16 + 1);
            if let Some(id) = range.intersection(set).first() {
                let kind = ParseErrorKind::Repeated {
                    kind,
                    id: u32::from(id),
                };
                return Err(self.error(item, kind));
            }
            *set = set.union(&range);
        }
        Ok(())
    }

    /// A base-10 id in `span` (whitespace ignored); `item` is shown when `span` is empty.
    fn decimal(&self, span: Span, item: &Span) -> Result<u32, ParseError> {
        let bytes = self.text.as_bytes();
        let mut value: u64 = 0;
        let mut digits = 0;
        for i in self.significant(span.clone()) {
            let b = bytes[i];
            if !b.is_ascii_digit() {
                return Err(self.error(span, ParseErrorKind::NotAnId));
            }
            digits += 1;
            value = (value * 10 + u64::from(b - b'0')).min(u64::from(u32::MAX) + 1);
        }
        if digits == 0 {
            return Err(self.error(item.clone(), ParseErrorKind::NotAnId));
        }
        u32::try_from(value).map_err(|_| self.error(span, ParseErrorKind::IdTooLarge))
    }

    /// Hex digits in `digits`, least significant last; bits must be below `limit`.
    /// `whole` is the mask including its prefix, shown for empty or zero masks.
    pub(crate) fn hex_digits(
        &self,
        digits: Span,
        whole: Span,
        limit: u32,
        skip_space: bool,
    ) -> Result<CuSet, ParseError> {
        let bytes = self.text.as_bytes();
        let positions = digits
            .clone()
            .filter(|&i| !(skip_space && is_space(bytes[i])));
        let mut count = 0u32;
        for i in positions.clone() {
            if !bytes[i].is_ascii_hexdigit() {
                return Err(self.error(i..i + 1, ParseErrorKind::BadHexDigit));
            }
            count += 1;
        }
        if count == 0 {
            return Err(self.error(whole, ParseErrorKind::EmptyHex));
        }
        let mut set = CuSet::new();
        for (nibble, i) in positions.rev().enumerate() {
            let value = (bytes[i] as char).to_digit(16).unwrap_or(0);
            for bit in 0..4 {
                if value & (1 << bit) == 0 {
                    continue;
                }
                let id = (nibble as u32).saturating_mul(4).saturating_add(bit);
                if id >= limit {
                    let kind = ParseErrorKind::HexBitPastLimit { bit: id, limit };
                    return Err(self.error(i..i + 1, kind));
                }
                set.insert(id as u16);
            }
        }
        if set.is_empty() {
            return Err(self.error(whole, ParseErrorKind::ZeroMask));
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    fn kind_at(text: &str, cu_count: u32) -> (usize, ParseErrorKind) {
        let err = parse_cu_list(text, cu_count).unwrap_err();
        (err.offset, err.kind)
    }

    #[test]
    fn accepts_ids_ranges_and_whitespace_like_rocr() {
        assert_eq!(
            parse_cu_list("0-3,8,10-12", 304).unwrap().to_string(),
            "0-3,8,10-12"
        );
        assert_eq!(parse_cu_list(" 1 2 ,3-3", 304).unwrap().to_string(), "3,12");
        assert_eq!(parse_cu_list("007", 304).unwrap().to_string(), "7");
        assert_eq!(parse_cu_list("303", 304).unwrap().to_string(), "303");
    }

    #[test]
    fn accepts_hex_in_any_case() {
        assert_eq!(parse_cu_list("0xf", 304).unwrap(), CuSet::range(0, 4));
        assert_eq!(parse_cu_list("0X00F0", 304).unwrap(), CuSet::range(4, 8));
        assert_eq!(
            parse_cu_list("0xFFFFFFFFF", 36).unwrap(),
            CuSet::range(0, 36)
        );
    }

    #[test]
    fn rejects_what_rocr_rejects_with_offsets() {
        use ParseErrorKind::*;
        assert_eq!(
            kind_at("0-3,2", 304),
            (
                4,
                Repeated {
                    kind: IdKind::Cu,
                    id: 2
                }
            )
        );
        assert_eq!(
            kind_at("5-3", 304),
            (0, DescendingRange { first: 5, last: 3 })
        );
        assert_eq!(kind_at("0x0", 304), (0, ZeroMask));
        assert_eq!(kind_at("0x", 304), (0, EmptyHex));
        assert_eq!(kind_at("0,,1", 304), (1, EmptyItem));
        assert_eq!(kind_at("0-3,", 304), (3, EmptyItem));
        assert_eq!(kind_at("", 304), (0, Empty));
        assert_eq!(kind_at("  ", 304), (0, Empty));
        assert_eq!(kind_at("0-", 304), (0, NotAnId));
        assert_eq!(kind_at("1-2-3", 304), (0, TooManyDashes));
        assert_eq!(kind_at("abc", 304), (0, NotAnId));
        assert_eq!(kind_at("4,+5", 304), (2, NotAnId));
        assert_eq!(kind_at("0,99999999999", 304), (2, IdTooLarge));
        assert_eq!(
            kind_at("0,304", 304),
            (
                2,
                PastLimit {
                    kind: IdKind::Cu,
                    id: 304,
                    limit: 304
                }
            )
        );
        assert_eq!(
            kind_at("300-310", 304),
            (
                0,
                PastLimit {
                    kind: IdKind::Cu,
                    id: 310,
                    limit: 304
                }
            )
        );
        assert_eq!(kind_at("0xfg", 304), (3, BadHexDigit));
        assert_eq!(kind_at("0x3,4", 304), (3, BadHexDigit));
        assert_eq!(kind_at("1x3", 304), (0, BadHexPrefix));
        assert_eq!(
            kind_at("0x10", 4),
            (2, HexBitPastLimit { bit: 4, limit: 4 })
        );
    }

    #[test]
    fn error_display_names_input_offset_and_text() {
        let err = parse_cu_list("0-7,9-3", 304).unwrap_err();
        assert_eq!(
            err.to_string(),
            "CU list: at byte 4 (\"9-3\"): range 9-3 is descending"
        );
        let err = parse_cu_list("0,400", 304).unwrap_err();
        assert_eq!(
            err.to_string(),
            "CU list: at byte 2 (\"400\"): CU 400 does not exist: there are 304 CUs (ids 0-303)"
        );
    }

    #[test]
    fn from_str_uses_capacity_as_limit() {
        assert_eq!("1023".parse::<CuSet>().unwrap().to_string(), "1023");
        assert!("1024".parse::<CuSet>().is_err());
    }
}
