//! The name table: which HIP functions are wrapped, their wrappers, and the real functions.
//!
//! Names are looked up inside loader callbacks (redirecting the runtime's definitions, fixing
//! its own relocation slots), so finding a name must not allocate or lock: the wrapped names
//! sit in an open-addressing hash table built at compile time (FNV-1a over the name bytes,
//! linear probing, load factor below 1/4), so a lookup hashes the name once and compares at
//! most a few candidates.
//!
//! Real functions: for a wrapped name, the address its definition had before
//! [`crate::redirect`] pointed it at the wrapper; for the few functions the hook only calls,
//! a lookup in `libamdhip64`'s dynamic symbol table ([`crate::elf`]). Either is published in
//! a per-symbol atomic slot on first use. Nothing is ever copied from a shadow state: each
//! call goes to the runtime's own function.

use crate::elf::DynamicTables;
use crate::hooks::{alloc, free, lookup, query, stream};
use core::ffi::c_char;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

macro_rules! symbol_table {
    (
        wrapped { $($w:ident => $wrapper:path,)* }
        real_only { $($r:ident,)* }
    ) => {
        /// Every HIP function the hook wraps or calls.
        #[allow(non_camel_case_types, clippy::enum_variant_names)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Sym { $($w,)* $($r,)* }

        /// Names, indexed by `Sym as usize`.
        pub const NAMES: &[&[u8]] = &[$(stringify!($w).as_bytes(),)* $(stringify!($r).as_bytes(),)*];

        /// All symbols, indexed by `Sym as usize`.
        pub const ALL: &[Sym] = &[$(Sym::$w,)* $(Sym::$r,)*];

        /// The wrapped symbols come first; this many of them.
        pub const WRAPPED_COUNT: usize = [$(Sym::$w,)*].len();

        /// The address of the wrapper of `sym`, or `None` if the hook only calls it.
        pub fn wrapper(sym: Sym) -> Option<usize> {
            match sym {
                $(Sym::$w => Some($wrapper as *const () as usize),)*
                #[allow(unreachable_patterns)]
                _ => None,
            }
        }
    };
}

symbol_table! {
    wrapped {
        hipMalloc => alloc::hipMalloc,
        hipExtMallocWithFlags => alloc::hipExtMallocWithFlags,
        hipMallocManaged => alloc::hipMallocManaged,
        hipMallocPitch => alloc::hipMallocPitch,
        hipMemAllocPitch => alloc::hipMemAllocPitch,
        hipMalloc3D => alloc::hipMalloc3D,
        hipMallocArray => alloc::hipMallocArray,
        hipMalloc3DArray => alloc::hipMalloc3DArray,
        hipArrayCreate => alloc::hipArrayCreate,
        hipArray3DCreate => alloc::hipArray3DCreate,
        hipMallocMipmappedArray => alloc::hipMallocMipmappedArray,
        hipMipmappedArrayCreate => alloc::hipMipmappedArrayCreate,
        hipMallocAsync => alloc::hipMallocAsync,
        hipMallocFromPoolAsync => alloc::hipMallocFromPoolAsync,
        hipMemCreate => alloc::hipMemCreate,
        hipMemMap => alloc::hipMemMap,
        hipMemPoolCreate => alloc::hipMemPoolCreate,
        hipMemPoolSetAttribute => alloc::hipMemPoolSetAttribute,
        hipFree => free::hipFree,
        hipFreeAsync => free::hipFreeAsync,
        hipFreeArray => free::hipFreeArray,
        hipArrayDestroy => free::hipArrayDestroy,
        hipFreeMipmappedArray => free::hipFreeMipmappedArray,
        hipMipmappedArrayDestroy => free::hipMipmappedArrayDestroy,
        hipMemRelease => free::hipMemRelease,
        hipMemUnmap => free::hipMemUnmap,
        hipMemPoolTrimTo => free::hipMemPoolTrimTo,
        hipMemPoolDestroy => free::hipMemPoolDestroy,
        hipDeviceSynchronize => free::hipDeviceSynchronize,
        hipStreamSynchronize => free::hipStreamSynchronize,
        hipDeviceReset => free::hipDeviceReset,
        hipStreamCreate => stream::hipStreamCreate,
        hipStreamCreateWithFlags => stream::hipStreamCreateWithFlags,
        hipStreamCreateWithPriority => stream::hipStreamCreateWithPriority,
        hipExtStreamCreateWithCUMask => stream::hipExtStreamCreateWithCUMask,
        hipStreamDestroy => stream::hipStreamDestroy,
        hipMemGetInfo => query::hipMemGetInfo,
        hipDeviceTotalMem => query::hipDeviceTotalMem,
        hipDeviceGetAttribute => query::hipDeviceGetAttribute,
        hipGetDeviceProperties => query::hipGetDeviceProperties,
        hipGetDevicePropertiesR0000 => query::hipGetDevicePropertiesR0000,
        hipGetDevicePropertiesR0600 => query::hipGetDevicePropertiesR0600,
        hipGetProcAddress => lookup::hipGetProcAddress,
        hipGetDriverEntryPoint => lookup::hipGetDriverEntryPoint,
    }
    real_only {
        hipGetDevice,
        hipStreamGetDevice,
        hipDeviceGetDefaultMemPool,
        hipDeviceGetMemPool,
    }
}

/// Longest wrapped name; longer names are rejected before hashing completes.
pub const MAX_NAME_LEN: usize = max_name_len();

const fn max_name_len() -> usize {
    let mut i = 0;
    let mut max = 0;
    while i < WRAPPED_COUNT {
        if NAMES[i].len() > max {
            max = NAMES[i].len();
        }
        i += 1;
    }
    max
}

const TABLE_SIZE: usize = 256;
const _: () = assert!(TABLE_SIZE.is_power_of_two() && WRAPPED_COUNT * 4 <= TABLE_SIZE);
const _: () = assert!(WRAPPED_COUNT < u8::MAX as usize);

/// FNV-1a, 32 bits.
const fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u32;
        h = h.wrapping_mul(0x0100_0193);
        i += 1;
    }
    h
}

/// Slot -> `1 + index of the wrapped symbol`, 0 for an empty slot.
static TABLE: [u8; TABLE_SIZE] = build_table();

const fn build_table() -> [u8; TABLE_SIZE] {
    let mut table = [0u8; TABLE_SIZE];
    let mut i = 0;
    while i < WRAPPED_COUNT {
        let mut slot = fnv1a(NAMES[i]) as usize & (TABLE_SIZE - 1);
        while table[slot] != 0 {
            slot = (slot + 1) & (TABLE_SIZE - 1);
        }
        table[slot] = (i + 1) as u8;
        i += 1;
    }
    table
}

/// Finds a wrapped symbol by name.
pub fn find(name: &[u8]) -> Option<Sym> {
    if name.len() > MAX_NAME_LEN || !name.starts_with(b"hip") {
        return None;
    }
    let mut slot = fnv1a(name) as usize & (TABLE_SIZE - 1);
    loop {
        let entry = TABLE[slot] as usize;
        if entry == 0 {
            return None;
        }
        if NAMES[entry - 1] == name {
            return Some(ALL[entry - 1]);
        }
        slot = (slot + 1) & (TABLE_SIZE - 1);
    }
}

/// Finds a wrapped symbol by C name.
///
/// # Safety
/// `name` must be NULL or point to a NUL-terminated string.
pub unsafe fn find_c(name: *const c_char) -> Option<Sym> {
    if name.is_null() {
        return None;
    }
    // SAFETY: forwarded caller guarantee; the read stops at the NUL or MAX_NAME_LEN + 1 bytes.
    let len = unsafe { crate::elf::bounded_strlen(name, MAX_NAME_LEN + 1) }?;
    // SAFETY: the `len` bytes before the NUL are readable, as just established.
    find(unsafe { core::slice::from_raw_parts(name.cast::<u8>(), len) })
}

const COUNT: usize = ALL.len();

/// Real function addresses, 0 until first used.
static REAL: [AtomicUsize; COUNT] = [const { AtomicUsize::new(0) }; COUNT];

/// Real addresses of the wrapped functions, saved when their definitions were redirected.
static REDIRECTED: [AtomicUsize; COUNT] = [const { AtomicUsize::new(0) }; COUNT];

/// `libamdhip64`'s dynamic section and base, saved by `la_objopen` (null until then).
static HIP_DYNAMIC: AtomicPtr<crate::elf::Elf64Dyn> = AtomicPtr::new(core::ptr::null_mut());
static HIP_BASE: AtomicUsize = AtomicUsize::new(0);

/// Remembers where `libamdhip64` is (loader callback: stores only).
pub fn set_runtime(base: usize, dynamic: *mut crate::elf::Elf64Dyn) {
    HIP_BASE.store(base, Ordering::Relaxed);
    // Release: a wrapper that sees the pointer also sees the base stored before it.
    HIP_DYNAMIC.store(dynamic, Ordering::Release);
}

/// Forgets the runtime (it is being unloaded): every real address is looked up afresh in
/// whichever `libamdhip64` is loaded next (loader callback: stores only).
pub fn forget_runtime() {
    HIP_DYNAMIC.store(core::ptr::null_mut(), Ordering::Release);
    for slot in REAL.iter().chain(&REDIRECTED) {
        slot.store(0, Ordering::Relaxed);
    }
}

/// Records the real address of a wrapped `sym` found when its definition was redirected
/// ([`crate::redirect`]; loader callback: one store).
pub fn note_redirected(sym: Sym, addr: usize) {
    REDIRECTED[sym as usize].store(addr, Ordering::Relaxed);
}

/// The real address of a redirected `sym`, 0 if it was not redirected.
pub fn redirected(sym: Sym) -> usize {
    REDIRECTED[sym as usize].load(Ordering::Relaxed)
}

/// The real address of `sym`, looked up on first use. `None` if the runtime does not export
/// it (e.g. `hipGetProcAddress` before ROCm 6.1).
#[inline]
pub fn real(sym: Sym) -> Option<usize> {
    // Relaxed: the address is immutable code; any thread storing it stores the same value.
    match REAL[sym as usize].load(Ordering::Relaxed) {
        0 => resolve(sym),
        addr => Some(addr),
    }
}

/// First use of `sym` in this process (or since the runtime was reloaded): make sure the
/// runtime's own references reach its real functions, then publish the real address.
#[cold]
fn resolve(sym: Sym) -> Option<usize> {
    crate::audit::settle_runtime();
    let addr = match REDIRECTED[sym as usize].load(Ordering::Relaxed) {
        0 => {
            let found = lookup_in_runtime(NAMES[sym as usize])?;
            // A redirected name resolves to its wrapper: never call that as the real function.
            if wrapper(sym) == Some(found) {
                return None;
            }
            found
        }
        addr => addr,
    };
    REAL[sym as usize].store(addr, Ordering::Relaxed);
    Some(addr)
}

/// Looks `name` up in the runtime's dynamic symbol table.
pub fn lookup_in_runtime(name: &[u8]) -> Option<usize> {
    let dynamic = HIP_DYNAMIC.load(Ordering::Acquire);
    if dynamic.is_null() {
        return None;
    }
    let base = HIP_BASE.load(Ordering::Relaxed);
    // SAFETY: `dynamic` is the l_ld of libamdhip64 as passed to la_objopen; the object stays
    // mapped while the program can call into it (a wrapper runs only because of it).
    let tables = unsafe { DynamicTables::read(base, dynamic) }?;
    // SAFETY: as above, the tables belong to a mapped object.
    unsafe { tables.lookup(name) }
}

/// The wrapper for `sym` if `addr` is (one of) its real function(s); used by the dynamic
/// lookup doors, which hand out whatever pointer the runtime chose.
pub fn wrapper_for_real(sym: Sym, addr: usize) -> Option<usize> {
    match real(sym) {
        Some(known) if known == addr => wrapper(sym),
        // The runtime handed out something else for this name (e.g. a version-specific
        // variant): only wrap it if it is the real function of another wrapped symbol, whose
        // wrapper then has the right signature.
        _ => ALL[..WRAPPED_COUNT]
            .iter()
            .find(|&&other| real(other) == Some(addr))
            .and_then(|&other| wrapper(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wrapped_name_is_found_and_nothing_else() {
        for (i, name) in NAMES.iter().enumerate() {
            let found = find(name);
            if i < WRAPPED_COUNT {
                assert_eq!(found, Some(ALL[i]), "{}", String::from_utf8_lossy(name));
                assert!(wrapper(ALL[i]).is_some());
            } else {
                assert_eq!(found, None, "real-only {}", String::from_utf8_lossy(name));
            }
        }
        for other in [
            &b"hipMallocX"[..],
            b"hipMallo",
            b"",
            b"malloc",
            b"hipGetDevice",
            b"hipMemGetInfo\0",
            b"hipGetDevicePropertiesR0601",
        ] {
            assert_eq!(find(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn probes_stay_short() {
        // The O(1) claim: no wrapped name is more than a few slots from its home slot.
        for name in &NAMES[..WRAPPED_COUNT] {
            let home = fnv1a(name) as usize & (TABLE_SIZE - 1);
            let mut slot = home;
            while NAMES[TABLE[slot] as usize - 1] != *name {
                slot = (slot + 1) & (TABLE_SIZE - 1);
            }
            let distance = (slot + TABLE_SIZE - home) & (TABLE_SIZE - 1);
            assert!(distance <= 3, "{}", String::from_utf8_lossy(name));
        }
    }

    #[test]
    fn c_names_are_bounded_and_nul_terminated() {
        // SAFETY: literals are NUL-terminated.
        unsafe {
            assert_eq!(find_c(c"hipFree".as_ptr()), Some(Sym::hipFree));
            assert_eq!(find_c(c"hipFreeX".as_ptr()), None);
            assert_eq!(find_c(core::ptr::null()), None);
            let long = [b'h' as c_char; 200];
            // Not NUL-terminated within MAX_NAME_LEN + 2 bytes: rejected without overreading.
            assert_eq!(find_c(long.as_ptr()), None);
        }
    }
}
