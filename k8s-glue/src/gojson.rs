//! JSON bytes as Go's `encoding/json.Marshal` writes them, so an annotation this crate writes is
//! byte-for-byte what HAMi would write and a patch that changes nothing stays a no-op.
//!
//! serde_json already matches Go on separators (no spaces), struct field order (declaration
//! order) and map key order (sorted, as serde_json's default `Map` is a B-tree). The remaining
//! difference is that Go escapes `<`, `>`, `&`, U+2028 and U+2029 for HTML safety.

use std::io;

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, Serializer};

struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            let escape = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..at])?;
            writer.write_all(escape.as_bytes())?;
            start = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: serde_json::ser::CharEscape,
    ) -> io::Result<()> {
        CompactFormatter.write_char_escape(writer, char_escape)
    }
}

/// Serializes like Go's `json.Marshal`. Only fails for values JSON cannot express (a map with
/// non-string keys), which the types of this crate never contain.
pub(crate) fn to_go_json<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut ser = Serializer::with_formatter(&mut out, GoFormatter);
    value
        .serialize(&mut ser)
        .expect("annotation types serialize to JSON");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_go_escapes_and_nothing_else() {
        let s = "a<b>&c\u{2028}\u{2029}\"\\\n\t\u{1}é\u{7f}";
        assert_eq!(
            to_go_json(s),
            r#""a\u003cb\u003e\u0026c\u2028\u2029\"\\\n\t\u0001é"#.to_string() + "\u{7f}\""
        );
    }
}
