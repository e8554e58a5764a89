//! Redirects the definitions of wrapped functions to their wrappers, in the defining object's
//! own dynamic symbol table.
//!
//! `la_objopen` runs after the loader has mapped an object and before anything is relocated
//! against it. For the HIP runtime (and libc's `getenv`/`secure_getenv`), this module
//! rewrites `st_value` of every `.dynsym` entry of a wrapped name so that `l_addr + st_value`
//! is the wrapper's address. From then on every symbol lookup the loader does for that name
//! resolves to the wrapper, whoever asks and however: a lazy PLT call, `-z now`,
//! `LD_BIND_NOW`, `-fno-plt` GOT slots, a function-pointer table in data, `dlsym`, `dlvsym`,
//! a library `dlopen`ed later, on every glibc from 2.17 on. The real address is remembered
//! first; the wrappers call it.
//!
//! Why not `la_symbind64`: on glibc 2.35+ the mere presence of `la_symbind64` in any audit
//! module makes the loader allocate and fill a `reloc_result` record for every PLT slot of
//! every object and route every first lazy call through the audit path (measured on 2.36: a
//! 10-line module defining only `la_symbind64` makes a program with 20,000 lazy bindings
//! start 45-60 % slower, with ~320 extra page faults; the same module without it costs
//! nothing measurable). Redirecting the definition costs a few page writes per process and
//! nothing per binding.
//!
//! The runtime's references to its own exports (a pitched allocation calling `hipMalloc`
//! through its PLT) would now also reach the wrappers and be counted twice; those slots are
//! put back to the real functions once the runtime is relocated ([`crate::got::fix_own_slots`],
//! from `la_preinit`, later loader events, and the first wrapper call).
//!
//! Writing: the entries are in a read-only segment (a private file mapping), so the pages
//! holding them are made writable for the writes and given back their segment's protection
//! right after; copy-on-write makes the change private to this process. Nothing here
//! allocates or locks: it runs in a loader callback. If `mprotect` refuses (a W^X policy and
//! a runtime whose `.dynsym` lies in an executable segment), nothing is rewritten and the hook
//! falls back to patching the program's relocation slots ([`crate::got::patch_object`]).

use crate::audit::LinkMap;
use crate::elf::{DynamicTables, Elf64Sym};
use crate::got::ProgramHeaders;

/// Most names redirected in one object.
const MAX_NAMES: usize = 64;

/// Most entries rewritten in one object (every wrapped name, a few versions each; the array
/// lives on the loader's stack, so it is kept small).
const MAX_ENTRIES: usize = 128;

/// Why an object's definitions could not be redirected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No dynamic symbol or hash table.
    NoTables,
    /// No program headers to learn the pages' protection from.
    NoHeaders,
    /// More names than [`MAX_NAMES`] or matching entries than [`MAX_ENTRIES`].
    TooMany,
    /// The entries are not inside one loaded segment.
    Outside,
    /// `mprotect` refused to make the pages writable (e.g. an SELinux policy); holds `errno`.
    Protect(i32),
}

impl Failure {
    /// A short reason for the error log.
    pub fn describe(self) -> &'static str {
        match self {
            Failure::NoTables => "it has no dynamic symbol or hash table",
            Failure::NoHeaders => "its program headers cannot be found",
            Failure::TooMany => "it defines too many versions of the wrapped names",
            Failure::Outside => "its symbol table is not inside a loaded segment",
            Failure::Protect(_) => "mprotect refused to make its symbol table writable",
        }
    }
}

/// The reason with, for a refused `mprotect`, the system's error (e.g. "Permission denied (os
/// error 13)" under a W^X policy).
impl core::fmt::Display for Failure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Failure::Protect(errno) => write!(
                f,
                "{}: {}",
                self.describe(),
                std::io::Error::from_raw_os_error(errno)
            ),
            other => f.write_str(other.describe()),
        }
    }
}

/// Redirects every definition in `map` of the names `names(i)` (for `i` in `0..count`) to
/// the wrapper `wrapper(i)` and reports each real address as `record(i, real)`. Returns how many entries were
/// rewritten; a name the object does not define is skipped. All or nothing: on `Err`, no
/// entry was changed and no real address recorded.
///
/// For each name the real function is its default version's definition (or, if it only has
/// hidden versions, the first one found); only entries pointing at that same function are
/// redirected, so a version with a different implementation keeps its own address.
///
/// # Safety
/// `map` must be a live link map handed to `la_objopen` (mapped, not yet relocated against),
/// and no other thread may be reading the object's symbol table concurrently in a way that
/// cannot tolerate either value (the loader reads it under its own lock).
pub unsafe fn redirect(
    map: &LinkMap,
    count: usize,
    names: impl Fn(usize) -> &'static [u8],
    wrapper: impl Fn(usize) -> usize,
    mut record: impl FnMut(usize, usize),
) -> Result<usize, Failure> {
    let base = map.l_addr;
    // SAFETY: caller guarantee: l_ld is the live object's dynamic section.
    let tables = unsafe { DynamicTables::read(base, map.l_ld) }.ok_or(Failure::NoTables)?;
    if count > MAX_NAMES {
        return Err(Failure::TooMany);
    }
    let mut entries: [(*mut Elf64Sym, u64); MAX_ENTRIES] =
        [(core::ptr::null_mut(), 0); MAX_ENTRIES];
    let mut reals = [0usize; MAX_NAMES];
    let mut used = 0;
    let mut overflow = false;
    for (i, real_of_name) in reals.iter_mut().enumerate().take(count) {
        let name = names(i);
        let mut real = 0usize;
        // SAFETY: the tables belong to the live object (caller guarantee).
        unsafe {
            tables.for_each_definition(name, |sym, default| {
                // SAFETY: `sym` points into the object's symbol table.
                let addr = base.wrapping_add((*sym).st_value as usize);
                if default || real == 0 {
                    real = addr;
                }
            });
        }
        if real == 0 {
            continue;
        }
        *real_of_name = real;
        let wrapper = wrapper(i);
        // SAFETY: as above.
        unsafe {
            tables.for_each_definition(name, |sym, _| {
                // SAFETY: `sym` points into the object's symbol table.
                if base.wrapping_add((*sym).st_value as usize) != real {
                    return;
                }
                if used == MAX_ENTRIES {
                    overflow = true;
                    return;
                }
                // l_addr + st_value == wrapper, in the loader's wrapping arithmetic.
                entries[used] = (sym, wrapper.wrapping_sub(base) as u64);
                used += 1;
            });
        }
        if overflow {
            return Err(Failure::TooMany);
        }
    }
    if used == 0 {
        return Ok(0);
    }
    // SAFETY: caller guarantee (live object).
    let headers = unsafe { ProgramHeaders::of(map, false) }.ok_or(Failure::NoHeaders)?;
    let field = |sym: *mut Elf64Sym| {
        // SAFETY: only the address of the field is computed, inside the entry.
        unsafe { core::ptr::addr_of_mut!((*sym).st_value) as usize }
    };
    let low = entries[..used]
        .iter()
        .map(|&(s, _)| field(s))
        .min()
        .unwrap_or(0);
    let high = entries[..used]
        .iter()
        .map(|&(s, _)| field(s) + 8)
        .max()
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let start = low & !(page - 1);
    let end = (high + page - 1) & !(page - 1);
    let prot = headers
        .protection(start, end, page)
        .ok_or(Failure::Outside)?;
    let (seg_start, seg_end) = headers.extent();
    if low < seg_start || high > seg_end {
        return Err(Failure::Outside);
    }
    let writable = prot & libc::PROT_WRITE != 0;
    if !writable {
        // SAFETY: [start, end) are pages of this object's loaded segments (checked above);
        // adding PROT_WRITE to a private file mapping only enables copy-on-write.
        if unsafe { libc::mprotect(start as *mut _, end - start, prot | libc::PROT_WRITE) } != 0 {
            // SAFETY: reading errno right after the failed call.
            return Err(Failure::Protect(unsafe { *libc::__errno_location() }));
        }
    }
    for &(sym, value) in &entries[..used] {
        // SAFETY: `sym` is an entry of the object's symbol table, writable now. The loader
        // reads `st_value` only under its lock, which the caller (a loader callback) holds.
        unsafe { core::ptr::addr_of_mut!((*sym).st_value).write_volatile(value) };
    }
    if !writable {
        // SAFETY: restores the protection the loader gave these pages. If this fails the
        // pages stay writable, which changes no behaviour.
        unsafe { libc::mprotect(start as *mut _, end - start, prot) };
    }
    for (i, &real) in reals.iter().enumerate().take(count) {
        if real != 0 {
            record(i, real);
        }
    }
    Ok(used)
}
