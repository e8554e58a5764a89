//! One error type for every decoder and decision in this crate.
//!
//! Operators read these messages in scheduler events and device-plugin logs, so each one names
//! the input (annotation, field, resource) and quotes the text that was wrong.

use std::fmt;

/// Something in the input could not be used. `input` names where it came from
/// (`hami.io/amd-cu-allocated["U1"]`, `amd.com/gpucores`), `text` is the offending text as given,
/// and `problem` says what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub input: String,
    pub text: String,
    pub problem: String,
}

impl Error {
    pub fn new(
        input: impl Into<String>,
        text: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        Error {
            input: input.into(),
            text: text.into(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Debug formatting quotes the text and escapes control characters, so an empty or
        // whitespace-only value is still visible in a log line.
        write!(f, "{}={:?}: {}", self.input, self.text, self.problem)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Long inputs (a whole annotation) are shortened in messages so one bad pod cannot flood a log.
pub(crate) fn excerpt(text: &str) -> String {
    const MAX: usize = 200;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
