//! The rtld-audit entry points: the only symbols `libamvgpu.so` exports.
//!
//! These run inside the dynamic loader, often while it holds its own lock. They therefore only
//! read their arguments and store into atomics: no allocation, no lock, no stdio, no panic
//! (every index is checked, every pointer tested), and no initialisation of the hook itself,
//! which happens lazily on the first wrapped call.

use crate::elf::Elf64Sym;
use crate::symbols;
use core::ffi::{c_char, c_uint};
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// The newest audit interface this module implements (glibc 2.35+ `LAV_CURRENT`). Version 1
/// (glibc 2.17 ..= 2.34) has the same entry points with the same meaning for what we use.
const LAV_SUPPORTED: c_uint = 2;

const LA_FLG_BINDTO: c_uint = 0x01;
const LA_FLG_BINDFROM: c_uint = 0x02;
const LA_SYMB_NOPLTENTER: c_uint = 0x01;
const LA_SYMB_NOPLTEXIT: c_uint = 0x02;
const LA_SYMB_DLSYM: c_uint = 0x08;

/// The head of glibc's `struct link_map` (the public part, stable since the beginning).
#[repr(C)]
pub struct LinkMap {
    pub l_addr: usize,
    pub l_name: *const c_char,
    pub l_ld: *mut crate::elf::Elf64Dyn,
    pub l_next: *mut LinkMap,
    pub l_prev: *mut LinkMap,
}
const _: () = assert!(core::mem::offset_of!(LinkMap, l_ld) == 16);

extern "C" {
    /// This module's own dynamic section; the linker defines it for every shared object.
    static _DYNAMIC: [crate::elf::Elf64Dyn; 0];
    /// The audit namespace's libc `environ`; see [`initial_environ`].
    static environ: *const *const c_char;
}

/// The cookie the loader gave `libamdhip64` (the address of its cookie slot), 0 until seen.
static RUNTIME_COOKIE: AtomicUsize = AtomicUsize::new(0);

/// The cookie of the base namespace's libc (for `getenv`, see [`crate::hooks::env`]).
static LIBC_COOKIE: AtomicUsize = AtomicUsize::new(0);

/// The cookie of `libhsa-runtime64` (for `hsa_queue_create`, see [`crate::hooks::hsa`]).
static HSA_COOKIE: AtomicUsize = AtomicUsize::new(0);

/// The main program's link map (the head of the base namespace's list), null until seen.
static MAIN_MAP: AtomicPtr<LinkMap> = AtomicPtr::new(core::ptr::null_mut());

/// Set by `la_preinit`: from then on, `la_activity(LA_ACT_CONSISTENT)` reports relocated
/// objects (dlopen) whose GOT can be patched.
static STARTED: AtomicUsize = AtomicUsize::new(0);

const LM_ID_BASE: i64 = 0;
const LA_ACT_CONSISTENT: c_uint = 0;
const LA_ACT_ADD: c_uint = 1;

/// `environ` as it was when the main program was opened, before any of its code ran.
static INITIAL_ENVIRON: AtomicPtr<*const c_char> = AtomicPtr::new(core::ptr::null_mut());

/// The environment array the process started with (fallback source when `/proc` is absent),
/// or null if `la_objopen` never saw the main program.
pub fn initial_environ() -> *const *const c_char {
    INITIAL_ENVIRON.load(Ordering::Acquire)
}

/// What an object is, judged by its path.
#[derive(Debug, PartialEq, Eq)]
enum ObjectKind {
    /// `libamdhip64.so*`: the runtime whose exports we wrap.
    Runtime,
    /// The dynamic loader: it never calls HIP.
    Loader,
    /// `libc.so*`: its `getenv` is answered for the pod's settings.
    Libc,
    /// `libhsa-runtime64.so*`: the HIP runtime's queues get the pod's priority.
    Hsa,
    /// Anything else: the program and its libraries, whose HIP calls we want to see.
    Caller,
}

fn classify(path: &[u8]) -> ObjectKind {
    let base = match path.iter().rposition(|&b| b == b'/') {
        Some(slash) => &path[slash + 1..],
        None => path,
    };
    if base.starts_with(b"libamdhip64.so") {
        ObjectKind::Runtime
    } else if base.starts_with(b"ld-linux") || base.starts_with(b"ld64.so") {
        ObjectKind::Loader
    } else if base.starts_with(b"libc.so") {
        ObjectKind::Libc
    } else if base.starts_with(b"libhsa-runtime64.so") {
        ObjectKind::Hsa
    } else {
        ObjectKind::Caller
    }
}

/// The object's kind by its `DT_SONAME`, if that names the runtime or `libhsa-runtime64`.
///
/// # Safety
/// `map` must be a live link map whose dynamic section the loader has read.
unsafe fn kind_by_soname(map: &LinkMap) -> Option<ObjectKind> {
    const DT_NULL: i64 = 0;
    const DT_STRTAB: i64 = 5;
    const DT_SONAME: i64 = 14;
    if map.l_ld.is_null() {
        return None;
    }
    let (mut strtab, mut soname) = (0usize, None);
    let mut entry = map.l_ld as *const crate::elf::Elf64Dyn;
    loop {
        // SAFETY: the dynamic array is DT_NULL-terminated and mapped (caller guarantee).
        let (tag, val) = unsafe { ((*entry).d_tag, (*entry).d_val) };
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = val as usize,
            DT_SONAME => soname = Some(val as usize),
            _ => {}
        }
        // SAFETY: not yet past DT_NULL.
        entry = unsafe { entry.add(1) };
    }
    let (Some(offset), true) = (soname, strtab != 0) else {
        return None;
    };
    if strtab < map.l_addr {
        strtab = map.l_addr.wrapping_add(strtab);
    }
    // SAFETY: DT_SONAME is an offset of a NUL-terminated string in the string table.
    let name = unsafe { core::ffi::CStr::from_ptr((strtab + offset) as *const c_char) };
    match classify(name.to_bytes()) {
        kind @ (ObjectKind::Runtime | ObjectKind::Hsa) => Some(kind),
        _ => None,
    }
}

/// Handshake: accept every loader from glibc 2.17 on, never claiming more than it offers.
#[no_mangle]
pub extern "C" fn la_version(version: c_uint) -> c_uint {
    version.min(LAV_SUPPORTED)
}

/// Chooses which bindings are audited: bindings *to* `libamdhip64` *from* everything else.
///
/// # Safety
/// Called by the loader with a valid link map and cookie slot.
#[no_mangle]
pub unsafe extern "C" fn la_objopen(map: *mut LinkMap, lmid: i64, cookie: *mut usize) -> c_uint {
    if map.is_null() {
        return 0;
    }
    // SAFETY: the loader passes a live link map for the object being opened.
    let map_ref = unsafe { &*map };
    // SAFETY: `_DYNAMIC` is defined by the linker for this object; only its address is taken.
    let own_dynamic = unsafe { _DYNAMIC.as_ptr() };
    if core::ptr::eq(map_ref.l_ld, own_dynamic) {
        return 0;
    }
    let path: &[u8] = if map_ref.l_name.is_null() {
        b""
    } else {
        // SAFETY: l_name is a NUL-terminated string owned by the loader for the map's lifetime.
        unsafe { core::ffi::CStr::from_ptr(map_ref.l_name) }.to_bytes()
    };
    if lmid == LM_ID_BASE && MAIN_MAP.load(Ordering::Relaxed).is_null() {
        // The main program is the first object of the base namespace (its name is empty, or
        // its path when started as `ld.so prog`). It is opened before any program code has
        // run, so the environment array is still the one the process started with.
        // SAFETY: reading a pointer-sized libc global; the audit libc initialised it before
        // loading this module.
        let env = unsafe { environ };
        INITIAL_ENVIRON.store(env.cast_mut(), Ordering::Release);
        let _ = MAIN_MAP.compare_exchange(
            core::ptr::null_mut(),
            map,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
    let mut kind = classify(path);
    if kind == ObjectKind::Caller {
        // Opened under another name (e.g. a symlink `libhip.so`) but it is the runtime.
        // SAFETY: the loader has read the object's dynamic section before la_objopen.
        if let Some(by_soname) = unsafe { kind_by_soname(map_ref) } {
            kind = by_soname;
        }
    }
    match kind {
        ObjectKind::Runtime => {
            if RUNTIME_COOKIE
                .compare_exchange(0, cookie as usize, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                symbols::set_runtime(map_ref.l_addr, map_ref.l_ld);
            }
            // BINDFROM for its getenv and hsa_queue_create bindings; its calls to its own
            // exports are audited too, but `la_symbind64` returns their real addresses.
            LA_FLG_BINDTO | LA_FLG_BINDFROM
        }
        ObjectKind::Loader => 0,
        ObjectKind::Libc if lmid == LM_ID_BASE => {
            let _ = LIBC_COOKIE.compare_exchange(
                0,
                cookie as usize,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
            LA_FLG_BINDTO | LA_FLG_BINDFROM
        }
        ObjectKind::Hsa => {
            if HSA_COOKIE
                .compare_exchange(0, cookie as usize, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                crate::hooks::hsa::set_library(map_ref.l_addr, map_ref.l_ld);
            }
            LA_FLG_BINDTO | LA_FLG_BINDFROM
        }
        ObjectKind::Libc => LA_FLG_BINDFROM,
        ObjectKind::Caller => LA_FLG_BINDFROM,
    }
}

/// Patches the GOT of every relocated program object of the base namespace (see [`crate::got`]).
fn patch_loaded_objects() {
    let main = MAIN_MAP.load(Ordering::Acquire);
    if main.is_null() || RUNTIME_COOKIE.load(Ordering::Acquire) == 0 {
        return;
    }
    // SAFETY: `_DYNAMIC` is defined by the linker for this object; only its address is taken.
    let own_dynamic = unsafe { _DYNAMIC.as_ptr() };
    let mut map = main;
    while !map.is_null() {
        // SAFETY: the loader keeps the namespace's list consistent while it runs audit
        // callbacks (it holds its lock or is single-threaded at start-up).
        let object = unsafe { &*map };
        let path: &[u8] = if object.l_name.is_null() {
            b""
        } else {
            // SAFETY: l_name is NUL-terminated and owned by the loader.
            unsafe { core::ffi::CStr::from_ptr(object.l_name) }.to_bytes()
        };
        if !core::ptr::eq(object.l_ld, own_dynamic) && classify(path) == ObjectKind::Caller {
            // SAFETY: a live, relocated program object (see the callers).
            unsafe { crate::got::patch_object(map, map == main, false) };
        }
        map = object.l_next;
    }
}

/// All start-up objects are loaded and relocated: patch the bindings `la_symbind64` missed.
///
/// # Safety
/// Called by the loader.
#[no_mangle]
pub unsafe extern "C" fn la_preinit(_cookie: *mut usize) {
    STARTED.store(1, Ordering::Release);
    patch_loaded_objects();
}

/// Patches objects at the loader's namespace events after start-up: at `LA_ACT_ADD` (a new
/// `dlopen` begins, so every object of the previous one is relocated by now) and at
/// `LA_ACT_CONSISTENT` (the `dlopen` has mapped its objects; glibc relocates them only
/// afterwards, so those stay pending until the next event, see [`crate::got`]).
///
/// # Safety
/// Called by the loader.
#[no_mangle]
pub unsafe extern "C" fn la_activity(_cookie: *mut usize, flag: c_uint) {
    if (flag == LA_ACT_CONSISTENT || flag == LA_ACT_ADD) && STARTED.load(Ordering::Acquire) != 0 {
        patch_loaded_objects();
    }
}

/// An object is being closed: forget that it was patched (its link map may be reused).
///
/// # Safety
/// Called by the loader with the cookie `la_objopen` received (glibc initialises it to the
/// link map's address and we never change it).
#[no_mangle]
pub unsafe extern "C" fn la_objclose(cookie: *mut usize) -> c_uint {
    if !cookie.is_null() {
        // SAFETY: the loader passes the object's cookie slot.
        crate::got::forget(unsafe { *cookie });
        if HSA_COOKIE
            .compare_exchange(cookie as usize, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            crate::hooks::hsa::forget_library();
        }
        if RUNTIME_COOKIE
            .compare_exchange(cookie as usize, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            // The runtime itself is unloaded: a later dlopen of it (at another address) must
            // be recognised and looked up again.
            symbols::forget_runtime();
        }
    }
    0
}

/// Returns the wrapper for a wrapped HIP function, the real address for anything else.
///
/// # Safety
/// Called by the loader with a valid symbol, cookies, flags slot and NUL-terminated name.
#[no_mangle]
pub unsafe extern "C" fn la_symbind64(
    sym: *mut Elf64Sym,
    _ndx: c_uint,
    refcook: *mut usize,
    defcook: *mut usize,
    flags: *mut c_uint,
    symname: *const c_char,
) -> usize {
    if sym.is_null() {
        return 0;
    }
    // SAFETY: the loader passes the resolved symbol, valid for this call; st_value is already
    // the absolute address of the definition.
    let real = unsafe { (*sym).st_value } as usize;
    if !flags.is_null() {
        // We define no la_pltenter/la_pltexit: let the loader patch the GOT directly so the
        // wrapper is called without a trampoline. LA_SYMB_DLSYM needs no special case: a dlsym
        // lookup gets the wrapper exactly like a PLT binding.
        // SAFETY: `flags` points to the loader's flags word for this binding.
        unsafe { *flags |= LA_SYMB_NOPLTENTER | LA_SYMB_NOPLTEXIT };
        let _ = LA_SYMB_DLSYM;
    }
    let runtime = RUNTIME_COOKIE.load(Ordering::Acquire);
    let definer = defcook as usize;
    if definer != 0 && definer == LIBC_COOKIE.load(Ordering::Relaxed) {
        // SAFETY: the loader passes the symbol's NUL-terminated name.
        return match unsafe { short_name(symname) } {
            Some(name) => crate::hooks::env::bind_libc(name, real),
            None => real,
        };
    }
    if definer != 0 && definer == HSA_COOKIE.load(Ordering::Relaxed) {
        if runtime == 0 || refcook as usize != runtime {
            return real;
        }
        // SAFETY: as above.
        return match unsafe { short_name(symname) } {
            Some(name) => crate::hooks::hsa::bind(name, real),
            None => real,
        };
    }
    if runtime == 0 || definer != runtime || refcook as usize == runtime {
        return real;
    }
    if STARTED.load(Ordering::Acquire) != 0 && !refcook.is_null() {
        // An object loaded by dlopen binds to HIP: whether during its own relocation (bind-now,
        // after its GLOB_DAT slots were filled) or at its first PLT call, its GOT-only slots are
        // relocated now, so patch them without waiting for the next loader event.
        // SAFETY: `refcook` is the referencing object's cookie slot; glibc initialises it to
        // the object's link map and this module never changes it.
        let map = unsafe { *refcook } as *mut LinkMap;
        if !map.is_null() {
            // SAFETY: the referencing object is live (it is being bound).
            let relocating = unsafe { crate::got::relocation_in_progress(&*map) };
            if let Some(relocating) = relocating {
                let is_main = map == MAIN_MAP.load(Ordering::Acquire);
                // SAFETY: live, and relocated as far as its data relocations go (see above);
                // a slot still 0 is left for later.
                unsafe { crate::got::patch_object(map, is_main, relocating) };
            }
        }
    }
    // SAFETY: the loader passes the symbol's NUL-terminated name.
    match unsafe { symbols::find_c(symname) } {
        Some(wrapped) => {
            symbols::note_real(wrapped, real);
            symbols::wrapper(wrapped).unwrap_or(real)
        }
        None => real,
    }
}

/// The first bytes of a symbol name, if it is short enough to be one the hook answers
/// (longer names are rejected after 32 bytes, without reading further).
///
/// # Safety
/// `name` is NULL or NUL-terminated, and lives for `'a`.
unsafe fn short_name<'a>(name: *const c_char) -> Option<&'a [u8]> {
    if name.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated (caller guarantee); the read stops at the NUL or 33 bytes.
    let len = unsafe { crate::elf::bounded_strlen(name, 32) }?;
    // SAFETY: the `len` bytes before the NUL are readable.
    Some(unsafe { core::slice::from_raw_parts(name.cast::<u8>(), len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_never_more_than_offered() {
        assert_eq!(la_version(0), 0);
        assert_eq!(la_version(1), 1);
        assert_eq!(la_version(2), 2);
        assert_eq!(la_version(3), 2);
    }

    #[test]
    fn objects_are_classified_by_basename() {
        assert_eq!(
            classify(b"/opt/rocm/lib/libamdhip64.so.6"),
            ObjectKind::Runtime
        );
        assert_eq!(classify(b"libamdhip64.so"), ObjectKind::Runtime);
        assert_eq!(classify(b"/lib64/ld-linux-x86-64.so.2"), ObjectKind::Loader);
        assert_eq!(classify(b""), ObjectKind::Caller);
        assert_eq!(
            classify(b"/usr/lib/libamdhip64x/libtorch.so"),
            ObjectKind::Caller
        );
        assert_eq!(classify(b"/x/notlibamdhip64.so"), ObjectKind::Caller);
        assert_eq!(
            classify(b"/lib/x86_64-linux-gnu/libc.so.6"),
            ObjectKind::Libc
        );
        assert_eq!(
            classify(b"/opt/rocm/lib/libhsa-runtime64.so.1"),
            ObjectKind::Hsa
        );
        assert_eq!(classify(b"/x/libcuda.so"), ObjectKind::Caller);
    }
}
