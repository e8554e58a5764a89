//! [`CuSet`]: a fixed-size set of compute-unit ids.

use core::fmt;
use core::ops::{BitAnd, BitOr, Range, Sub};

/// How many CU ids a [`CuSet`] can hold: ids are `0..CAPACITY`.
///
/// The largest shipping device has 304 CUs; 1024 leaves room for future parts and for
/// ROCr's dword-based masks without making the set expensive to copy (128 bytes).
pub const CAPACITY: usize = 1024;

const WORD_BITS: usize = 64;
const WORDS: usize = CAPACITY / WORD_BITS;

/// A set of compute-unit ids in `0..CAPACITY`, stored as a bitmap.
///
/// `CuSet` is `Copy` and never allocates. Its [`Display`](fmt::Display) form is the canonical
/// ROCr CU list: ascending, adjacent ids merged into `a-b` ranges, comma separated
/// (`0-3,8,10-12`). The empty set displays as the empty string, which ROCr would reject:
/// check [`is_empty`](Self::is_empty) before emitting a mask.
///
/// ```
/// use cumask::CuSet;
/// let mut set = CuSet::range(0, 4);
/// set.insert(8);
/// set.insert_range(10..13);
/// assert_eq!(set.to_string(), "0-3,8,10-12");
/// assert_eq!(set.len(), 8);
/// assert!(set.contains(11) && !set.contains(9));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CuSet {
    words: [u64; WORDS],
}

/// A CU id was at or past [`CAPACITY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacityError {
    /// The id that did not fit.
    pub id: u32,
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CU id {} is past the largest supported id {}",
            self.id,
            CAPACITY - 1
        )
    }
}

impl CuSet {
    /// The empty set.
    pub const fn new() -> Self {
        CuSet { words: [0; WORDS] }
    }

    /// The ids `start..end` (half-open, like a Rust range). Empty when `start >= end`.
    ///
    /// # Panics
    /// If `end > CAPACITY`.
    pub fn range(start: u16, end: u16) -> Self {
        let mut set = CuSet::new();
        set.insert_range(start..end);
        set
    }

    /// Adds `id`; returns whether it was absent before.
    ///
    /// # Panics
    /// If `id >= CAPACITY` (like slice indexing). Use [`try_insert`](Self::try_insert) for ids
    /// that come from outside.
    pub fn insert(&mut self, id: u16) -> bool {
        match self.try_insert(u32::from(id)) {
            Ok(added) => added,
            Err(e) => panic!("{e}"),
        }
    }

    /// Adds `id` if it fits; returns whether it was absent before.
    pub fn try_insert(&mut self, id: u32) -> Result<bool, CapacityError> {
        let index = id as usize;
        if index >= CAPACITY {
            return Err(CapacityError { id });
        }
        let bit = 1u64 << (index % WORD_BITS);
        let word = &mut self.words[index / WORD_BITS];
        let added = *word & bit == 0;
        *word |= bit;
        Ok(added)
    }

    /// Adds every id in `range` (half-open).
    ///
    /// # Panics
    /// If `range.end > CAPACITY`.
    pub fn insert_range(&mut self, range: Range<u16>) {
        let (start, end) = (usize::from(range.start), usize::from(range.end));
        assert!(
            end <= CAPACITY,
            "CU range end {end} is past CAPACITY {CAPACITY}"
        );
        let mut i = start;
        while i < end {
            let in_word = i % WORD_BITS;
            let take = (WORD_BITS - in_word).min(end - i);
            let bits = if take == WORD_BITS {
                u64::MAX
            } else {
                ((1u64 << take) - 1) << in_word
            };
            self.words[i / WORD_BITS] |= bits;
            i += take;
        }
    }

    /// Removes `id`; returns whether it was present. Ids past [`CAPACITY`] are never present.
    pub fn remove(&mut self, id: u16) -> bool {
        let present = self.contains(id);
        if present {
            let index = usize::from(id);
            self.words[index / WORD_BITS] &= !(1u64 << (index % WORD_BITS));
        }
        present
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u16) -> bool {
        let index = usize::from(id);
        index < CAPACITY && self.words[index / WORD_BITS] & (1u64 << (index % WORD_BITS)) != 0
    }

    /// Number of ids in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set has no ids.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Ids in either set.
    #[must_use]
    pub fn union(&self, other: &CuSet) -> CuSet {
        self.zip(other, |a, b| a | b)
    }

    /// Ids in both sets.
    #[must_use]
    pub fn intersection(&self, other: &CuSet) -> CuSet {
        self.zip(other, |a, b| a & b)
    }

    /// Ids in `self` but not in `other`.
    #[must_use]
    pub fn difference(&self, other: &CuSet) -> CuSet {
        self.zip(other, |a, b| a & !b)
    }

    /// Whether the sets share no id.
    pub fn is_disjoint(&self, other: &CuSet) -> bool {
        self.words.iter().zip(&other.words).all(|(a, b)| a & b == 0)
    }

    /// Whether every id of `self` is in `other`.
    pub fn is_subset(&self, other: &CuSet) -> bool {
        self.words
            .iter()
            .zip(&other.words)
            .all(|(a, b)| a & !b == 0)
    }

    /// The smallest id, if any.
    pub fn first(&self) -> Option<u16> {
        self.next_set(0)
    }

    /// The largest id, if any.
    pub fn last(&self) -> Option<u16> {
        self.words
            .iter()
            .enumerate()
            .rev()
            .find(|(_, &w)| w != 0)
            .map(|(i, &w)| (i * WORD_BITS + (WORD_BITS - 1 - w.leading_zeros() as usize)) as u16)
    }

    /// The ids in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { set: self, next: 0 }
    }

    /// The maximal runs of consecutive ids, ascending, as half-open ranges.
    ///
    /// ```
    /// use cumask::CuSet;
    /// let set: CuSet = [0, 1, 2, 3, 8, 10, 11, 12].into_iter().collect();
    /// let runs: Vec<_> = set.ranges().collect();
    /// assert_eq!(runs, [0..4, 8..9, 10..13]);
    /// ```
    pub fn ranges(&self) -> Ranges<'_> {
        Ranges { set: self, next: 0 }
    }

    /// A display adapter for the hex form (`0x` + lowercase digits, no leading zeros), as
    /// `ROC_GLOBAL_CU_MASK` and ROCr's hex CU lists take it. The empty set shows as `0x0`,
    /// which both reject.
    ///
    /// ```
    /// use cumask::CuSet;
    /// assert_eq!(CuSet::range(0, 4).hex().to_string(), "0xf");
    /// assert_eq!(CuSet::range(64, 65).hex().to_string(), "0x10000000000000000");
    /// ```
    pub fn hex(&self) -> Hex<'_> {
        Hex(self)
    }

    /// The 64-bit words, least significant first: bit `i` of the set is bit `i % 64` of word
    /// `i / 64`, the order ROCr's dword masks use.
    pub fn words(&self) -> &[u64; CAPACITY / 64] {
        &self.words
    }

    /// The set whose bit `i` is bit `i % 64` of `words[i / 64]`.
    pub const fn from_words(words: [u64; CAPACITY / 64]) -> Self {
        CuSet { words }
    }

    /// The smallest id `>= from` in the set.
    pub(crate) fn next_set(&self, from: usize) -> Option<u16> {
        self.next_matching(from, false)
    }

    /// The smallest id `>= from` not in the set (`CAPACITY` counts as absent).
    pub(crate) fn next_clear(&self, from: usize) -> usize {
        self.next_matching(from, true).map_or(CAPACITY, usize::from)
    }

    fn next_matching(&self, from: usize, clear: bool) -> Option<u16> {
        let mut word_index = from / WORD_BITS;
        if word_index >= WORDS {
            return None;
        }
        let flip = if clear { u64::MAX } else { 0 };
        let mut word = (self.words[word_index] ^ flip) & (u64::MAX << (from % WORD_BITS));
        loop {
            if word != 0 {
                return Some((word_index * WORD_BITS + word.trailing_zeros() as usize) as u16);
            }
            word_index += 1;
            if word_index == WORDS {
                return None;
            }
            word = self.words[word_index] ^ flip;
        }
    }

    fn zip(&self, other: &CuSet, op: impl Fn(u64, u64) -> u64) -> CuSet {
        let mut out = CuSet::new();
        for ((o, a), b) in out.words.iter_mut().zip(&self.words).zip(&other.words) {
            *o = op(*a, *b);
        }
        out
    }
}

impl BitOr for CuSet {
    type Output = CuSet;
    fn bitor(self, rhs: CuSet) -> CuSet {
        self.union(&rhs)
    }
}

impl BitAnd for CuSet {
    type Output = CuSet;
    fn bitand(self, rhs: CuSet) -> CuSet {
        self.intersection(&rhs)
    }
}

impl Sub for CuSet {
    type Output = CuSet;
    fn sub(self, rhs: CuSet) -> CuSet {
        self.difference(&rhs)
    }
}

/// # Panics
/// If an id is `>= CAPACITY`.
impl FromIterator<u16> for CuSet {
    fn from_iter<I: IntoIterator<Item = u16>>(iter: I) -> Self {
        let mut set = CuSet::new();
        for id in iter {
            set.insert(id);
        }
        set
    }
}

impl Extend<u16> for CuSet {
    fn extend<I: IntoIterator<Item = u16>>(&mut self, iter: I) {
        for id in iter {
            self.insert(id);
        }
    }
}

impl<'a> IntoIterator for &'a CuSet {
    type Item = u16;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Ascending ids of a [`CuSet`]; see [`CuSet::iter`].
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    set: &'a CuSet,
    next: usize,
}

impl Iterator for Iter<'_> {
    type Item = u16;
    fn next(&mut self) -> Option<u16> {
        let id = self.set.next_set(self.next)?;
        self.next = usize::from(id) + 1;
        Some(id)
    }
}

/// Maximal runs of a [`CuSet`]; see [`CuSet::ranges`].
#[derive(Debug, Clone)]
pub struct Ranges<'a> {
    set: &'a CuSet,
    next: usize,
}

impl Iterator for Ranges<'_> {
    type Item = Range<u16>;
    fn next(&mut self) -> Option<Range<u16>> {
        let start = self.set.next_set(self.next)?;
        let end = self.set.next_clear(usize::from(start));
        self.next = end;
        Some(start..end as u16)
    }
}

impl fmt::Display for CuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One write_str per run: going through `write!` for each number costs several
        // times more, and masks are formatted for every container start.
        let mut item = [0u8; 11]; // ",1023-1023" is the longest item
        for (i, run) in self.ranges().enumerate() {
            let mut len = 0;
            if i > 0 {
                item[0] = b',';
                len = 1;
            }
            let last = run.end - 1;
            len = push_decimal(&mut item, len, run.start);
            if run.start != last {
                item[len] = b'-';
                len = push_decimal(&mut item, len + 1, last);
            }
            // Only ASCII digits, ',' and '-' were written.
            f.write_str(core::str::from_utf8(&item[..len]).map_err(|_| fmt::Error)?)?;
        }
        Ok(())
    }
}

/// Writes `value` in base 10 at `buf[at..]`; returns the new end. Ids are below 1024,
/// so at most 4 digits.
fn push_decimal(buf: &mut [u8; 11], at: usize, value: u16) -> usize {
    let mut digits = [0u8; 5];
    let mut n = value;
    let mut count = 0;
    loop {
        digits[count] = b'0' + (n % 10) as u8;
        count += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for (k, d) in digits[..count].iter().rev().enumerate() {
        buf[at + k] = *d;
    }
    at + count
}

impl fmt::Debug for CuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CuSet{{{self}}}")
    }
}

/// Hex display of a [`CuSet`]; see [`CuSet::hex`].
#[derive(Debug, Clone, Copy)]
pub struct Hex<'a>(&'a CuSet);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words = &self.0.words;
        match words.iter().rposition(|&w| w != 0) {
            None => f.write_str("0x0"),
            Some(top) => {
                write!(f, "0x{:x}", words[top])?;
                for w in words[..top].iter().rev() {
                    write!(f, "{w:016x}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;
    use std::vec::Vec;

    #[test]
    fn display_merges_adjacent_ids_into_ranges() {
        let set: CuSet = [12, 0, 3, 1, 2, 8, 10, 11].into_iter().collect();
        assert_eq!(set.to_string(), "0-3,8,10-12");
        assert_eq!(CuSet::new().to_string(), "");
        assert_eq!(CuSet::range(0, 1024).to_string(), "0-1023");
        assert_eq!(CuSet::range(63, 65).to_string(), "63-64");
    }

    #[test]
    fn ranges_cross_word_boundaries() {
        let mut set = CuSet::range(60, 130);
        set.insert(1023);
        assert_eq!(set.ranges().collect::<Vec<_>>(), [60..130, 1023..1024]);
        assert_eq!(set.len(), 71);
        assert_eq!(set.first(), Some(60));
        assert_eq!(set.last(), Some(1023));
    }

    #[test]
    fn set_algebra() {
        let a = CuSet::range(0, 10);
        let b = CuSet::range(5, 15);
        assert_eq!(a.union(&b), CuSet::range(0, 15));
        assert_eq!(a.intersection(&b), CuSet::range(5, 10));
        assert_eq!(a.difference(&b), CuSet::range(0, 5));
        assert!(!a.is_disjoint(&b));
        assert!(CuSet::range(0, 5).is_disjoint(&CuSet::range(5, 10)));
        assert!(CuSet::range(2, 4).is_subset(&a));
        assert_eq!(a | b, a.union(&b));
        assert_eq!(a & b, a.intersection(&b));
        assert_eq!(a - b, a.difference(&b));
    }

    #[test]
    fn insert_remove_report_change() {
        let mut set = CuSet::new();
        assert!(set.insert(7));
        assert!(!set.insert(7));
        assert!(set.remove(7));
        assert!(!set.remove(7));
        assert!(!set.remove(5000));
        assert!(!set.contains(5000));
        assert_eq!(set.try_insert(1024), Err(CapacityError { id: 1024 }));
        assert!(set.is_empty());
    }

    #[test]
    fn hex_is_lowercase_without_leading_zeros() {
        assert_eq!(CuSet::new().hex().to_string(), "0x0");
        let set: CuSet = [0, 4, 65].into_iter().collect();
        assert_eq!(set.hex().to_string(), "0x20000000000000011");
    }
}
