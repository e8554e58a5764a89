//! Symbol lookup in a loaded object's dynamic symbol table, without `dlsym`.
//!
//! Why not `dlsym`: built on glibc >= 2.34 it binds to `dlsym@GLIBC_2.34`, which older loaders
//! lack (the floor is 2.17), and calling into the loader from a wrapper is slower than reading
//! the hash table ourselves. The lookup reads the object's `DT_GNU_HASH` table (or scans the
//! `DT_HASH`-sized symbol table when there is none) and skips hidden (non-default) versions, so
//! it finds what a link against the library would find.

use core::ffi::c_char;

/// `Elf64_Dyn`.
#[repr(C)]
pub struct Elf64Dyn {
    pub d_tag: i64,
    pub d_val: u64,
}
const _: () = assert!(core::mem::size_of::<Elf64Dyn>() == 16);

/// `Elf64_Sym`.
#[repr(C)]
pub struct Elf64Sym {
    pub st_name: u32,
    pub st_info: u8,
    pub st_other: u8,
    pub st_shndx: u16,
    pub st_value: u64,
    pub st_size: u64,
}
const _: () = assert!(core::mem::size_of::<Elf64Sym>() == 24);
const _: () = assert!(core::mem::offset_of!(Elf64Sym, st_value) == 8);

const DT_NULL: i64 = 0;
const DT_HASH: i64 = 4;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_GNU_HASH: i64 = 0x6fff_fef5;
const DT_VERSYM: i64 = 0x6fff_fff0;
const SHN_UNDEF: u16 = 0;
const VERSYM_HIDDEN: u16 = 0x8000;
const STT_GNU_IFUNC: u8 = 10;

/// The tables of one loaded object.
#[derive(Clone, Copy, Debug)]
pub struct DynamicTables {
    base: usize,
    strtab: *const u8,
    symtab: *const Elf64Sym,
    gnu_hash: *const u32,
    sysv_hash: *const u32,
    versym: *const u16,
}

/// The loader relocates `d_ptr` entries in place on x86-64 but not on every architecture;
/// an address below the load base is still an offset.
fn absolute(base: usize, ptr: u64) -> usize {
    let ptr = ptr as usize;
    if ptr < base {
        base.wrapping_add(ptr)
    } else {
        ptr
    }
}

impl DynamicTables {
    /// Reads the dynamic section of a loaded object.
    ///
    /// # Safety
    /// `dynamic` must be the `l_ld` of an object the loader has mapped (and keeps mapped while
    /// the result is used), and `base` its `l_addr`.
    pub unsafe fn read(base: usize, dynamic: *const Elf64Dyn) -> Option<DynamicTables> {
        let mut tables = DynamicTables {
            base,
            strtab: core::ptr::null(),
            symtab: core::ptr::null(),
            gnu_hash: core::ptr::null(),
            sysv_hash: core::ptr::null(),
            versym: core::ptr::null(),
        };
        let mut entry = dynamic;
        loop {
            // SAFETY: the dynamic section is an array terminated by DT_NULL (ELF spec), mapped
            // for the object's lifetime per the caller's guarantee.
            let (tag, val) = unsafe { ((*entry).d_tag, (*entry).d_val) };
            match tag {
                DT_NULL => break,
                DT_STRTAB => tables.strtab = absolute(base, val) as *const u8,
                DT_SYMTAB => tables.symtab = absolute(base, val) as *const Elf64Sym,
                DT_GNU_HASH => tables.gnu_hash = absolute(base, val) as *const u32,
                DT_HASH => tables.sysv_hash = absolute(base, val) as *const u32,
                DT_VERSYM => tables.versym = absolute(base, val) as *const u16,
                _ => {}
            }
            // SAFETY: not past DT_NULL yet, so the next entry is inside the array.
            entry = unsafe { entry.add(1) };
        }
        let usable = !tables.strtab.is_null()
            && !tables.symtab.is_null()
            && (!tables.gnu_hash.is_null() || !tables.sysv_hash.is_null());
        usable.then_some(tables)
    }

    /// The address of the default version of the defined function or object `name`.
    ///
    /// # Safety
    /// The tables must come from [`DynamicTables::read`] on an object that is still mapped.
    pub unsafe fn lookup(&self, name: &[u8]) -> Option<usize> {
        if !self.gnu_hash.is_null() {
            // SAFETY: forwarded caller guarantee.
            unsafe { self.lookup_gnu(name) }
        } else {
            // SAFETY: forwarded caller guarantee.
            unsafe { self.lookup_linear(name) }
        }
    }

    /// Checks symbol `index` against `name`; returns its address if it is a defined,
    /// default-version match.
    ///
    /// # Safety
    /// `index` must be a valid index into the symbol table.
    unsafe fn matches(&self, index: usize, name: &[u8]) -> Option<usize> {
        // SAFETY: forwarded caller guarantee.
        let (sym, default) = unsafe { self.definition(index, name) }?;
        // SAFETY: `definition` returned a pointer into the symbol table.
        default.then(|| self.base.wrapping_add(unsafe { (*sym).st_value } as usize))
    }

    /// Checks symbol `index` against `name`: the entry and whether it is the default version,
    /// if it is a defined, non-IFUNC function or object of that name (of any version).
    ///
    /// # Safety
    /// `index` must be a valid index into the symbol table.
    unsafe fn definition(&self, index: usize, name: &[u8]) -> Option<(*mut Elf64Sym, bool)> {
        // SAFETY: the caller guarantees `index` is inside the symbol table.
        let entry = unsafe { self.symtab.add(index) };
        // SAFETY: as above; the table is mapped.
        let sym = unsafe { &*entry };
        if sym.st_shndx == SHN_UNDEF || sym.st_info & 0xf == STT_GNU_IFUNC {
            return None;
        }
        let default = if self.versym.is_null() {
            true
        } else {
            // SAFETY: DT_VERSYM has one entry per symbol-table entry (ELF gABI, GNU extension).
            let version = unsafe { *self.versym.add(index) };
            version & VERSYM_HIDDEN == 0
        };
        // SAFETY: st_name is an offset of a NUL-terminated string in the string table.
        let mut p = unsafe { self.strtab.add(sym.st_name as usize) };
        for &want in name {
            // SAFETY: we stop at the first mismatch, and the string is NUL-terminated, so we
            // never read past its end.
            if unsafe { *p } != want {
                return None;
            }
            // SAFETY: as above, the current byte was not NUL, so the next one is in bounds.
            p = unsafe { p.add(1) };
        }
        // SAFETY: `p` points at most at the string's terminating NUL.
        if unsafe { *p } != 0 {
            return None;
        }
        Some((entry.cast_mut(), default))
    }

    /// Calls `found(entry, is_default_version)` for every defined, non-IFUNC symbol-table
    /// entry named `name`, whatever its version (`hipMalloc@@hip_4.2` and a hidden
    /// `hipMalloc@hip_4.0` alike). Reads only the hash chain of `name` (or, without
    /// `DT_GNU_HASH`, the whole table).
    ///
    /// # Safety
    /// The tables must come from [`DynamicTables::read`] on an object that is still mapped.
    pub unsafe fn for_each_definition(
        &self,
        name: &[u8],
        mut found: impl FnMut(*mut Elf64Sym, bool),
    ) {
        if self.gnu_hash.is_null() {
            // SAFETY: DT_HASH starts with nbucket, nchain; nchain is the symbol count.
            let count = unsafe { *self.sysv_hash.add(1) } as usize;
            for index in 1..count {
                // SAFETY: every index below nchain is a valid symbol index.
                if let Some((sym, default)) = unsafe { self.definition(index, name) } {
                    found(sym, default);
                }
            }
            return;
        }
        // SAFETY: forwarded caller guarantee.
        unsafe {
            self.gnu_candidates(name, |index| {
                if let Some((sym, default)) = self.definition(index, name) {
                    found(sym, default);
                }
                None::<()>
            });
        }
    }

    /// # Safety
    /// See [`DynamicTables::lookup`].
    unsafe fn lookup_gnu(&self, name: &[u8]) -> Option<usize> {
        // SAFETY: forwarded caller guarantee; `matches` gets indices of the symbol table.
        unsafe { self.gnu_candidates(name, |index| self.matches(index, name)) }
    }

    /// Calls `visit` with the index of every symbol in `name`'s `DT_GNU_HASH` chain whose hash
    /// matches, until it returns `Some`; returns that.
    ///
    /// # Safety
    /// `gnu_hash` must be non-null and the tables from [`DynamicTables::read`] on a mapped
    /// object; `visit` receives valid symbol-table indices.
    unsafe fn gnu_candidates<T>(
        &self,
        name: &[u8],
        mut visit: impl FnMut(usize) -> Option<T>,
    ) -> Option<T> {
        let hash = gnu_hash(name);
        let table = self.gnu_hash;
        // SAFETY: the GNU hash header is four words (nbuckets, symoffset, bloom_size,
        // bloom_shift), followed by bloom_size u64 words, nbuckets buckets, then the chains;
        // a bucket's chain ends at the first entry whose low bit is set.
        unsafe {
            let nbuckets = *table as usize;
            let symoffset = *table.add(1) as usize;
            let bloom_size = *table.add(2) as usize;
            if nbuckets == 0 {
                return None;
            }
            let buckets = table.add(4 + bloom_size * 2);
            let chains = buckets.add(nbuckets);
            let mut index = *buckets.add(hash as usize % nbuckets) as usize;
            if index < symoffset {
                return None;
            }
            loop {
                let chain = *chains.add(index - symoffset);
                if (chain | 1) == (hash | 1) {
                    if let Some(found) = visit(index) {
                        return Some(found);
                    }
                }
                if chain & 1 != 0 {
                    return None;
                }
                index += 1;
            }
        }
    }

    /// # Safety
    /// See [`DynamicTables::lookup`].
    unsafe fn lookup_linear(&self, name: &[u8]) -> Option<usize> {
        // SAFETY: DT_HASH starts with nbucket, nchain; nchain is the symbol count.
        let count = unsafe { *self.sysv_hash.add(1) } as usize;
        // SAFETY: every index below nchain is a valid symbol index.
        (1..count).find_map(|i| unsafe { self.matches(i, name) })
    }
}

/// The GNU hash function (`dl_new_hash`).
pub const fn gnu_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 5381;
    let mut i = 0;
    while i < name.len() {
        h = h.wrapping_mul(33).wrapping_add(name[i] as u32);
        i += 1;
    }
    h
}

/// Length of a NUL-terminated string, bounded by `max` (returns `None` if longer).
///
/// # Safety
/// `s` must point to a NUL-terminated string or to at least `max + 1` readable bytes.
pub unsafe fn bounded_strlen(s: *const c_char, max: usize) -> Option<usize> {
    // SAFETY: we read at most up to the NUL or `max`, within the caller's guarantee.
    (0..=max).find(|&i| unsafe { *s.add(i) } == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finds libc in this test process and checks our lookup against the loader's answer.
    #[test]
    fn lookup_finds_what_the_loader_binds() {
        unsafe extern "C" fn visit(
            info: *mut libc::dl_phdr_info,
            _size: usize,
            found: *mut core::ffi::c_void,
        ) -> core::ffi::c_int {
            // SAFETY: the loader passes a valid info struct for this call.
            let info = unsafe { &*info };
            // SAFETY: dlpi_name is NUL-terminated (possibly empty).
            let name = unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes();
            if !name.windows(7).any(|w| w == b"libc.so") {
                return 0;
            }
            for i in 0..info.dlpi_phnum as usize {
                // SAFETY: dlpi_phdr has dlpi_phnum entries.
                let ph = unsafe { &*info.dlpi_phdr.add(i) };
                if ph.p_type == libc::PT_DYNAMIC {
                    let dynamic =
                        (info.dlpi_addr as usize + ph.p_vaddr as usize) as *const Elf64Dyn;
                    // SAFETY: `found` is the test's out slot.
                    unsafe {
                        *found.cast::<(usize, *const Elf64Dyn)>() =
                            (info.dlpi_addr as usize, dynamic)
                    };
                    return 1;
                }
            }
            0
        }
        let mut found: (usize, *const Elf64Dyn) = (0, core::ptr::null());
        // SAFETY: the callback only reads the loader's data and writes `found`.
        unsafe {
            libc::dl_iterate_phdr(
                Some(visit),
                (&mut found as *mut (usize, *const Elf64Dyn)).cast(),
            )
        };
        assert!(!found.1.is_null(), "libc is loaded in every test process");
        // SAFETY: libc stays mapped for the life of the process.
        let tables =
            unsafe { DynamicTables::read(found.0, found.1) }.expect("libc has hash tables");
        // SAFETY: as above.
        let getpid = unsafe { tables.lookup(b"getpid") };
        assert_eq!(getpid, Some(libc::getpid as *const () as usize));
        // SAFETY: as above.
        assert_eq!(unsafe { tables.lookup(b"getpi") }, None);
        // SAFETY: as above.
        assert_eq!(unsafe { tables.lookup(b"no_such_symbol_anywhere") }, None);
        // Every version of a name, the default one marked: libc exports pthread_cond_wait as
        // GLIBC_2.3.2 (default) and GLIBC_2.2.5 (hidden), two different functions.
        let mut seen = Vec::new();
        // SAFETY: as above; the callback only reads the entries.
        unsafe {
            tables.for_each_definition(b"pthread_cond_wait", |sym, default| {
                seen.push((found.0 + (*sym).st_value as usize, default))
            })
        };
        let defaults: Vec<usize> = seen.iter().filter(|s| s.1).map(|s| s.0).collect();
        assert!(seen.len() >= 2, "{seen:x?}");
        assert_eq!(
            defaults,
            [libc::pthread_cond_wait as *const () as usize],
            "{seen:x?}"
        );
        let mut none = 0;
        // SAFETY: as above.
        unsafe { tables.for_each_definition(b"pthread_cond_wai", |_, _| none += 1) };
        assert_eq!(none, 0);
    }

    #[test]
    fn gnu_hash_matches_the_reference_values() {
        // Values from the GNU hash specification's examples.
        assert_eq!(gnu_hash(b""), 0x0000_1505);
        assert_eq!(gnu_hash(b"printf"), 0x156b_2bb8);
        assert_eq!(gnu_hash(b"exit"), 0x7c96_7e3f);
        assert_eq!(gnu_hash(b"syscall"), 0xbac2_12a0);
    }
}
