//! Rewrites relocation slots (GOT, PLT GOT, absolute data) of relocated objects.
//!
//! Two jobs, both walking an object's dynamic relocations once the loader has relocated it:
//!
//! - [`fix_own_slots`]: the runtime's references to its own exports. [`crate::redirect`]
//!   points the runtime's definitions at the wrappers before anything is relocated, so the
//!   runtime's own PLT/GOT slots for those names would reach the wrappers too and its internal
//!   calls would be counted as the program's. This puts the real functions back into them (a
//!   slot holding the wrapper, or a PLT slot still holding its lazy-binding stub). When: at
//!   `la_preinit` (all start-up objects are relocated then) and, for a runtime loaded by
//!   `dlopen`, at the first use of a real function or the next namespace event (glibc reports
//!   a `dlopen`'s `LA_ACT_CONSISTENT` *before* relocating it, seen on 2.36, so a slot still
//!   unrelocated makes the object stay pending).
//! - [`patch_object`]: the fallback when a definition could not be redirected (`mprotect`
//!   refused): every slot of a program object holding the real address of a wrapped function
//!   gets the wrapper, at `la_preinit` and later namespace events. Lazily bound PLT slots are
//!   not covered by it; the hook logs an error in that case.
//!
//! A slot that holds anything else (an interposer's function, say) is left alone, never
//! guessed at. Runs inside loader callbacks: no allocation, no lock, no logging. An object is
//! patched once; a fixed table remembers which (past its capacity objects are re-scanned,
//! which is only slower). Slots in the RELRO segment are made writable for the write and
//! read-only again afterwards; objects whose program headers cannot be located are skipped.

use crate::audit::LinkMap;
use crate::elf::{Elf64Dyn, Elf64Sym};
use crate::symbols;
use core::sync::atomic::{AtomicUsize, Ordering};

const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_JMPREL: i64 = 23;
const DT_RELACOUNT: i64 = 0x6fff_fff9;

#[cfg(target_arch = "x86_64")]
const PATCHABLE: [u32; 3] = [
    1, /* R_X86_64_64 */
    6, /* GLOB_DAT */
    7, /* JUMP_SLOT */
];
#[cfg(target_arch = "aarch64")]
const PATCHABLE: [u32; 3] = [
    257,  /* ABS64 */
    1025, /* GLOB_DAT */
    1026, /* JUMP_SLOT */
];

const PT_LOAD: u32 = 1;
const PT_PHDR: u32 = 6;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const PF_X: u32 = 1;
const PF_W: u32 = 2;
const PF_R: u32 = 4;

/// `Elf64_Rela`.
#[repr(C)]
struct Elf64Rela {
    r_offset: u64,
    r_info: u64,
    r_addend: i64,
}
const _: () = assert!(core::mem::size_of::<Elf64Rela>() == 24);

/// `Elf64_Phdr`.
#[repr(C)]
struct Elf64Phdr {
    p_type: u32,
    p_flags: u32,
    p_offset: u64,
    p_vaddr: u64,
    p_paddr: u64,
    p_filesz: u64,
    p_memsz: u64,
    p_align: u64,
}
const _: () = assert!(core::mem::size_of::<Elf64Phdr>() == 56);

/// Objects already patched (link-map addresses), open addressing, 0 = empty.
/// Small on purpose: with redirected definitions only the runtime and `libhsa-runtime64` are
/// marked (and, in the fallback, program objects). Every object's `la_objclose` probes it,
/// and a larger table costs one page fault per page probed in every process.
const DONE_SLOTS: usize = 256;
static DONE: [AtomicUsize; DONE_SLOTS] = [const { AtomicUsize::new(0) }; DONE_SLOTS];

/// Slots rewritten so far (reported in the debug log at initialisation).
pub static PATCHED: AtomicUsize = AtomicUsize::new(0);

fn home(map: usize) -> usize {
    (map >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) % DONE_SLOTS
}

/// True if `map` was completely patched before.
fn is_done(map: usize) -> bool {
    let mut slot = home(map);
    for _ in 0..DONE_SLOTS {
        match DONE[slot].load(Ordering::Acquire) {
            0 => return false,
            existing if existing == map => return true,
            _ => slot = (slot + 1) % DONE_SLOTS,
        }
    }
    false
}

/// Remembers that `map` is completely patched (when the table is full it is simply
/// re-scanned next time: idempotent, only slower).
fn mark_done(map: usize) {
    let mut slot = home(map);
    for _ in 0..DONE_SLOTS {
        match DONE[slot].compare_exchange(0, map, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(existing) if existing == map => return,
            Err(_) => slot = (slot + 1) % DONE_SLOTS,
        }
    }
}

/// Forgets a closed object, whose link-map address the loader may reuse for another.
pub fn forget(map: usize) {
    let mut slot = home(map);
    for _ in 0..DONE_SLOTS {
        match DONE[slot].load(Ordering::Acquire) {
            0 => return,
            existing if existing == map => {
                // A tombstone that matches no link map (they are 8-aligned) keeps probe
                // chains intact.
                DONE[slot].store(1, Ordering::Release);
                return;
            }
            _ => slot = (slot + 1) % DONE_SLOTS,
        }
    }
}

/// An object's program headers, as mapped: the table, its length and the load bias.
#[derive(Clone, Copy)]
pub(crate) struct ProgramHeaders {
    table: *const Elf64Phdr,
    count: usize,
    bias: usize,
}

impl ProgramHeaders {
    /// Finds the program headers of a loaded object.
    ///
    /// # Safety
    /// `map` must be a live link map.
    pub(crate) unsafe fn of(map: &LinkMap, is_main: bool) -> Option<ProgramHeaders> {
        // A PIE main program, like a shared object, has its ELF header at the load bias; only a
        // fixed-address (non-PIE) program, whose bias is 0, needs the kernel's AT_PHDR.
        let (table, count, bias) = if is_main && map.l_addr == 0 {
            // SAFETY: getauxval has no preconditions; the main program's headers are mapped.
            let (phdr, phnum) = unsafe {
                (
                    libc::getauxval(libc::AT_PHDR) as usize,
                    libc::getauxval(libc::AT_PHNUM) as usize,
                )
            };
            if phdr == 0 {
                return None;
            }
            let table = phdr as *const Elf64Phdr;
            // The load bias is where PT_PHDR's vaddr ended up.
            let own = (0..phnum).find_map(|i| {
                // SAFETY: AT_PHDR points to AT_PHNUM program headers (kernel ABI).
                let p = unsafe { &*table.add(i) };
                (p.p_type == PT_PHDR).then_some(p.p_vaddr as usize)
            });
            let bias = match own {
                Some(vaddr) => phdr.wrapping_sub(vaddr),
                None => map.l_addr,
            };
            (table, phnum, bias)
        } else {
            // Shared objects produced by the usual linkers map their ELF header at the load
            // bias (first PT_LOAD at vaddr 0, offset 0). Check the magic before trusting it.
            let header = map.l_addr as *const u8;
            if header.is_null() {
                return None;
            }
            // SAFETY: for such objects the first page at l_addr is the mapped ELF header; we
            // read the 64-byte Elf64_Ehdr only after checking the magic.
            let magic = unsafe { core::slice::from_raw_parts(header, 4) };
            if magic != b"\x7fELF" {
                return None;
            }
            // SAFETY: e_phoff at offset 32 (u64) and e_phnum at offset 56 (u16) of Elf64_Ehdr.
            let (phoff, phnum) = unsafe {
                (
                    header.add(32).cast::<u64>().read_unaligned() as usize,
                    header.add(56).cast::<u16>().read_unaligned() as usize,
                )
            };
            // SAFETY: the program header table lies in the first PT_LOAD, mapped at l_addr.
            let table = unsafe { header.add(phoff) }.cast::<Elf64Phdr>();
            (table, phnum, map.l_addr)
        };
        let headers = ProgramHeaders { table, count, bias };
        let has_load = headers.iter().any(|p| p.p_type == PT_LOAD);
        has_load.then_some(headers)
    }

    fn iter(&self) -> impl Iterator<Item = &Elf64Phdr> + '_ {
        // SAFETY: `table` has `count` mapped entries (see `of`).
        (0..self.count).map(move |i| unsafe { &*self.table.add(i) })
    }

    /// The RELRO range, `[start, end)` in absolute addresses, if the object has one.
    fn relro(&self) -> Option<(usize, usize)> {
        self.iter().find(|p| p.p_type == PT_GNU_RELRO).map(|p| {
            let start = self.bias.wrapping_add(p.p_vaddr as usize);
            (start, start.wrapping_add(p.p_memsz as usize))
        })
    }

    /// The address range the object's segments occupy.
    pub(crate) fn extent(&self) -> (usize, usize) {
        let (mut start, mut end) = (usize::MAX, 0usize);
        for p in self.iter().filter(|p| p.p_type == PT_LOAD) {
            start = start.min(p.p_vaddr as usize);
            end = end.max((p.p_vaddr as usize).saturating_add(p.p_memsz as usize));
        }
        if start > end {
            start = end;
        }
        (self.bias.wrapping_add(start), self.bias.wrapping_add(end))
    }

    /// The `PROT_*` bits the loader gave the pages of `[start, end)` (absolute, page-aligned):
    /// the union over every segment that touches them. `None` if no segment does.
    pub(crate) fn protection(&self, start: usize, end: usize, page: usize) -> Option<i32> {
        let mut prot = None;
        for p in self.iter().filter(|p| p.p_type == PT_LOAD) {
            let seg_start = self.bias.wrapping_add(p.p_vaddr as usize) & !(page - 1);
            let seg_end = self
                .bias
                .wrapping_add(p.p_vaddr as usize)
                .wrapping_add(p.p_memsz as usize);
            if seg_start < end && start < seg_end {
                let mut bits = 0;
                if p.p_flags & PF_R != 0 {
                    bits |= libc::PROT_READ;
                }
                if p.p_flags & PF_W != 0 {
                    bits |= libc::PROT_WRITE;
                }
                if p.p_flags & PF_X != 0 {
                    bits |= libc::PROT_EXEC;
                }
                prot = Some(prot.unwrap_or(0) | bits);
            }
        }
        prot
    }
}

/// The process id of the thread patching, 0 when none. A try-lock, never waited on: loader
/// callbacks must not block. A fork child that inherits it held (the patching thread does not
/// exist there) sees a foreign pid and takes it over.
static PATCHING: AtomicUsize = AtomicUsize::new(0);

/// Holds `PATCHING` until dropped.
struct Patching;

impl Patching {
    fn begin() -> Option<Patching> {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() } as usize;
        match PATCHING.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Some(Patching),
            Err(holder) if holder != me => PATCHING
                .compare_exchange(holder, me, Ordering::Acquire, Ordering::Relaxed)
                .ok()
                .map(|_| Patching),
            Err(_) => None,
        }
    }
}

impl Drop for Patching {
    fn drop(&mut self) {
        PATCHING.store(0, Ordering::Release);
    }
}

/// Calls `visit(kind, name, slot)` for every relocation of `map` (`DT_RELA` and `DT_JMPREL`)
/// that fills a pointer-sized slot with a named symbol's address and no addend: the only kind
/// a wrapped function can arrive through. `None` if the object has no usable tables.
///
/// # Safety
/// `map` must be a live link map.
unsafe fn for_each_symbol_slot(
    map: &LinkMap,
    mut visit: impl FnMut(u32, *const core::ffi::c_char, *mut usize),
) -> Option<()> {
    if map.l_ld.is_null() {
        return None;
    }
    let base = map.l_addr;
    let absolute = |ptr: u64| {
        let ptr = ptr as usize;
        if ptr < base {
            base.wrapping_add(ptr)
        } else {
            ptr
        }
    };
    let (mut strtab, mut symtab) = (0usize, 0usize);
    let (mut rela, mut relasz, mut jmprel, mut pltrelsz) = (0usize, 0usize, 0usize, 0usize);
    let mut relative = 0usize;
    let mut entry = map.l_ld as *const Elf64Dyn;
    loop {
        // SAFETY: the dynamic array is DT_NULL-terminated and mapped (live object).
        let (tag, val) = unsafe { ((*entry).d_tag, (*entry).d_val) };
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = absolute(val),
            DT_SYMTAB => symtab = absolute(val),
            DT_RELA => rela = absolute(val),
            DT_RELASZ => relasz = val as usize,
            DT_RELACOUNT => relative = val as usize,
            DT_JMPREL => jmprel = absolute(val),
            DT_PLTRELSZ => pltrelsz = val as usize,
            _ => {}
        }
        // SAFETY: not yet past DT_NULL.
        entry = unsafe { entry.add(1) };
    }
    if strtab == 0 || symtab == 0 {
        return None;
    }
    // DT_RELACOUNT: the leading R_*_RELATIVE entries of DT_RELA (linkers sort them first), which
    // name no symbol; skipping them spares a pass over thousands of entries in large objects.
    for (table, size, skip) in [(rela, relasz, relative), (jmprel, pltrelsz, 0)] {
        if table == 0 {
            continue;
        }
        let count = size / core::mem::size_of::<Elf64Rela>();
        for i in skip.min(count)..count {
            // SAFETY: `i` indexes the relocation table of DT_RELASZ / DT_PLTRELSZ bytes.
            let r = unsafe { &*(table as *const Elf64Rela).add(i) };
            let kind = (r.r_info & 0xffff_ffff) as u32;
            let sym_index = (r.r_info >> 32) as usize;
            if sym_index == 0 || r.r_addend != 0 || !PATCHABLE.contains(&kind) {
                continue;
            }
            // SAFETY: the relocation's symbol index is valid for this object's symtab.
            let sym = unsafe { &*(symtab as *const Elf64Sym).add(sym_index) };
            // SAFETY: st_name is an offset of a NUL-terminated string in the string table.
            let name = unsafe { (strtab as *const core::ffi::c_char).add(sym.st_name as usize) };
            visit(
                kind,
                name,
                base.wrapping_add(r.r_offset as usize) as *mut usize,
            );
        }
    }
    Some(())
}

/// What a relocation slot of a relocated (or relocating) object holds.
enum SlotValue {
    /// 0, or a lazy PLT slot still holding its small link-time value, to which the loader has
    /// not added the load bias yet: writing now would be undone (or corrupted).
    Unrelocated,
    /// A lazy PLT slot holding an address inside the object itself: its binding stub, or (in
    /// the runtime, whose own functions are inside it) a function already written there.
    LazyStub(usize),
    /// Any other address: what the slot is bound to.
    Bound(usize),
}

impl SlotValue {
    /// Reads `slot`, a relocation target of kind `kind` in an object loaded at `base` whose
    /// segments span `extent`.
    ///
    /// # Safety
    /// `slot` must be a mapped, pointer-sized relocation target.
    unsafe fn read(
        slot: *const usize,
        kind: u32,
        base: usize,
        extent: (usize, usize),
    ) -> SlotValue {
        // SAFETY: caller guarantee.
        let current = unsafe { slot.read_volatile() };
        let plt = kind == PATCHABLE[2];
        if current == 0 || (plt && current < base) {
            SlotValue::Unrelocated
        } else if plt && current >= extent.0 && current < extent.1 {
            SlotValue::LazyStub(current)
        } else {
            SlotValue::Bound(current)
        }
    }
}

/// Patches one object's relocations, once: every slot holding the real address of a wrapped
/// function, and every lazy PLT slot of a wrapped name that still holds its binding stub, gets
/// the wrapper (a lazy slot given its final address is what `LD_BIND_NOW` would have made of
/// it, so its first call never reaches the loader's resolver, which would bind the real
/// function). Only used when the runtime's definitions could not be redirected (see
/// [`crate::redirect`]). `relocating` says the loader is still relocating the object (its data
/// relocations are done, its PLT ones in progress).
///
/// # Safety
/// `map` must be a live link map of a program object (not the runtime, the loader or this
/// module) whose data relocations are done.
pub unsafe fn patch_object(map: *mut LinkMap, is_main: bool, relocating: bool) {
    if map.is_null() || is_done(map as usize) {
        return;
    }
    let Some(_patching) = Patching::begin() else {
        // Another thread is patching: two threads lifting and restoring the protection of one
        // RELRO page would fault each other's writes. This object is retried at its next
        // loader event.
        return;
    };
    let map_addr = map as usize;
    // SAFETY: caller guarantee.
    let map = unsafe { &*map };
    // SAFETY: caller guarantee (live object).
    let Some(headers) = (unsafe { ProgramHeaders::of(map, is_main) }) else {
        return;
    };
    // While the loader is still relocating the object its RELRO segment is writable (the loader
    // protects it afterwards), so slots are written directly; making a page read-only now
    // would fault the loader's own remaining writes.
    let relro = if relocating { None } else { headers.relro() };
    let (start, end) = headers.extent();
    let base = map.l_addr;
    // A wrapped slot still holding 0 (or a lazy slot its link-time value) was not relocated
    // yet (glibc reports a dlopen's LA_ACT_CONSISTENT before relocating it): look again at the
    // next loader event.
    let mut unrelocated = false;
    let mut writer = SlotWriter::new(relro);
    let visit = |kind, name, slot: *mut usize| {
        // SAFETY: `name` is NUL-terminated (from the object's string table).
        let Some(wrapped) = (unsafe { symbols::find_c(name) }) else {
            return;
        };
        // SAFETY: the slot is a pointer-sized relocation target inside the object.
        let wrapper = match unsafe { SlotValue::read(slot, kind, base, (start, end)) } {
            SlotValue::Unrelocated => {
                unrelocated = true;
                return;
            }
            SlotValue::LazyStub(_) => symbols::wrapper(wrapped),
            SlotValue::Bound(current) => symbols::wrapper_for_real(wrapped, current),
        };
        if let Some(wrapper) = wrapper {
            // SAFETY: the slot is inside this object's relocated data (see above).
            unsafe { writer.write(slot, wrapper) };
        }
    };
    // SAFETY: caller guarantee (live object).
    let walked = unsafe { for_each_symbol_slot(map, visit) };
    if walked.is_some() && !unrelocated {
        mark_done(map_addr);
    }
}

/// What [`fix_own_slots`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixed {
    /// Every slot holds what it should; the object is remembered as done.
    Done,
    /// Done, but some slot holds something else (an interposer's function, say), left alone;
    /// the object is remembered as done.
    Partial,
    /// Some slot is not relocated yet (a `dlopen` in progress): try again later.
    NotRelocated,
    /// Another thread is patching right now: try again later.
    Busy,
    /// The object's tables or program headers cannot be read: nothing was written.
    Unreadable,
}

/// Rewrites the slots of a relocated object's own references: for a name where
/// `decide(name)` gives `(from, to)`, a slot holding `from`, or a PLT slot still holding its
/// lazy-binding stub (an address inside the object itself), gets `to`. Any other value (an
/// interposer's function, say) is left alone. Used on the runtime, whose references to its
/// own redirected exports must reach the real functions (see [`crate::redirect`]).
///
/// # Safety
/// `map` must be a live link map of a shared object, not currently being relocated by
/// another thread.
pub unsafe fn fix_own_slots(
    map: *mut LinkMap,
    decide: impl Fn(*const core::ffi::c_char) -> Option<(usize, usize)>,
) -> Fixed {
    if map.is_null() {
        return Fixed::Unreadable;
    }
    if is_done(map as usize) {
        return Fixed::Done;
    }
    let Some(_patching) = Patching::begin() else {
        return Fixed::Busy;
    };
    let map_addr = map as usize;
    // SAFETY: caller guarantee.
    let map = unsafe { &*map };
    // SAFETY: caller guarantee (live object).
    let Some(headers) = (unsafe { ProgramHeaders::of(map, false) }) else {
        return Fixed::Unreadable;
    };
    let relro = headers.relro();
    let (start, end) = headers.extent();
    let base = map.l_addr;
    let mut unrelocated = false;
    let mut foreign = false;
    let mut writer = SlotWriter::new(relro);
    let visit = |kind, name, slot: *mut usize| {
        let Some((from, to)) = decide(name) else {
            return;
        };
        // SAFETY: the slot is a pointer-sized relocation target inside the object.
        let rewrite = match unsafe { SlotValue::read(slot, kind, base, (start, end)) } {
            SlotValue::Bound(current) | SlotValue::LazyStub(current) if current == to => return,
            SlotValue::Unrelocated => {
                unrelocated = true;
                return;
            }
            SlotValue::LazyStub(_) => true,
            SlotValue::Bound(current) => current == from,
        };
        if rewrite {
            // SAFETY: the object is relocated (checked above), so the slot is writable data
            // or RELRO, which the writer handles.
            unsafe { writer.write(slot, to) };
            // SAFETY: as above: a mapped slot.
            if unsafe { slot.read_volatile() } != to {
                foreign = true; // the write was refused (RELRO could not be lifted)
            }
        } else {
            foreign = true;
        }
    };
    // SAFETY: caller guarantee (live object).
    let walked = unsafe { for_each_symbol_slot(map, visit) };
    match walked {
        None => Fixed::Unreadable,
        Some(()) if unrelocated => Fixed::NotRelocated,
        Some(()) => {
            mark_done(map_addr);
            if foreign {
                Fixed::Partial
            } else {
                Fixed::Done
            }
        }
    }
}

/// Writes the relocation slots of one object. Slots in the RELRO segment are read-only once
/// the loader is done with the object: the first such write lifts the protection of the whole
/// RELRO range (one `mprotect`), and dropping the writer restores it (one more), rather than a
/// pair of calls per slot, each of which splits and merges the mapping.
struct SlotWriter {
    /// The pages the loader made read-only, `[start, end)`, if any.
    protected: Option<(usize, usize)>,
    /// Set once the protected range was made writable; `Err` once that failed.
    opened: Option<Result<(), ()>>,
}

impl SlotWriter {
    /// `relro` is the object's PT_GNU_RELRO range; `None` writes everything directly (an
    /// object still being relocated, or one without RELRO).
    fn new(relro: Option<(usize, usize)>) -> SlotWriter {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        // The loader protects whole pages from the start of RELRO to its end rounded *down*
        // (glibc's _dl_protect_relro): a slot on the last partial page stays writable.
        let protected = relro
            .map(|(start, end)| (start & !(page - 1), end & !(page - 1)))
            .filter(|(start, end)| start < end);
        SlotWriter {
            protected,
            opened: None,
        }
    }

    /// Writes `value` into `slot`; does nothing if the protection could not be lifted.
    ///
    /// # Safety
    /// `slot` must be a mapped, pointer-sized, aligned relocation target of the object whose
    /// RELRO range this writer was made with.
    unsafe fn write(&mut self, slot: *mut usize, value: usize) {
        let addr = slot as usize;
        if let Some((start, end)) = self.protected.filter(|&(s, e)| addr >= s && addr < e) {
            let opened = *self.opened.get_or_insert_with(|| {
                // SAFETY: [start, end) are the object's RELRO pages, mapped read-only by the
                // loader; adding PROT_WRITE to its private mapping only enables these writes.
                let rc = unsafe {
                    libc::mprotect(
                        start as *mut _,
                        end - start,
                        libc::PROT_READ | libc::PROT_WRITE,
                    )
                };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(())
                }
            });
            if opened.is_err() {
                return;
            }
        }
        // SAFETY: the slot is writable: data, the unprotected tail of RELRO, or RELRO pages
        // made writable above (caller guarantee for the address).
        unsafe { slot.write_volatile(value) };
        PATCHED.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for SlotWriter {
    fn drop(&mut self) {
        if let (Some(Ok(())), Some((start, end))) = (self.opened, self.protected) {
            // SAFETY: restores the read-only protection the loader gave these RELRO pages.
            unsafe { libc::mprotect(start as *mut _, end - start, libc::PROT_READ) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_remembered_until_closed() {
        let a = 0x7f00_1234_5000usize;
        let b = a + DONE_SLOTS * 16; // same home slot as `a`
        assert!(!is_done(a));
        mark_done(a);
        mark_done(b);
        assert!(is_done(a) && is_done(b));
        forget(a);
        assert!(!is_done(a));
        // The tombstone keeps `b`, which probed past `a`, reachable.
        assert!(is_done(b));
        mark_done(a);
        assert!(is_done(a));
        forget(a);
        forget(b);
    }
}
