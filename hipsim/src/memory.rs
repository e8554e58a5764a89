//! Address space standing in for device memory.
//!
//! Device memory is anonymous `MAP_PRIVATE | MAP_NORESERVE` address space: untouched pages cost
//! nothing, so tests can "allocate" tens of GiB, while `hipMemcpy`/`hipMemset` really move bytes.

use hip_sys::sim::{LARGE_ALLOCATION_ALIGNMENT, MALLOC_GRANULARITY};
use std::ptr;

/// The alignment the simulator gives an allocation of `bytes` (already rounded).
pub fn alignment_for(bytes: usize) -> usize {
    if bytes >= LARGE_ALLOCATION_ALIGNMENT {
        LARGE_ALLOCATION_ALIGNMENT
    } else {
        MALLOC_GRANULARITY
    }
}

/// Maps `bytes` (a multiple of the page size, non-zero) with protection `prot`, aligned to
/// `align` (a power of two, at least a page). Returns the address or `None` if the kernel
/// refuses.
pub fn map_aligned(bytes: usize, align: usize, prot: libc::c_int) -> Option<usize> {
    let padded = bytes.checked_add(align - MALLOC_GRANULARITY.min(align))?;
    // SAFETY: an anonymous private mapping with a null hint cannot alias existing memory; the
    // result is checked against MAP_FAILED.
    let raw = unsafe {
        libc::mmap(
            ptr::null_mut(),
            padded,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let start = raw as usize;
    let aligned = (start + align - 1) & !(align - 1);
    let head = aligned - start;
    let tail = padded - head - bytes;
    if head > 0 {
        unmap(start, head);
    }
    if tail > 0 {
        unmap(aligned + bytes, tail);
    }
    Some(aligned)
}

/// Device memory for an allocation of `bytes` (rounded, non-zero).
pub fn map_device(bytes: usize) -> Option<usize> {
    map_aligned(
        bytes,
        alignment_for(bytes),
        libc::PROT_READ | libc::PROT_WRITE,
    )
}

/// Reserves `bytes` (a multiple of 2 MiB) of read-write address space, 2 MiB-aligned, for a
/// device's [`crate::arena::Arena`]; `None` if the kernel refuses.
pub fn map_reservation(bytes: usize) -> Option<usize> {
    let addr = map_aligned(
        bytes,
        LARGE_ALLOCATION_ALIGNMENT,
        libc::PROT_READ | libc::PROT_WRITE,
    )?;
    // Touching 4 KiB of simulated memory should cost 4 KiB of RAM, as with one mapping per
    // allocation, not a 2 MiB transparent huge page. Advisory: failure changes no semantics.
    // SAFETY: the range was just mapped by us and nothing else refers to it yet.
    unsafe { libc::madvise(addr as *mut libc::c_void, bytes, libc::MADV_NOHUGEPAGE) };
    Some(addr)
}

/// Whether the process's address space is capped (`RLIMIT_AS`, e.g. `ulimit -v`): then an arena
/// reservation of several times the VRAM would eat the budget that the program's own
/// allocations, and device allocations mapped one by one, are entitled to.
pub fn address_space_is_limited() -> bool {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the duration of the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
    rc != 0 || limit.rlim_cur != libc::RLIM_INFINITY
}

/// Drops the resident pages of `[addr, addr + bytes)` (they read as zeroes afterwards) while
/// keeping the address space mapped.
pub fn discard(addr: usize, bytes: usize) {
    // SAFETY: callers pass a page-aligned range inside an arena reservation whose block is no
    // longer handed out to anyone, so discarding its contents loses nothing anyone may read.
    let rc = unsafe { libc::madvise(addr as *mut libc::c_void, bytes, libc::MADV_DONTNEED) };
    debug_assert_eq!(rc, 0, "MADV_DONTNEED of an arena range failed");
}

/// Unmaps a range this module mapped.
pub fn unmap(addr: usize, bytes: usize) {
    // SAFETY: callers pass a page-aligned range that this module mapped and that nothing
    // references any more (the registry entry owning it was removed first).
    let rc = unsafe { libc::munmap(addr as *mut libc::c_void, bytes) };
    debug_assert_eq!(rc, 0, "munmap of a range hipsim mapped failed");
}

/// Replaces `[addr, addr + bytes)` inside a VMM reservation by inaccessible address space again.
pub fn reset_to_reserved(addr: usize, bytes: usize) -> bool {
    // SAFETY: MAP_FIXED over a range that lies inside a reservation hipsim made (the caller
    // checked), so no memory of anyone else is replaced.
    let raw = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            bytes,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    raw != libc::MAP_FAILED
}

/// Maps `bytes` of the memfd `fd` at `offset` over `addr` (inside a reservation), inaccessible
/// until `hipMemSetAccess`.
pub fn map_handle_at(addr: usize, bytes: usize, fd: libc::c_int, offset: usize) -> bool {
    // SAFETY: MAP_FIXED over a range inside a hipsim reservation that holds no other mapping
    // (the caller checked); fd is a live memfd of at least offset + bytes bytes.
    let raw = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            bytes,
            libc::PROT_NONE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            offset as libc::off_t,
        )
    };
    raw != libc::MAP_FAILED
}

/// Changes the protection of a mapped VMM range.
pub fn protect(addr: usize, bytes: usize, prot: libc::c_int) -> bool {
    // SAFETY: the range is a VMM mapping hipsim made (the caller checked).
    unsafe { libc::mprotect(addr as *mut libc::c_void, bytes, prot) == 0 }
}

/// A memfd of `bytes` bytes backing one VMM physical allocation.
pub fn create_memfd(bytes: usize) -> Option<libc::c_int> {
    // SAFETY: the name is a NUL-terminated literal; the fd is checked.
    let fd = unsafe { libc::memfd_create(c"hipsim-vmm".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is the memfd just created.
    if unsafe { libc::ftruncate(fd, bytes as libc::off_t) } != 0 {
        close_fd(fd);
        return None;
    }
    Some(fd)
}

pub fn close_fd(fd: libc::c_int) {
    // SAFETY: fd is a memfd hipsim created and owns; it is closed exactly once.
    unsafe { libc::close(fd) };
}
