//! Thin, allocation-free wrappers over the few system calls the ledger needs.
//! Kept to symbols every glibc since 2.17 exports unversioned-compatible
//! (`fstat`/`stat` go through `syscall`, whose libc wrappers only became real
//! exported symbols in glibc 2.33), because the audit module must load on old
//! images.

use crate::core::Env;
use std::ffi::CStr;
use std::io;

pub(crate) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub(crate) fn getpid() -> u32 {
    // SAFETY: getpid has no preconditions and cannot fail.
    unsafe { libc::getpid() as u32 }
}

pub(crate) fn geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

pub(crate) fn now_unix_secs() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if rc == 0 {
        ts.tv_sec.max(0) as u64
    } else {
        0
    }
}

/// `struct stat` of an open descriptor.
pub(crate) fn fstat(fd: i32) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `struct stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // SAFETY: SYS_fstat takes (fd, struct stat *); on these architectures the
    // kernel's struct stat has glibc's layout, and `st` is valid and writable.
    let rc = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    // SAFETY: `st` is valid and writable for the call.
    let rc = unsafe { libc::fstat(fd, &mut st) } as libc::c_long;
    if rc == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `struct stat` of a path (following symlinks).
pub(crate) fn stat(path: &CStr) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `struct stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // SAFETY: SYS_newfstatat takes (dirfd, NUL-terminated path, struct stat *,
    // flags); `path` is NUL-terminated and `st` valid and writable.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_newfstatat,
            libc::AT_FDCWD,
            path.as_ptr(),
            &mut st as *mut libc::stat,
            0,
        )
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    // SAFETY: `path` is NUL-terminated and `st` valid and writable.
    let rc = unsafe { libc::stat(path.as_ptr(), &mut st) } as libc::c_long;
    if rc == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Inode of this process's PID namespace, 0 if `/proc` does not tell.
pub(crate) fn pid_namespace() -> u64 {
    stat(c"/proc/self/ns/pid").map_or(0, |st| st.st_ino)
}

/// A closed-on-drop file descriptor.
pub(crate) struct Fd(pub i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own this descriptor and close it exactly once.
        unsafe { libc::close(self.0) };
    }
}

pub(crate) fn open(path: &CStr, flags: i32, mode: libc::mode_t) -> io::Result<Fd> {
    // SAFETY: `path` is NUL-terminated; open has no other preconditions.
    let fd = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(Fd(fd))
    }
}

/// Reads up to `buf.len()` bytes at `offset`, retrying short reads; returns
/// the number read (less only at end of file).
pub(crate) fn pread_full(fd: &Fd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the destination is the unread tail of `buf`, valid and
        // writable for `buf.len() - done` bytes.
        let n = unsafe {
            libc::pread(
                fd.0,
                buf[done..].as_mut_ptr().cast(),
                buf.len() - done,
                (offset + done as u64) as libc::off_t,
            )
        };
        match n {
            0 => break,
            n if n > 0 => done += n as usize,
            _ if errno() == libc::EINTR => {}
            _ => return Err(io::Error::last_os_error()),
        }
    }
    Ok(done)
}

pub(crate) fn pwrite_full(fd: &Fd, buf: &[u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the source is the unwritten tail of `buf`, valid for reads.
        let n = unsafe {
            libc::pwrite(
                fd.0,
                buf[done..].as_ptr().cast(),
                buf.len() - done,
                (offset + done as u64) as libc::off_t,
            )
        };
        match n {
            n if n > 0 => done += n as usize,
            _ if errno() == libc::EINTR => {}
            0 => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            _ => return Err(io::Error::last_os_error()),
        }
    }
    Ok(())
}

/// An `mmap`ed region, unmapped on drop.
pub(crate) struct Mapping {
    pub ptr: *mut u8,
    pub len: usize,
}

impl Mapping {
    pub fn shared(fd: &Fd, len: usize, writable: bool) -> io::Result<Mapping> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh mapping at a kernel-chosen address aliases no Rust
        // object; `fd` is open and `len` is non-zero.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.0, 0) };
        Self::checked(ptr, len)
    }

    /// Private, zero-filled anonymous memory.
    pub fn anonymous(len: usize) -> io::Result<Mapping> {
        Self::anonymous_with(len, 0)
    }

    /// Like `anonymous`, with the pages allocated by the `mmap` call itself
    /// (`MAP_POPULATE`): for a page that is certainly written at once, this
    /// saves the two page faults (read, then copy-on-write) of first use.
    pub fn anonymous_populated(len: usize) -> io::Result<Mapping> {
        Self::anonymous_with(len, libc::MAP_POPULATE)
    }

    fn anonymous_with(len: usize, extra_flags: libc::c_int) -> io::Result<Mapping> {
        // SAFETY: a fresh anonymous mapping at a kernel-chosen address aliases
        // no Rust object.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | extra_flags,
                -1,
                0,
            )
        };
        Self::checked(ptr, len)
    }

    fn checked(ptr: *mut libc::c_void, len: usize) -> io::Result<Mapping> {
        if ptr == libc::MAP_FAILED {
            Err(io::Error::last_os_error())
        } else {
            Ok(Mapping {
                ptr: ptr.cast(),
                len,
            })
        }
    }

    /// Asks the kernel to hand a fork child zero pages here. False if the
    /// kernel (before 4.14) does not support it.
    pub fn wipe_on_fork(&self) -> bool {
        // SAFETY: the range is exactly this private anonymous mapping.
        unsafe { libc::madvise(self.ptr.cast(), self.len, libc::MADV_WIPEONFORK) == 0 }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the range is exactly the one mmap returned, and the owner
        // (`Ledger`/`Tracker` drop, which has `&mut`) holds no reference into it.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// `(state letter, start time)` from `/proc/<pid>/stat`; `pid` 0 = self.
/// `Err` carries the errno of the failed open/read.
pub(crate) fn proc_stat(pid: u32) -> Result<(u8, u64), i32> {
    let mut path = [0u8; 32];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut at = prefix.len();
    if pid == 0 {
        path[at..at + 4].copy_from_slice(b"self");
        at += 4;
    } else {
        let mut digits = [0u8; 10];
        let mut n = pid;
        let mut len = 0;
        loop {
            digits[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for i in 0..len {
            path[at + i] = digits[len - 1 - i];
        }
        at += len;
    }
    path[at..at + 5].copy_from_slice(b"/stat");
    // path[at + 5] is already the terminating NUL.
    let Ok(path) = CStr::from_bytes_until_nul(&path) else {
        return Err(libc::EINVAL);
    };
    let fd = open(path, libc::O_RDONLY, 0).map_err(|e| e.raw_os_error().unwrap_or(0))?;
    let mut buf = [0u8; 1024];
    let len = pread_full(&fd, &mut buf, 0).map_err(|e| e.raw_os_error().unwrap_or(0))?;
    parse_stat(&buf[..len]).ok_or(libc::EINVAL)
}

/// Field 3 (state) and field 22 (starttime) of a `/proc/<pid>/stat` line. The
/// command name (field 2) may contain spaces and parentheses, so fields are
/// counted from the last `)`.
pub(crate) fn parse_stat(line: &[u8]) -> Option<(u8, u64)> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let mut fields = line[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let state = *fields.next()?.first()?;
    // Fields 4..=21 are skipped; the 19th after the state is field 22.
    let start = fields.nth(18)?;
    let mut value: u64 = 0;
    for &b in start.iter().take_while(|b| b.is_ascii_digit()) {
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some((state, value))
}

/// The real operating system's view of processes.
#[derive(Clone, Copy)]
pub(crate) struct OsEnv;

impl Env for OsEnv {
    #[inline]
    fn current_pid(&self) -> u32 {
        getpid()
    }

    fn self_start_time(&self) -> u64 {
        proc_stat(0).map_or(0, |(_, start)| start)
    }

    fn is_dead(&self, pid: u32, start_time: u64) -> bool {
        if pid == 0 || pid > i32::MAX as u32 {
            // Not a pid any process can have: whoever wrote it is gone.
            return true;
        }
        // SAFETY: signal 0 only checks for existence and permission.
        if unsafe { libc::kill(pid as i32, 0) } != 0 && errno() == libc::ESRCH {
            return true;
        }
        match proc_stat(pid) {
            // Exited between kill and open.
            Err(libc::ENOENT) | Err(libc::ESRCH) => true,
            // No usable /proc: the pid exists, that is all we know.
            Err(_) => false,
            // Zombies and dying tasks already gave their device memory back.
            Ok((b'Z' | b'X' | b'x', _)) => true,
            Ok((_, started)) => start_time != 0 && started != start_time,
        }
    }

    fn is_gone(&self, pid: u32) -> bool {
        if pid == 0 || pid > i32::MAX as u32 {
            return true;
        }
        // SAFETY: signal 0 only checks for existence and permission.
        unsafe { libc::kill(pid as i32, 0) != 0 && errno() == libc::ESRCH }
    }

    fn now_unix_secs(&self) -> u64 {
        now_unix_secs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let line = b"4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 95 0 0 0 0 0 0 0 20 0 1 0 987654 123 4 rest\n";
        assert_eq!(parse_stat(line), Some((b'S', 987654)));
        assert_eq!(parse_stat(b"12 (x) R 1 2"), None);
        assert_eq!(parse_stat(b"no parenthesis at all"), None);
    }

    #[test]
    fn own_start_time_is_read_and_self_is_alive() {
        let (state, start) = proc_stat(0).expect("/proc/self/stat readable");
        assert!(start > 0);
        assert!(state == b'R' || state == b'S');
        assert_eq!(proc_stat(getpid()).map(|(_, s)| s), Ok(start));
        assert!(!OsEnv.is_dead(getpid(), start));
        // Same pid, different start time: a recycled pid.
        assert!(OsEnv.is_dead(getpid(), start + 1));
    }
}
