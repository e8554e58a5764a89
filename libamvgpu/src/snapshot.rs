//! An immutable copy of the process's initial environment, taken once.
//!
//! Why not `getenv`: the audit module has its own libc whose `environ` aliases the program's
//! array, so a program's `setenv` would sometimes change what the hook sees and sometimes not
//! (DOMAIN.md §2). The snapshot is read from `/proc/self/environ` (the environment the process
//! was started with); if `/proc` is unavailable, from the environment array the loader handed
//! the program, as saved by `la_objopen` before any program code ran.
//!
//! This is the configuration *source*; later sources (a config file, the parent process) plug
//! in behind the same [`Snapshot::get`] / [`Snapshot::vars`] interface.

use core::ffi::c_char;

/// The environment as `NAME=VALUE\0` records.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    records: &'static [u8],
}

/// Where the snapshot came from (for the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    ProcSelfEnviron,
    InitialEnviron,
    Empty,
}

impl Snapshot {
    /// A snapshot over already-collected records (used by tests and by [`Snapshot::take`]).
    pub const fn from_records(records: &'static [u8]) -> Snapshot {
        Snapshot { records }
    }

    /// Takes the snapshot. Allocates once (the copy is kept for the life of the process); call
    /// it from a wrapper's lazy initialisation, never from a loader callback.
    pub fn take() -> (Snapshot, Source) {
        if let Some(bytes) = read_proc_environ() {
            return (
                Snapshot::from_records(bytes.leak()),
                Source::ProcSelfEnviron,
            );
        }
        let env = crate::audit::initial_environ();
        if env.is_null() {
            return (Snapshot::from_records(&[]), Source::Empty);
        }
        // SAFETY: `env` is the NULL-terminated array of NUL-terminated strings the program
        // started with (saved by la_objopen); its strings live on the initial stack for the
        // life of the process.
        let bytes = unsafe { copy_environ(env) };
        (Snapshot::from_records(bytes.leak()), Source::InitialEnviron)
    }

    /// All `(name, value)` pairs in environment order. Records without `=` are skipped.
    pub fn vars(&self) -> impl Iterator<Item = (&'static [u8], &'static [u8])> {
        let records: &'static [u8] = self.records;
        records.split(|&b| b == 0).filter_map(|record| {
            let eq = record.iter().position(|&b| b == b'=')?;
            Some((&record[..eq], &record[eq + 1..]))
        })
    }

    /// The value of the first variable called `name`.
    pub fn get(&self, name: &[u8]) -> Option<&'static [u8]> {
        self.vars().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

/// Reads `/proc/self/environ` whole, with raw syscalls (no `std::fs`, which would pull newer
/// glibc symbols such as `statx`).
fn read_proc_environ() -> Option<Vec<u8>> {
    // SAFETY: the path is a NUL-terminated literal.
    let fd = unsafe {
        libc::open(
            c"/proc/self/environ".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut bytes: Vec<u8> = Vec::with_capacity(8192);
    let ok = loop {
        if bytes.capacity() - bytes.len() < 4096 {
            bytes.reserve(bytes.capacity());
        }
        let spare = bytes.capacity() - bytes.len();
        // SAFETY: the destination is the vector's spare capacity, `spare` bytes long.
        let n = unsafe { libc::read(fd, bytes.as_mut_ptr().add(bytes.len()).cast(), spare) };
        match n {
            0 => break true,
            n if n > 0 => {
                // SAFETY: the kernel initialised exactly `n` more bytes.
                unsafe { bytes.set_len(bytes.len() + n as usize) };
            }
            _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
            _ => break false,
        }
    };
    // SAFETY: `fd` is ours and closed once.
    unsafe { libc::close(fd) };
    ok.then_some(bytes)
}

/// Copies an environment array into `NAME=VALUE\0` records.
///
/// # Safety
/// `env` must be a NULL-terminated array of NUL-terminated strings.
unsafe fn copy_environ(env: *const *const c_char) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut entry = env;
    loop {
        // SAFETY: the array is NULL-terminated (caller guarantee); we stop at the NULL.
        let s = unsafe { *entry };
        if s.is_null() {
            break;
        }
        // SAFETY: each entry is a NUL-terminated string (caller guarantee).
        bytes.extend_from_slice(unsafe { core::ffi::CStr::from_ptr(s) }.to_bytes_with_nul());
        // SAFETY: not past the terminating NULL yet.
        entry = unsafe { entry.add(1) };
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_split_into_pairs_and_first_wins() {
        let s = Snapshot::from_records(b"A=1\0NOEQ\0B=x=y\0A=2\0EMPTY=\0");
        let vars: Vec<_> = s.vars().collect();
        assert_eq!(
            vars,
            vec![
                (&b"A"[..], &b"1"[..]),
                (b"B", b"x=y"),
                (b"A", b"2"),
                (b"EMPTY", b""),
            ]
        );
        assert_eq!(s.get(b"A"), Some(&b"1"[..]));
        assert_eq!(s.get(b"EMPTY"), Some(&b""[..]));
        assert_eq!(s.get(b"NOEQ"), None);
    }

    #[test]
    fn proc_snapshot_sees_the_start_environment_not_later_changes() {
        // The test process was started with PATH (cargo sets it); a variable set afterwards
        // must not appear, because the snapshot reflects the initial environment.
        std::env::set_var("AMVGPU_SNAPSHOT_TEST_LATE", "1");
        let bytes = read_proc_environ().expect("/proc/self/environ readable in tests");
        let s = Snapshot::from_records(bytes.leak());
        assert!(s.get(b"PATH").is_some());
        assert_eq!(s.get(b"AMVGPU_SNAPSHOT_TEST_LATE"), None);
    }

    #[test]
    fn environ_arrays_are_copied() {
        let a = c"X=1";
        let b = c"Y=2";
        let env = [a.as_ptr(), b.as_ptr(), core::ptr::null()];
        // SAFETY: a NULL-terminated array of literals.
        let bytes = unsafe { copy_environ(env.as_ptr()) };
        assert_eq!(bytes, b"X=1\0Y=2\0");
    }
}
