//! `Ledger`: the region (a shared file mapping or process-private memory), the
//! wipe-on-fork page, file creation and validation, and read-only snapshots.

use crate::core::{dirt, Core, ProcState, Refused};
use crate::layout::*;
use crate::os::{self, Fd, Mapping, OsEnv};
use crate::sync::Ordering::*;
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Why a ledger file cannot be used. Always names the file.
#[derive(Debug)]
pub struct LedgerError {
    path: PathBuf,
    reason: Reason,
}

/// What is wrong with a ledger file.
#[derive(Debug)]
#[non_exhaustive]
pub enum Reason {
    /// A system call failed; `action` says what we were doing.
    Io {
        action: &'static str,
        error: io::Error,
    },
    NotRegularFile {
        file_type: &'static str,
    },
    BadMagic {
        found: [u8; 8],
    },
    UnsupportedVersion {
        found: u32,
        supported: u32,
    },
    /// Shorter than its layout requires.
    Truncated {
        size: u64,
        expected: u64,
    },
    /// A header field disagrees with this build's layout.
    LayoutMismatch {
        field: &'static str,
        found: u64,
        expected: u64,
    },
    /// A slot's contents are impossible (e.g. a free slot holding usage).
    Corrupt {
        slot: usize,
        what: &'static str,
    },
    /// Created in another PID namespace: its pids mean nothing here, and
    /// reclaiming by them would free live processes' usage.
    ForeignPidNamespace {
        file: u64,
        ours: u64,
    },
}

impl LedgerError {
    fn new(path: &Path, reason: Reason) -> LedgerError {
        LedgerError {
            path: path.to_path_buf(),
            reason,
        }
    }
    fn io(path: &Path, action: &'static str, error: io::Error) -> LedgerError {
        Self::new(path, Reason::Io { action, error })
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn reason(&self) -> &Reason {
        &self.reason
    }
}

impl fmt::Display for LedgerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ledger file {}: ", self.path.display())?;
        match &self.reason {
            Reason::Io { action, error } => write!(f, "cannot {action}: {error}"),
            Reason::NotRegularFile { file_type } => {
                write!(f, "is a {file_type}, not a regular file")
            }
            Reason::BadMagic { found } => write!(
                f,
                "not a ledger file (starts with {:?}, expected {:?})",
                String::from_utf8_lossy(found),
                String::from_utf8_lossy(&MAGIC)
            ),
            Reason::UnsupportedVersion { found, supported } => write!(
                f,
                "layout version {found} is not supported (this build reads version {supported})"
            ),
            Reason::Truncated { size, expected } => {
                write!(f, "truncated: {size} bytes, the layout needs {expected}")
            }
            Reason::LayoutMismatch {
                field,
                found,
                expected,
            } => write!(
                f,
                "incompatible layout: header field {field} is {found}, this build expects {expected}"
            ),
            Reason::Corrupt { slot, what } => write!(f, "corrupt: slot {slot} {what}"),
            Reason::ForeignPidNamespace { file, ours } => write!(
                f,
                "created in PID namespace {file}, this process is in {ours}; \
                 its pids cannot be checked from here"
            ),
        }
    }
}

impl std::error::Error for LedgerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.reason {
            Reason::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Where the region's memory comes from.
enum Backing {
    Mapped(Mapping),
    Heap {
        ptr: *mut u8,
        layout: std::alloc::Layout,
    },
}

impl Backing {
    fn ptr(&self) -> *mut u8 {
        match self {
            Backing::Mapped(m) => m.ptr,
            Backing::Heap { ptr, .. } => *ptr,
        }
    }
    fn heap_zeroed(layout: std::alloc::Layout) -> Backing {
        // SAFETY: `layout` has non-zero size (callers pass whole pages).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Backing::Heap { ptr, layout }
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        if let Backing::Heap { ptr, layout } = self {
            // SAFETY: allocated by `alloc_zeroed` with this very layout, freed once.
            unsafe { std::alloc::dealloc(*ptr, *layout) };
        }
        // `Mapped` unmaps itself.
    }
}

/// Device-memory accounting for one process, shared with every other process
/// that opened the same ledger file. See the crate documentation.
pub struct Ledger {
    header: *const Header,
    slots: *const Slot,
    slot_count: usize,
    me: *const ProcState,
    pid_check: bool,
    shared: bool,
    path: Option<PathBuf>,
    // Declared last: dropped after `Drop::drop` used the pointers above.
    _region: Backing,
    _me_page: Backing,
}

// SAFETY: every field reached through the raw pointers is an atomic, and the
// pointed-to memory lives as long as the `Ledger` (owned by `_region` and
// `_me_page`), so sharing and sending between threads is sound.
unsafe impl Send for Ledger {}
// SAFETY: as above: all access is through atomics.
unsafe impl Sync for Ledger {}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("shared", &self.shared)
            .field("path", &self.path)
            .field("slots", &self.slot_count)
            .field(
                "fork_detection",
                &if self.pid_check {
                    "getpid"
                } else {
                    "wipe-on-fork"
                },
            )
            .finish()
    }
}

/// The private page holding `ProcState`: wipe-on-fork if the kernel allows,
/// otherwise heap memory and a pid comparison on each call.
fn proc_page() -> (Backing, bool) {
    // Populated: the claim at open writes it at once.
    if let Ok(map) = Mapping::anonymous_populated(4096) {
        if map.wipe_on_fork() {
            return (Backing::Mapped(map), false);
        }
    }
    let layout = std::alloc::Layout::new::<ProcState>();
    (Backing::heap_zeroed(layout), true)
}

impl Ledger {
    fn from_region(
        region: Backing,
        slot_count: usize,
        shared: bool,
        path: Option<PathBuf>,
    ) -> Ledger {
        let (me_page, pid_check) = proc_page();
        let base = region.ptr();
        Ledger {
            header: base.cast(),
            // SAFETY: the region is HEADER_SIZE + slot_count * SLOT_SIZE bytes,
            // so the slot array starts inside it.
            slots: unsafe { base.add(HEADER_SIZE) }.cast(),
            slot_count,
            me: me_page.ptr().cast(),
            pid_check,
            shared,
            path,
            _region: region,
            _me_page: me_page,
        }
    }

    #[inline]
    fn core(&self) -> Core<'_, OsEnv> {
        Core {
            // SAFETY: `header` points at the start of the live, page-aligned
            // region owned by `self`; `Header` is all atomics, for which any bit
            // pattern (including another process's writes) is a valid value.
            header: unsafe { &*self.header },
            // SAFETY: `slot_count` slots of `SLOT_SIZE` bytes follow the header
            // inside the same region (checked size), 64-byte aligned; atomics only.
            slots: unsafe { std::slice::from_raw_parts(self.slots, self.slot_count) },
            // SAFETY: `me` points at this ledger's private, zero-initialised page,
            // alive as long as `self`; `ProcState` is a single atomic.
            me: unsafe { &*self.me },
            env: OsEnv,
            pid_check: self.pid_check,
            local_only: !self.shared,
        }
    }

    /// Maps (creating it if absent) the shared ledger file at `path`.
    ///
    /// Any failure — directory missing, read-only, not a regular file, wrong
    /// magic, layout version or size, truncated, garbage — is an `Err` naming
    /// the path and the reason. This process's slot is claimed here (a slot
    /// above the high-water mark is checked only when claimed; see the crate
    /// docs). The file is created with mode 0600 by writing
    /// a complete header into a private temporary file in the same directory
    /// and hard-linking it into place, so a concurrent opener sees either no
    /// file or a complete one, and two creators end up on the same file.
    pub fn open_shared(path: &Path) -> Result<Ledger, LedgerError> {
        let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
            LedgerError::io(
                path,
                "use the path",
                io::Error::new(io::ErrorKind::InvalidInput, "it contains a NUL byte"),
            )
        })?;
        // Bounded: each round either opens a file or creates one; a file that
        // vanishes between the two (someone deleting it) gets a few chances.
        let mut last_error = None;
        for _ in 0..4 {
            match os::open(&c_path, libc::O_RDWR | libc::O_NOCTTY | libc::O_NONBLOCK, 0) {
                Ok(fd) => {
                    let mapping = validate_and_map(path, &fd, true)?;
                    let ledger = Ledger::from_region(
                        Backing::Mapped(mapping),
                        MAX_SLOTS,
                        true,
                        Some(path.to_path_buf()),
                    );
                    // Claim now, so that a dirty slot above the high-water mark
                    // (which `validate_and_map` did not look at) is refused here,
                    // like garbage below it. No slot free (every one held by a
                    // live process) is not an error: `reserve` retries later.
                    if let Err(dirty) = ledger.core().claim_checked() {
                        return Err(LedgerError::new(
                            path,
                            Reason::Corrupt {
                                slot: dirty.slot,
                                what: dirty.what,
                            },
                        ));
                    }
                    return Ok(ledger);
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    match create_file(path) {
                        Ok(()) | Err(CreateError::Exists) => continue,
                        Err(CreateError::Failed(e)) => last_error = Some(e),
                    }
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
                    return Err(LedgerError::new(
                        path,
                        Reason::NotRegularFile {
                            file_type: "directory",
                        },
                    ))
                }
                Err(e) => return Err(LedgerError::io(path, "open for reading and writing", e)),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            LedgerError::io(
                path,
                "open",
                io::Error::new(io::ErrorKind::NotFound, "it keeps disappearing"),
            )
        }))
    }

    /// Process-private accounting with the same semantics (used when the
    /// shared file is unusable). A fork child starts with zero usage.
    pub fn process_local() -> Ledger {
        const SIZE: usize = HEADER_SIZE + LOCAL_SLOTS * SLOT_SIZE;
        const LOCAL_LAYOUT: std::alloc::Layout =
            match std::alloc::Layout::from_size_align(SIZE, 4096) {
                Ok(layout) => layout,
                Err(_) => panic!("process-local region layout"),
            };
        let size = SIZE;
        let region = match Mapping::anonymous(size) {
            Ok(map) => Backing::Mapped(map),
            Err(_) => Backing::heap_zeroed(LOCAL_LAYOUT),
        };
        let ledger = Ledger::from_region(region, LOCAL_SLOTS, false, None);
        init_header(ledger.core().header, LOCAL_SLOTS);
        ledger
    }

    /// Reserves `bytes` on `device` for this process before the real
    /// allocation. `Ok` only if the container's usage on that device (every
    /// live process sharing the ledger) stays `<= limit`; never overshoots,
    /// even for an instant. Dead processes' slots are reclaimed before
    /// refusing. A zero-byte reservation always succeeds; an out-of-range
    /// device or a sum that would overflow u64 is refused.
    #[inline]
    pub fn reserve(&self, device: u32, bytes: u64, limit: u64) -> Result<(), Refused> {
        self.core().reserve(device, bytes, limit)
    }

    /// Gives back `bytes` reserved on `device`. Releasing more than this
    /// process holds clamps its usage to zero.
    #[inline]
    pub fn release(&self, device: u32, bytes: u64) {
        self.core().release(device, bytes)
    }

    /// Bytes in use on `device` by every process sharing this ledger,
    /// including requests in flight at this instant (see the crate docs).
    pub fn container_usage(&self, device: u32) -> u64 {
        self.core().container_usage(device)
    }

    /// Bytes this process holds on `device` (0 after a fork, in the child).
    pub fn process_usage(&self, device: u32) -> u64 {
        self.core().process_usage(device)
    }

    /// Records this process's configured limit for `device` (shown by
    /// `amvgpu status`; `reserve` also records the limit it is given).
    pub fn publish_limit(&self, device: u32, limit: u64) {
        self.core().publish_limit(device, limit)
    }

    /// Detects a fork: the child gets its own fresh slot on its next
    /// reservation and never touches its parent's. Called by `reserve` and
    /// `release`; costs one load (or one `getpid` on kernels before 4.14).
    #[inline]
    pub fn check_fork(&self) {
        self.core().check_fork()
    }

    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// The file this ledger maps, if shared.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Frees the slots of processes that no longer exist; returns how many.
    /// `reserve` does this by itself before refusing.
    pub fn reclaim_dead(&self) -> usize {
        self.core().reclaim_dead()
    }

    /// Every occupied slot and the container totals and peaks per device.
    pub fn snapshot(&self) -> Snapshot {
        let core = self.core();
        core.settle();
        snapshot_of(core.header, core.slots, self.path.clone(), self.shared)
    }
}

impl Drop for Ledger {
    /// The process is done accounting through this instance: its slot is freed
    /// (and with it whatever usage it still recorded).
    fn drop(&mut self) {
        self.core().release_own_slot();
    }
}

/// Fills a fresh process-local header (the file path writes `header_bytes`).
fn init_header(header: &Header, slots: usize) {
    let creator = header_bytes(slots);
    for (i, word) in header.creator.iter().enumerate() {
        let at = 0x40 + i * 8;
        word.store(read_u64(&creator, at), Relaxed);
    }
    header.magic.store(u64::from_ne_bytes(MAGIC), Relaxed);
    header.layout_version.store(LAYOUT_VERSION, Relaxed);
    header.header_size.store(HEADER_SIZE as u32, Relaxed);
    header
        .total_size
        .store((HEADER_SIZE + slots * SLOT_SIZE) as u64, Relaxed);
    header.max_slots.store(slots as u32, Relaxed);
    header.max_devices.store(MAX_DEVICES as u32, Relaxed);
    header.slot_size.store(SLOT_SIZE as u32, Relaxed);
    header.creator_pid.store(os::getpid(), Relaxed);
    header.creator_uid.store(os::geteuid(), Relaxed);
    header.created_unix_secs.store(os::now_unix_secs(), Relaxed);
    header.pid_namespace.store(os::pid_namespace(), Relaxed);
}

/// The header page as written into a new file.
fn header_bytes(slots: usize) -> [u8; HEADER_SIZE] {
    let mut page = [0u8; HEADER_SIZE];
    let mut put =
        |offset: usize, bytes: &[u8]| page[offset..offset + bytes.len()].copy_from_slice(bytes);
    put(0x00, &MAGIC);
    put(0x08, &LAYOUT_VERSION.to_ne_bytes());
    put(0x0c, &(HEADER_SIZE as u32).to_ne_bytes());
    put(
        0x10,
        &((HEADER_SIZE + slots * SLOT_SIZE) as u64).to_ne_bytes(),
    );
    put(0x18, &(slots as u32).to_ne_bytes());
    put(0x1c, &(MAX_DEVICES as u32).to_ne_bytes());
    put(0x20, &(SLOT_SIZE as u32).to_ne_bytes());
    put(0x24, &os::getpid().to_ne_bytes());
    put(0x28, &os::geteuid().to_ne_bytes());
    put(0x30, &os::now_unix_secs().to_ne_bytes());
    put(0x38, &os::pid_namespace().to_ne_bytes());
    let creator = CREATOR.as_bytes();
    put(0x40, &creator[..creator.len().min(63)]);
    page
}

enum CreateError {
    /// Another process linked its file first: open that one.
    Exists,
    Failed(LedgerError),
}

fn create_file(path: &Path) -> Result<(), CreateError> {
    let fail = |action, e| CreateError::Failed(LedgerError::io(path, action, e));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.as_bytes()).unwrap_or(b"ledger");
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let unique = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut tmp_name = Vec::with_capacity(name.len() + 48);
    tmp_name.push(b'.');
    tmp_name.extend_from_slice(name);
    tmp_name.extend_from_slice(format!(".{}.{}.tmp", os::getpid(), unique).as_bytes());
    let tmp = dir.join(std::ffi::OsStr::from_bytes(&tmp_name));
    let (Ok(c_tmp), Ok(c_path)) = (
        CString::new(tmp.as_os_str().as_bytes()),
        CString::new(path.as_os_str().as_bytes()),
    ) else {
        return Err(fail(
            "use the path",
            io::Error::new(io::ErrorKind::InvalidInput, "it contains a NUL byte"),
        ));
    };
    let fd = os::open(&c_tmp, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600)
        .map_err(|e| fail("create a temporary file beside it", e))?;
    let unlink_tmp = || {
        // SAFETY: `c_tmp` is NUL-terminated; removing our own temporary file.
        unsafe { libc::unlink(c_tmp.as_ptr()) };
    };
    let written = (|| {
        // SAFETY: ftruncate on a descriptor we own; extends with zeroes.
        if unsafe { libc::ftruncate(fd.0, FILE_SIZE as libc::off_t) } != 0 {
            return Err(fail("size the new file", io::Error::last_os_error()));
        }
        os::pwrite_full(&fd, &header_bytes(MAX_SLOTS), 0)
            .map_err(|e| fail("write the new file's header", e))
    })();
    drop(fd);
    if let Err(e) = written {
        unlink_tmp();
        return Err(e);
    }
    // link(2) never replaces an existing name: exactly one creator wins and
    // everyone else opens the winner's complete file.
    // SAFETY: both paths are NUL-terminated.
    let rc = unsafe { libc::link(c_tmp.as_ptr(), c_path.as_ptr()) };
    let link_errno = os::errno();
    let result = if rc == 0 {
        Ok(())
    } else if link_errno == libc::EEXIST {
        Err(CreateError::Exists)
    } else if matches!(link_errno, libc::EPERM | libc::EOPNOTSUPP | libc::EMLINK) {
        // Filesystems without hard links: rename that refuses to replace.
        // SAFETY: renameat2(olddirfd, oldpath, newdirfd, newpath, flags) with
        // NUL-terminated paths; called through syscall to avoid a glibc 2.28 symbol.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                c_tmp.as_ptr(),
                libc::AT_FDCWD,
                c_path.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        match (rc, os::errno()) {
            (0, _) => return Ok(()),
            (_, libc::EEXIST) => Err(CreateError::Exists),
            _ => Err(fail(
                "move the new file into place",
                io::Error::last_os_error(),
            )),
        }
    } else {
        Err(fail(
            "link the new file into place",
            io::Error::from_raw_os_error(link_errno),
        ))
    };
    unlink_tmp();
    result
}

fn file_type_name(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => "directory",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        libc::S_IFIFO => "FIFO",
        libc::S_IFSOCK => "socket",
        libc::S_IFLNK => "symbolic link",
        _ => "special file",
    }
}

fn read_u32(page: &[u8], offset: usize) -> u32 {
    u32::from_ne_bytes(page[offset..offset + 4].try_into().unwrap_or([0; 4]))
}

fn read_u64(page: &[u8], offset: usize) -> u64 {
    u64::from_ne_bytes(page[offset..offset + 8].try_into().unwrap_or([0; 8]))
}

/// Checks the file's type, size and header (read with `pread`, so a short
/// file cannot fault), then maps it and checks the slots' invariants.
fn validate_and_map(path: &Path, fd: &Fd, writable: bool) -> Result<Mapping, LedgerError> {
    let st = os::fstat(fd.0).map_err(|e| LedgerError::io(path, "stat", e))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(LedgerError::new(
            path,
            Reason::NotRegularFile {
                file_type: file_type_name(st.st_mode),
            },
        ));
    }
    let size = st.st_size.max(0) as u64;
    let mut page = [0u8; HEADER_SIZE];
    let got = os::pread_full(fd, &mut page, 0).map_err(|e| LedgerError::io(path, "read", e))?;
    let expected = FILE_SIZE as u64;
    if got < MAGIC.len() {
        return Err(LedgerError::new(path, Reason::Truncated { size, expected }));
    }
    if page[..8] != MAGIC {
        let mut found = [0u8; 8];
        found.copy_from_slice(&page[..8]);
        return Err(LedgerError::new(path, Reason::BadMagic { found }));
    }
    if got < 12 {
        return Err(LedgerError::new(path, Reason::Truncated { size, expected }));
    }
    let version = read_u32(&page, 0x08);
    if version != LAYOUT_VERSION {
        return Err(LedgerError::new(
            path,
            Reason::UnsupportedVersion {
                found: version,
                supported: LAYOUT_VERSION,
            },
        ));
    }
    if got < HEADER_SIZE {
        return Err(LedgerError::new(path, Reason::Truncated { size, expected }));
    }
    let checks: [(&'static str, u64, u64); 5] = [
        (
            "header_size",
            u64::from(read_u32(&page, 0x0c)),
            HEADER_SIZE as u64,
        ),
        (
            "max_slots",
            u64::from(read_u32(&page, 0x18)),
            MAX_SLOTS as u64,
        ),
        (
            "max_devices",
            u64::from(read_u32(&page, 0x1c)),
            MAX_DEVICES as u64,
        ),
        (
            "slot_size",
            u64::from(read_u32(&page, 0x20)),
            SLOT_SIZE as u64,
        ),
        ("total_size", read_u64(&page, 0x10), expected),
    ];
    for (field, found, expected) in checks {
        if found != expected {
            return Err(LedgerError::new(
                path,
                Reason::LayoutMismatch {
                    field,
                    found,
                    expected,
                },
            ));
        }
    }
    if size < expected {
        return Err(LedgerError::new(path, Reason::Truncated { size, expected }));
    }
    if size > expected {
        return Err(LedgerError::new(
            path,
            Reason::LayoutMismatch {
                field: "file size",
                found: size,
                expected,
            },
        ));
    }
    let high_water = u64::from(read_u32(&page, 0x80));
    if high_water > MAX_SLOTS as u64 {
        return Err(LedgerError::new(
            path,
            Reason::LayoutMismatch {
                field: "slot_high_water",
                found: high_water,
                expected: MAX_SLOTS as u64,
            },
        ));
    }
    let mapping =
        Mapping::shared(fd, FILE_SIZE, writable).map_err(|e| LedgerError::io(path, "map", e))?;
    // SAFETY: the mapping is FILE_SIZE bytes (size checked above), page
    // aligned, and holds a Header followed by MAX_SLOTS slots of atomics.
    let (header, slots) = unsafe {
        (
            &*mapping.ptr.cast::<Header>(),
            std::slice::from_raw_parts(mapping.ptr.add(HEADER_SIZE).cast::<Slot>(), MAX_SLOTS),
        )
    };
    // Only slots below the high-water mark take part in any sum; each one above
    // it is checked by the process that claims it (`Core::claim_checked`), so a
    // process start touches the pages of the slots in use, not all 210.
    let high = (header.slot_high_water.load(Acquire) as usize).min(MAX_SLOTS);
    check_slots(path, &slots[..high])?;
    if writable {
        adopt_pid_namespace(path, header, slots)?;
    }
    Ok(mapping)
}

/// Pids in the slots are only meaningful in the PID namespace the file was
/// made in. A file from another namespace is taken over if no slot is
/// occupied (e.g. a restarted container whose old processes all exited
/// cleanly); otherwise its owners cannot be checked from here, and judging
/// them dead by pid could free live processes' usage, so it is refused.
fn adopt_pid_namespace(path: &Path, header: &Header, slots: &[Slot]) -> Result<(), LedgerError> {
    let ours = os::pid_namespace();
    let file = header.pid_namespace.load(Acquire);
    if file == ours || file == 0 || ours == 0 {
        return Ok(());
    }
    let occupied = slots
        .iter()
        .any(|s| state::status(s.state.load(Acquire)) != state::FREE);
    if !occupied
        && header
            .pid_namespace
            .compare_exchange(file, ours, AcqRel, Acquire)
            .is_ok()
    {
        return Ok(());
    }
    Err(LedgerError::new(
        path,
        Reason::ForeignPidNamespace { file, ours },
    ))
}

/// A free slot never holds usage and never names a pid: anything else is
/// garbage that would distort every sum. Re-reading the state word after the
/// counters avoids blaming a slot that was claimed while we looked.
fn check_slots(path: &Path, slots: &[Slot]) -> Result<(), LedgerError> {
    for (index, slot) in slots.iter().enumerate() {
        let word = slot.state.load(Acquire);
        if state::status(word) != state::FREE {
            continue;
        }
        if let Some(what) = dirt(slot, word) {
            if slot.state.load(Acquire) == word {
                return Err(LedgerError::new(
                    path,
                    Reason::Corrupt { slot: index, what },
                ));
            }
        }
    }
    Ok(())
}

/// Who created a ledger file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creator {
    pub pid: u32,
    pub uid: u32,
    pub unix_secs: u64,
    /// Software name and version, e.g. `amvgpu-ledger 0.1.0`.
    pub software: String,
}

/// One occupied slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotSnapshot {
    pub index: usize,
    pub status: SlotStatus,
    /// The owner (for `Reclaiming`: the reclaiming process).
    pub pid: u32,
    /// `/proc/<pid>/stat` field 22 at claim time; 0 if unknown.
    pub start_time: u64,
    pub claimed_unix_secs: u64,
    /// Whether the owner still runs (pid exists, same start time, not a
    /// zombie). A dead owner's usage counts until someone reclaims the slot.
    pub alive: bool,
    pub used: [u64; MAX_DEVICES],
    pub peak: [u64; MAX_DEVICES],
    pub limit: [u64; MAX_DEVICES],
}

/// A read-only view of a ledger for tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub path: Option<PathBuf>,
    pub shared: bool,
    pub layout_version: u32,
    pub creator: Creator,
    pub slots: Vec<SlotSnapshot>,
    /// Sum of `used` over all slots, per device (what `reserve` compares).
    pub container_usage: [u64; MAX_DEVICES],
    /// Highest container usage ever admitted, per device.
    pub container_peak: [u64; MAX_DEVICES],
}

fn snapshot_of(header: &Header, slots: &[Slot], path: Option<PathBuf>, shared: bool) -> Snapshot {
    use crate::core::Env;
    let load_all = |a: &[crate::sync::AtomicU64; MAX_DEVICES]| {
        let mut out = [0u64; MAX_DEVICES];
        for (o, v) in out.iter_mut().zip(a) {
            *o = v.load(SeqCst);
        }
        out
    };
    let mut software = Vec::with_capacity(64);
    for word in &header.creator {
        software.extend_from_slice(&word.load(Relaxed).to_ne_bytes());
    }
    let end = software
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(software.len());
    let creator = Creator {
        pid: header.creator_pid.load(Relaxed),
        uid: header.creator_uid.load(Relaxed),
        unix_secs: header.created_unix_secs.load(Relaxed),
        software: String::from_utf8_lossy(&software[..end]).into_owned(),
    };
    let mut container_usage = [0u64; MAX_DEVICES];
    let mut out = Vec::new();
    let me = os::getpid();
    // Like every sum `reserve` makes: a slot above the mark was never claimed
    // (and never checked, see `validate_and_map`).
    let high = (header.slot_high_water.load(SeqCst) as usize).min(slots.len());
    for (index, slot) in slots[..high].iter().enumerate() {
        let used = load_all(&slot.used);
        for (total, u) in container_usage.iter_mut().zip(used) {
            *total = total.saturating_add(u);
        }
        let word = slot.state.load(Acquire);
        let status = state::decode(word);
        if status == SlotStatus::Free {
            continue;
        }
        let pid = state::pid(word);
        let start_time = slot.start_time.load(Relaxed);
        let alive = if shared {
            pid == me
                || !OsEnv.is_dead(
                    pid,
                    if status == SlotStatus::Live {
                        start_time
                    } else {
                        0
                    },
                )
        } else {
            pid == me
        };
        out.push(SlotSnapshot {
            index,
            status,
            pid,
            start_time,
            claimed_unix_secs: slot.claimed_unix_secs.load(Relaxed),
            alive,
            used,
            peak: load_all(&slot.peak),
            limit: load_all(&slot.limit),
        });
    }
    Snapshot {
        path,
        shared,
        layout_version: header.layout_version.load(Relaxed),
        creator,
        slots: out,
        container_usage,
        container_peak: load_all(&header.container_peak),
    }
}

/// Reads the ledger at `path` without writing anything (for `amvgpu status`).
/// Fails, naming the path, if it is missing or not a valid ledger.
pub fn open_readonly(path: &Path) -> Result<Snapshot, LedgerError> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        LedgerError::io(
            path,
            "use the path",
            io::Error::new(io::ErrorKind::InvalidInput, "it contains a NUL byte"),
        )
    })?;
    let fd = os::open(
        &c_path,
        libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK,
        0,
    )
    .map_err(|e| LedgerError::io(path, "open for reading", e))?;
    let mapping = validate_and_map(path, &fd, false)?;
    // SAFETY: `mapping` is FILE_SIZE bytes, page aligned, validated to hold a
    // Header and MAX_SLOTS slots; all fields are atomics and only loaded (the
    // mapping is read-only, so a store would fault, and none is made).
    let (header, slots) = unsafe {
        (
            &*mapping.ptr.cast::<Header>(),
            std::slice::from_raw_parts(mapping.ptr.add(HEADER_SIZE).cast::<Slot>(), MAX_SLOTS),
        )
    };
    Ok(snapshot_of(header, slots, Some(path.to_path_buf()), true))
}
