//! Text without allocation: error fragments and formatting into caller-owned buffers.

use core::fmt;

/// Longest excerpt of the input an error keeps, in bytes.
pub const FRAGMENT_CAPACITY: usize = 32;

/// A short copy of the offending part of an input, kept inside an error so the error owns
/// no borrowed data and needs no allocation. Longer text is cut at a character boundary
/// and shown with a trailing `...`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fragment {
    bytes: [u8; FRAGMENT_CAPACITY],
    len: u8,
    truncated: bool,
}

impl Fragment {
    /// Copies up to [`FRAGMENT_CAPACITY`] bytes of `text`.
    pub fn new(text: &str) -> Self {
        let mut len = text.len().min(FRAGMENT_CAPACITY);
        while !text.is_char_boundary(len) {
            len -= 1;
        }
        let mut bytes = [0; FRAGMENT_CAPACITY];
        bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
        Fragment {
            bytes,
            len: len as u8,
            truncated: len < text.len(),
        }
    }

    /// The kept text (without the `...` marker).
    pub fn as_str(&self) -> &str {
        // Always a prefix of a `str` cut at a char boundary; the fallback is unreachable.
        core::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }

    /// Whether the original text was longer than what is kept.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Display for Fragment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}", self.as_str().escape_debug())?;
        if self.truncated {
            f.write_str("...")?;
        }
        f.write_str("\"")
    }
}

impl fmt::Debug for Fragment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The caller's buffer was too small; `needed` bytes would have fitted the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferTooSmall {
    /// Length of the full text in bytes (without any terminator).
    pub needed: usize,
}

impl fmt::Display for BufferTooSmall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "output buffer too small: the text needs {} bytes",
            self.needed
        )
    }
}

/// Formats `value` into `buf` and returns the written text, or how long it would be.
///
/// Nothing is written unless the whole text fits, so a caller never sees a truncated mask.
///
/// ```
/// use cumask::{format_into, CuSet};
/// let mut buf = [0u8; 16];
/// assert_eq!(format_into(&CuSet::range(0, 76), &mut buf), Ok("0-75"));
/// let mut tiny = [0u8; 2];
/// assert_eq!(format_into(&CuSet::range(0, 76), &mut tiny).unwrap_err().needed, 4);
/// ```
pub fn format_into<'b>(
    value: &dyn fmt::Display,
    buf: &'b mut [u8],
) -> Result<&'b str, BufferTooSmall> {
    let needed = formatted_len(value);
    if needed > buf.len() {
        return Err(BufferTooSmall { needed });
    }
    let mut writer = SliceWriter {
        buf: &mut buf[..needed],
        len: 0,
    };
    // The length was measured above with the same Display impl, so this cannot overflow;
    // a Display impl that changes its output between calls would be caught here.
    if fmt::write(&mut writer, format_args!("{value}")).is_err() || writer.len != needed {
        return Err(BufferTooSmall {
            needed: writer.len.max(needed),
        });
    }
    let written = &buf[..needed];
    Ok(core::str::from_utf8(written).unwrap_or(""))
}

/// The byte length of `value`'s Display output.
pub fn formatted_len(value: &dyn fmt::Display) -> usize {
    let mut counter = Counter(0);
    // Counter never fails, and Display impls in this crate never fail on their own.
    let _ = fmt::write(&mut counter, format_args!("{value}"));
    counter.0
}

struct Counter(usize);

impl fmt::Write for Counter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

struct SliceWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl fmt::Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let dest = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dest.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn fragment_cuts_long_text_at_char_boundary() {
        let long = "é".repeat(40);
        let frag = Fragment::new(&long);
        assert!(frag.is_truncated());
        assert_eq!(frag.as_str().len(), 32);
        assert!(frag.to_string().ends_with("...\""));
        assert_eq!(Fragment::new("0-3").to_string(), "\"0-3\"");
    }

    #[test]
    fn format_into_writes_nothing_when_too_small() {
        let mut buf = [b'#'; 3];
        assert_eq!(
            format_into(&"abcd", &mut buf),
            Err(BufferTooSmall { needed: 4 })
        );
        assert_eq!(&buf, b"###");
        let mut buf = [0u8; 4];
        assert_eq!(format_into(&"abcd", &mut buf), Ok("abcd"));
    }
}
