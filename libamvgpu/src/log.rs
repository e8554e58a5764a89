//! Logging to stderr: one line per event, formatted into a stack buffer, one `write(2)`.
//!
//! No allocation, no stdio, no lock: a program's own stdout stays untouched, and a line is
//! never interleaved with another thread's because it leaves in a single syscall (pipes and
//! terminals keep writes up to `PIPE_BUF` = 4096 bytes whole; lines are shorter than that).

use crate::config::Level;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU8, Ordering};

/// Longest line written; longer messages are cut and end in `...`.
pub const LINE_MAX: usize = 512;

/// The current level. Relaxed is enough: the level is set once during initialisation and a
/// thread that still sees the default only logs slightly more or less for a moment.
static LEVEL: AtomicU8 = AtomicU8::new(Level::DEFAULT as u8);

/// Sets the level (once, from the environment snapshot).
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// True when messages of `level` are written.
#[inline]
pub fn enabled(level: Level) -> bool {
    level != Level::Off && level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// A `fmt::Write` sink over a fixed array that truncates instead of failing.
struct LineBuf {
    bytes: [u8; LINE_MAX],
    len: usize,
    truncated: bool,
}

impl Write for LineBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Keep room for the final newline.
        let room = LINE_MAX - 1 - self.len;
        let take = s.len().min(room);
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        if take < s.len() {
            self.truncated = true;
        }
        Ok(())
    }
}

/// Formats one complete line (`[amvgpu pid N] LEVEL: message\n`) into `out`; returns its length.
pub fn format_line(
    out: &mut [u8; LINE_MAX],
    pid: i32,
    level: Level,
    args: fmt::Arguments<'_>,
) -> usize {
    let mut buf = LineBuf {
        bytes: [0; LINE_MAX],
        len: 0,
        truncated: false,
    };
    // LineBuf never returns an error, and the Display impls used here do not fail either.
    let _ = write!(buf, "[amvgpu pid {pid}] {}: ", level.label());
    let _ = buf.write_fmt(args);
    if buf.truncated {
        buf.bytes[buf.len - 3..buf.len].copy_from_slice(b"...");
    }
    buf.bytes[buf.len] = b'\n';
    buf.len += 1;
    out[..buf.len].copy_from_slice(&buf.bytes[..buf.len]);
    buf.len
}

/// Writes one line at `level` if enabled.
#[cold]
#[inline(never)]
pub fn emit(level: Level, args: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let mut line = [0u8; LINE_MAX];
    // SAFETY: getpid has no preconditions and cannot fail.
    let pid = unsafe { libc::getpid() };
    let len = format_line(&mut line, pid, level, args);
    loop {
        // SAFETY: `line[..len]` is initialised memory owned by this frame; fd 2 may be closed,
        // in which case write fails harmlessly with EBADF.
        let written = unsafe { libc::write(2, line.as_ptr().cast(), len) };
        // Retry only an interrupted write; a short or failed write is not worth more syscalls.
        if written >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
}

/// Displays raw environment bytes, replacing what is not printable ASCII with `?` and cutting
/// very long values so that one bad variable cannot fill the line.
pub struct Bytes<'a>(pub &'a [u8]);

impl fmt::Display for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 64;
        for &b in self.0.iter().take(SHOWN) {
            let c = if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '?'
            };
            f.write_char(c)?;
        }
        if self.0.len() > SHOWN {
            f.write_str("...")?;
        }
        Ok(())
    }
}

macro_rules! error {
    ($($arg:tt)*) => { $crate::log::emit($crate::config::Level::Error, format_args!($($arg)*)) };
}
macro_rules! warning {
    ($($arg:tt)*) => { $crate::log::emit($crate::config::Level::Warn, format_args!($($arg)*)) };
}
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::emit($crate::config::Level::Info, format_args!($($arg)*)) };
}
macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::log::enabled($crate::config::Level::Debug) {
            $crate::log::emit($crate::config::Level::Debug, format_args!($($arg)*))
        }
    };
}
pub(crate) use {debug, error, info, warning as warn};

#[cfg(test)]
mod tests {
    use super::*;

    fn line(level: Level, args: fmt::Arguments<'_>) -> String {
        let mut out = [0u8; LINE_MAX];
        let len = format_line(&mut out, 42, level, args);
        String::from_utf8(out[..len].to_vec()).unwrap()
    }

    #[test]
    fn lines_carry_prefix_and_newline() {
        assert_eq!(
            line(
                Level::Error,
                format_args!("{}=\"{}\": bad", "X", Bytes(b"1.5G"))
            ),
            "[amvgpu pid 42] ERROR: X=\"1.5G\": bad\n"
        );
    }

    #[test]
    fn long_messages_are_cut_not_dropped() {
        let long = "x".repeat(2 * LINE_MAX);
        let text = line(Level::Warn, format_args!("{long}"));
        assert_eq!(text.len(), LINE_MAX);
        assert!(text.ends_with("...\n"));
        assert!(text.starts_with("[amvgpu pid 42] WARN: xxx"));
    }

    #[test]
    fn raw_bytes_are_shown_safely() {
        assert_eq!(Bytes(b"a\nb\xff").to_string(), "a?b?");
        assert!(Bytes(&[b'z'; 100]).to_string().ends_with("..."));
    }

    #[test]
    fn off_disables_everything() {
        set_level(Level::Off);
        assert!(!enabled(Level::Error));
        set_level(Level::Info);
        assert!(enabled(Level::Warn));
        assert!(!enabled(Level::Debug));
        set_level(Level::DEFAULT);
    }
}
