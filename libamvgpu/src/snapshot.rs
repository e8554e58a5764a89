//! The configuration snapshot: one immutable set of `NAME=VALUE` records per process, taken
//! lazily on first use (the first wrapped HIP call or the first wrapped `getenv`) and kept for
//! the life of the process.
//!
//! Why not `getenv`: the audit module has its own libc whose `environ` aliases the program's
//! array, so a program's `setenv` would sometimes change what the hook sees and sometimes not
//! (DOMAIN.md §2). The snapshot is built from these sources; the first source that names a
//! variable wins:
//!
//! 1. the process's initial environment: `/proc/self/environ`, or, if `/proc` is unavailable,
//!    the environment array the loader handed the program (saved by `la_objopen` before any
//!    program code ran);
//! 2. the config file: the path in `AMVGPU_CONFIG_FILE` if the initial environment sets it,
//!    else [`DEFAULT_CONFIG_FILE`] (`/etc/amvgpu/env`, or what `AMVGPU_DEFAULT_CONFIG_FILE`
//!    said when the module was built). One `KEY=VALUE` per line, taken literally (no quotes,
//!    no `export`, no expansion); blank lines and lines starting with `#` are skipped; a line
//!    without `=` is skipped with a warning naming the file and line. At most 64 KiB.
//! 3. only when the first two give none of the settings that carry the pod's policy
//!    ([`policy`]: the limits, the shared ledger, the CU masks, oversubscription, task priority)
//!    — a child started with a clean environment (`env -i`, `execve` with a short array) in
//!    which `LD_AUDIT` itself survived — the ancestors: the parent chain (`getppid`, then
//!    `/proc/<pid>/stat`), each ancestor's `/proc/<pid>/environ`, up to the nearest ancestor
//!    that carries the policy. The pod's settings ([`inherited`]) still missing are taken from
//!    that one ancestor and the walk ends there; PID 1 is the fallback when no ancestor in the
//!    chain carries the policy.
//!
//! Why only then, and why one ancestor: the snapshot is taken in every hooked process, and the
//! walk costs a dozen or more system calls and 150k or more instructions per process start,
//! even when it finds nothing; a process that already has the pod's limit (the normal case: every
//! process of the container inherits it) is not a stripped child, and a setting it lacks (say
//! `HSA_CU_MASK`) was left out by its own environment, not lost. And settings taken from one
//! source are coherent (one pod's limit, ledger and CU mask), never a mix of what different
//! ancestors happened to export. The device-visibility lists and the log level do not count as
//! the policy: a launcher that starts a worker with a short environment naming its GPU, or a
//! user who turns on `LIBHIP_LOG_LEVEL`, must not switch the limit off.
//!
//! The walk stops at the first ancestor whose real or effective uid differs from this
//! process's real uid: the kernel would refuse to show its environment anyway, and a process
//! must not pick up settings from a more (or differently) privileged process such as a setuid
//! parent. A source that cannot be read (missing file, `EACCES`, a vanished process) is skipped
//! with a debug line; nothing here can abort the process.
//!
//! Allocation: the snapshot is only ever built from a wrapper, never from a loader callback,
//! so it uses the audit namespace's own heap (once; the result is leaked on purpose, as it
//! must live as long as the process and its storage backs the pointers `getenv` returns).

use crate::config;
use crate::log;
use core::ffi::c_char;
use core::sync::atomic::{AtomicPtr, Ordering};
use std::ffi::CString;

/// The config file read when `AMVGPU_CONFIG_FILE` is not set.
pub const DEFAULT_CONFIG_FILE: &str = match option_env!("AMVGPU_DEFAULT_CONFIG_FILE") {
    Some(path) => path,
    None => "/etc/amvgpu/env",
};

/// The variable that names another config file.
pub const CONFIG_FILE_VAR: &[u8] = b"AMVGPU_CONFIG_FILE";

/// A config file larger than this is a mistake (or `/dev/zero`): it is reported and skipped.
const CONFIG_FILE_MAX: usize = 64 * 1024;

/// How many ancestors are visited at most (a parent loop cannot happen, but a bound costs
/// nothing).
const MAX_ANCESTORS: usize = 64;

/// True for the pod's settings, the variables taken from an ancestor when the process lacks
/// them.
pub fn inherited(name: &[u8]) -> bool {
    name.starts_with(config::LIMIT_VAR)
        || matches!(
            name,
            b"HIP_DEVICE_MEMORY_SHARED_CACHE"
                | b"ROCR_VISIBLE_DEVICES"
                | b"HIP_VISIBLE_DEVICES"
                | b"HSA_CU_MASK"
                | b"ROC_GLOBAL_CU_MASK"
                | b"HIP_OVERSUBSCRIBE"
                | b"AMD_TASK_PRIORITY"
                | b"LIBHIP_LOG_LEVEL"
        )
}

/// The environment as `NAME=VALUE\0` records.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    records: &'static [u8],
}

/// Where the process's own environment came from (for the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    ProcSelfEnviron,
    InitialEnviron,
    Empty,
}

struct Global {
    snapshot: Snapshot,
    source: Source,
}

static GLOBAL: AtomicPtr<Global> = AtomicPtr::new(core::ptr::null_mut());

impl Snapshot {
    /// A snapshot over already-collected records (used by tests and by [`Snapshot::take`]).
    pub const fn from_records(records: &'static [u8]) -> Snapshot {
        Snapshot { records }
    }

    /// The process's snapshot, built on the first call (see the module docs). Call it from a
    /// wrapper, never from a loader callback.
    pub fn take() -> (Snapshot, Source) {
        // Acquire pairs with the Release of the compare-exchange below: a thread that sees the
        // pointer sees the records it points to.
        let mut global = GLOBAL.load(Ordering::Acquire);
        if global.is_null() {
            let built = Box::into_raw(Box::new(build()));
            global = match GLOBAL.compare_exchange(
                core::ptr::null_mut(),
                built,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => built,
                // Another thread finished first with the same content. Ours stays leaked
                // (at most once per racing thread): snapshot storage is never freed, a rule
                // that makes a dangling `getenv` answer impossible.
                Err(winner) => winner,
            };
        }
        // SAFETY: GLOBAL only ever holds a leaked Box that is never freed or written again.
        let global = unsafe { &*global };
        (global.snapshot, global.source)
    }

    /// All `(name, value)` pairs in record order. Records without `=` are skipped. Every value
    /// is followed by a NUL in the storage (see [`Snapshot::get_c`]).
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

    /// The value of the first variable called `name` as a C string that lives as long as the
    /// snapshot (records are NUL-terminated, see [`terminate`]).
    pub fn get_c(&self, name: &[u8]) -> Option<*const c_char> {
        let value = self.get(name)?;
        debug_assert_eq!(
            self.records
                .get(value.as_ptr() as usize - self.records.as_ptr() as usize + value.len()),
            Some(&0)
        );
        Some(value.as_ptr().cast())
    }
}

/// Makes sure the last record is NUL-terminated (a truncated `/proc` read might not be).
fn terminate(records: &mut Vec<u8>) {
    if records.last().is_some_and(|&b| b != 0) {
        records.push(0);
    }
}

/// True when `records` has a variable called `name`.
fn has(records: &[u8], name: &[u8]) -> bool {
    Snapshot::from_records_ref(records).any(|(n, _)| n == name)
}

impl Snapshot {
    fn from_records_ref(records: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
        records.split(|&b| b == 0).filter_map(|record| {
            let eq = record.iter().position(|&b| b == b'=')?;
            Some((&record[..eq], &record[eq + 1..]))
        })
    }
}

fn push_record(records: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    records.extend_from_slice(name);
    records.push(b'=');
    records.extend_from_slice(value);
    records.push(0);
}

/// A config-file line that is not `KEY=VALUE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based.
    pub line: usize,
}

/// Appends the config file's variables that `records` lacks; returns the lines it skipped.
pub fn merge_config_file(records: &mut Vec<u8>, file: &[u8]) -> Vec<BadLine> {
    let mut bad = Vec::new();
    for (index, line) in file.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let trimmed_start = line.iter().position(|b| !b.is_ascii_whitespace());
        let Some(start) = trimmed_start else {
            continue;
        };
        if line[start] == b'#' {
            continue;
        }
        match line.iter().position(|&b| b == b'=') {
            Some(eq) if eq > 0 && !line.contains(&0) => {
                let (name, value) = (&line[..eq], &line[eq + 1..]);
                if !has(records, name) {
                    push_record(records, name, value);
                }
            }
            _ => bad.push(BadLine { line: index + 1 }),
        }
    }
    bad
}

/// Appends the pod's settings ([`inherited`]) from one ancestor's environment that `records`
/// lacks; returns how many were taken.
pub fn merge_ancestor(records: &mut Vec<u8>, ancestor: &[u8]) -> usize {
    let mut taken = 0;
    for (name, value) in Snapshot::from_records_ref(ancestor) {
        if inherited(name) && !has(records, name) {
            push_record(records, name, value);
            taken += 1;
        }
    }
    taken
}

/// True for the pod's settings that carry its policy: all of [`inherited`] except the
/// device-visibility lists and the log level, which programs routinely set themselves for the
/// children they start (one worker per GPU, a debugging run). A process whose initial
/// environment and config file have one of these is not a stripped child: its settings are
/// complete as they are, and no ancestor is read.
pub fn policy(name: &[u8]) -> bool {
    inherited(name)
        && !matches!(
            name,
            b"ROCR_VISIBLE_DEVICES" | b"HIP_VISIBLE_DEVICES" | b"LIBHIP_LOG_LEVEL"
        )
}

/// True when `records` has a variable that carries the pod's policy ([`policy`]).
fn has_policy(records: &[u8]) -> bool {
    Snapshot::from_records_ref(records).any(|(name, _)| policy(name))
}

/// A debug line about a source, kept until the snapshot has decided the log level. An errno is
/// turned into text only if the line is printed: `strerror` pulls in libc's message tables and
/// locale code, a few page faults in every process for lines that are almost never shown.
enum Note {
    Text(String),
    /// `{0}: {errno's message}{2}`.
    Errno(String, i32, &'static str),
}

impl From<String> for Note {
    fn from(text: String) -> Note {
        Note::Text(text)
    }
}

impl core::fmt::Display for Note {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Note::Text(text) => f.write_str(text),
            Note::Errno(what, errno, after) => write!(
                f,
                "{what}: {}{after}",
                std::io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

/// Builds the snapshot from all sources, then logs (at the level it configures) what it did.
fn build() -> Global {
    let mut notes: Vec<Note> = Vec::new();
    // Bad content (not an absent source) is worth a warning.
    let mut warnings: Vec<String> = Vec::new();
    let (mut records, source) = match read_file(c"/proc/self/environ", usize::MAX) {
        Ok(bytes) => (bytes, Source::ProcSelfEnviron),
        Err(errno) => {
            notes.push(Note::Errno("/proc/self/environ".into(), errno, ""));
            let env = crate::audit::initial_environ();
            if env.is_null() {
                (Vec::new(), Source::Empty)
            } else {
                // SAFETY: `env` is the NULL-terminated array of NUL-terminated strings the
                // program started with (saved by la_objopen); its strings live on the initial
                // stack for the life of the process.
                (unsafe { copy_environ(env) }, Source::InitialEnviron)
            }
        }
    };
    terminate(&mut records);

    let own_count = records.len();
    let file_path: Vec<u8> =
        match Snapshot::from_records_ref(&records).find(|(n, _)| *n == CONFIG_FILE_VAR) {
            Some((_, path)) => path.to_vec(),
            None => DEFAULT_CONFIG_FILE.as_bytes().to_vec(),
        };
    match CString::new(file_path.clone()) {
        Err(_) => warnings.push(format!(
            "config file {:?}: contains a NUL byte; skipped",
            String::from_utf8_lossy(&file_path)
        )),
        Ok(path) => match read_file(&path, CONFIG_FILE_MAX) {
            Ok(file) => {
                let bad = merge_config_file(&mut records, &file);
                for BadLine { line } in bad {
                    warnings.push(format!(
                        "config file {}: line {line} is not KEY=VALUE; skipped",
                        path.to_string_lossy()
                    ));
                }
                notes.push(
                    format!(
                        "config file {}: {} byte(s) of settings added",
                        path.to_string_lossy(),
                        records.len() - own_count
                    )
                    .into(),
                );
            }
            Err(errno) => notes.push(Note::Errno(
                format!("config file {}", path.to_string_lossy()),
                errno,
                "; skipped",
            )),
        },
    }

    if has_policy(&records) {
        notes.push(
            "the pod's settings come from this process's own sources"
                .to_string()
                .into(),
        );
    } else {
        walk_ancestors(&mut records, &mut notes);
    }

    let records: &'static [u8] = records.leak();
    let snapshot = Snapshot::from_records(records);
    // The snapshot decides the log level; only now can the notes be filtered by it.
    if let Some(level) = snapshot
        .get(config::LOG_LEVEL_VAR)
        .and_then(config::parse_log_level)
    {
        log::set_level(level);
    }
    for warning in &warnings {
        log::warn!("{warning}");
    }
    for note in &notes {
        log::debug!("{note}");
    }
    Global { snapshot, source }
}

/// Merges the pod's settings from the nearest ancestor that carries the pod's policy, or from
/// PID 1 when no ancestor in the chain does.
fn walk_ancestors(records: &mut Vec<u8>, notes: &mut Vec<Note>) {
    // SAFETY: getuid/getppid have no preconditions.
    let (uid, mut pid) = unsafe { (libc::getuid(), libc::getppid()) };
    let mut visited_init = false;
    for _ in 0..MAX_ANCESTORS {
        if pid <= 0 {
            break;
        }
        visited_init |= pid == 1;
        match visit(pid, uid, records) {
            Visit::OtherUser => {
                notes.push(
                    format!("ancestor {pid} runs as another user; inheritance stops there").into(),
                );
                return;
            }
            Visit::Unreadable(what, errno) => notes.push(Note::Errno(
                format!("ancestor {pid}: {what}"),
                errno,
                "; skipped",
            )),
            Visit::Read(taken) => {
                notes.push(
                    format!(
                        "ancestor {pid}: {taken} pod setting(s) inherited; the walk ends there"
                    )
                    .into(),
                );
                return;
            }
            Visit::NoPolicy => {}
        }
        if pid == 1 {
            break;
        }
        match parent_of(pid) {
            Some(parent) => pid = parent,
            None => {
                notes.push(format!("ancestor {pid}: parent unknown; walk ends").into());
                break;
            }
        }
    }
    if !visited_init {
        match visit(1, uid, records) {
            Visit::Read(taken) => {
                notes.push(format!("PID 1: {taken} pod setting(s) inherited").into())
            }
            Visit::NoPolicy => {}
            Visit::OtherUser => {
                notes.push("PID 1 runs as another user; skipped".to_string().into())
            }
            Visit::Unreadable(what, errno) => {
                notes.push(Note::Errno(format!("PID 1: {what}"), errno, "; skipped"))
            }
        }
    }
}

enum Visit {
    /// The ancestor carries the pod's policy; this many of its pod settings were missing here
    /// and taken.
    Read(usize),
    /// Readable, but without any setting that carries the pod's policy: nothing taken.
    NoPolicy,
    OtherUser,
    Unreadable(&'static str, i32),
}

fn visit(pid: libc::pid_t, uid: libc::uid_t, records: &mut Vec<u8>) -> Visit {
    let status = match read_file(&proc_path(pid, "status"), 64 * 1024) {
        Ok(status) => status,
        Err(errno) => return Visit::Unreadable("status", errno),
    };
    if !same_user(&status, uid) {
        return Visit::OtherUser;
    }
    match read_file(&proc_path(pid, "environ"), usize::MAX) {
        Ok(mut env) => {
            terminate(&mut env);
            if has_policy(&env) {
                Visit::Read(merge_ancestor(records, &env))
            } else {
                Visit::NoPolicy
            }
        }
        Err(errno) => Visit::Unreadable("environ", errno),
    }
}

fn proc_path(pid: libc::pid_t, file: &str) -> CString {
    CString::new(format!("/proc/{pid}/{file}")).expect("no NUL in a formatted path")
}

/// True when the `Uid:` line of `/proc/<pid>/status` has `uid` as real and effective uid.
fn same_user(status: &[u8], uid: libc::uid_t) -> bool {
    let Some(line) = status
        .split(|&b| b == b'\n')
        .find(|l| l.starts_with(b"Uid:"))
    else {
        return false;
    };
    let mut ids = line[4..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .map(|f| {
            std::str::from_utf8(f)
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
        });
    matches!((ids.next(), ids.next()), (Some(Some(real)), Some(Some(effective))) if real == uid && effective == uid)
}

/// The parent pid from `/proc/<pid>/stat` (`pid (comm) state ppid ...`; comm may hold spaces
/// and parentheses, so fields are counted after the last `)`).
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let stat = read_file(&proc_path(pid, "stat"), 64 * 1024).ok()?;
    parse_ppid(&stat)
}

fn parse_ppid(stat: &[u8]) -> Option<libc::pid_t> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let _state = fields.next()?;
    std::str::from_utf8(fields.next()?).ok()?.parse().ok()
}

/// Reads a file whole with raw syscalls (no `std::fs`, which would pull newer glibc symbols
/// such as `statx`). Errors are errno values; a file longer than `max` is `EFBIG`.
fn read_file(path: &core::ffi::CStr, max: usize) -> Result<Vec<u8>, i32> {
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    let mut bytes: Vec<u8> = Vec::with_capacity(8192);
    let result = loop {
        if bytes.len() > max {
            break Err(libc::EFBIG);
        }
        if bytes.capacity() - bytes.len() < 4096 {
            bytes.reserve(bytes.capacity());
        }
        let spare = bytes.capacity() - bytes.len();
        // SAFETY: the destination is the vector's spare capacity, `spare` bytes long.
        let n = unsafe { libc::read(fd, bytes.as_mut_ptr().add(bytes.len()).cast(), spare) };
        match n {
            0 => break Ok(()),
            n if n > 0 => {
                // SAFETY: the kernel initialised exactly `n` more bytes.
                unsafe { bytes.set_len(bytes.len() + n as usize) };
            }
            _ => match errno() {
                libc::EINTR => {}
                e => break Err(e),
            },
        }
    };
    // SAFETY: `fd` is ours and closed once.
    unsafe { libc::close(fd) };
    result.map(|()| bytes)
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
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
        // SAFETY: get_c points at a NUL-terminated value inside the records.
        let c = unsafe { core::ffi::CStr::from_ptr(s.get_c(b"B").unwrap()) };
        assert_eq!(c.to_bytes(), b"x=y");
    }

    #[test]
    fn proc_snapshot_sees_the_start_environment_not_later_changes() {
        // The test process was started with PATH (cargo sets it); a variable set afterwards
        // must not appear, because the snapshot reflects the initial environment.
        std::env::set_var("AMVGPU_SNAPSHOT_TEST_LATE", "1");
        let bytes = read_file(c"/proc/self/environ", usize::MAX).expect("readable in tests");
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

    #[test]
    fn config_file_fills_only_what_the_environment_lacks_and_names_bad_lines() {
        let mut records = b"HSA_CU_MASK=0:0-7\0".to_vec();
        let bad = merge_config_file(
            &mut records,
            b"# pod settings\r\n\nHSA_CU_MASK=0:8-15\nHIP_DEVICE_MEMORY_LIMIT=1g\r\nno equals\n=x\n  \n",
        );
        assert_eq!(bad, vec![BadLine { line: 5 }, BadLine { line: 6 }]);
        let s = Snapshot::from_records(records.leak());
        assert_eq!(s.get(b"HSA_CU_MASK"), Some(&b"0:0-7"[..]));
        assert_eq!(s.get(b"HIP_DEVICE_MEMORY_LIMIT"), Some(&b"1g"[..]));
    }

    #[test]
    fn ancestors_give_only_pod_settings_and_the_nearest_wins() {
        let mut records = b"PATH=/bin\0".to_vec();
        let parent = b"HIP_DEVICE_MEMORY_LIMIT_1=2g\0SECRET=x\0HSA_CU_MASK=0:0-7\0";
        let grandparent = b"HSA_CU_MASK=0:0-303\0ROCR_VISIBLE_DEVICES=3\0PATH=/evil\0";
        assert_eq!(merge_ancestor(&mut records, parent), 2);
        assert_eq!(merge_ancestor(&mut records, grandparent), 1);
        let s = Snapshot::from_records(records.leak());
        assert_eq!(s.get(b"HSA_CU_MASK"), Some(&b"0:0-7"[..]));
        assert_eq!(s.get(b"HIP_DEVICE_MEMORY_LIMIT_1"), Some(&b"2g"[..]));
        assert_eq!(s.get(b"ROCR_VISIBLE_DEVICES"), Some(&b"3"[..]));
        assert_eq!(s.get(b"SECRET"), None);
        assert_eq!(s.get(b"PATH"), Some(&b"/bin"[..]));
    }

    #[test]
    fn stat_and_status_parsing() {
        assert_eq!(parse_ppid(b"42 (a b) c) S 7 42 42 0"), Some(7));
        assert_eq!(parse_ppid(b"1 (init) S 0 1 1"), Some(0));
        assert_eq!(parse_ppid(b"garbage"), None);
        let status = b"Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t1\n";
        assert!(same_user(status, 1000));
        assert!(!same_user(status, 0));
        assert!(!same_user(b"Uid:\t1000\t0\t0\t0\n", 1000), "setuid parent");
        assert!(!same_user(b"Name:\tx\n", 1000));
    }

    #[test]
    fn the_parent_of_this_test_is_found() {
        // SAFETY: no preconditions.
        let (me, parent) = unsafe { (libc::getpid(), libc::getppid()) };
        assert_eq!(parent_of(me), Some(parent));
    }
}
