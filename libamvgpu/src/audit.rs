//! The rtld-audit entry points: the only symbols `libamvgpu.so` exports.
//!
//! These run inside the dynamic loader, often while it holds its own lock. They therefore only
//! read their arguments, write a few words of the objects they are told about, and store into
//! atomics: no allocation, no lock, no stdio, no panic (every index is checked, every pointer
//! tested), and no initialisation of the hook itself, which happens lazily on the first
//! wrapped call.
//!
//! How calls reach the wrappers: `la_objopen` redirects the HIP runtime's (and libc's
//! `getenv`, and HSA's `hsa_queue_create`) definitions to the wrappers before anything is
//! relocated against them ([`crate::redirect`]), so every binding the loader makes afterwards,
//! by any route, gets a wrapper. There is deliberately no `la_symbind64`: defining it makes
//! glibc 2.35+ audit every lazy binding of every object, which costs far more at start-up than
//! it could ever save (see [`crate::redirect`]). `la_objopen` therefore asks for no binding
//! callbacks at all (returns 0 for every object).

use crate::got::Fixed;
use crate::redirect::Failure;
use crate::symbols;
use core::ffi::{c_char, c_uint};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// The newest audit interface this module implements (glibc 2.35+ `LAV_CURRENT`). Version 1
/// (glibc 2.17 ..= 2.34) has the same entry points with the same meaning for what we use.
const LAV_SUPPORTED: c_uint = 2;

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

/// The runtime's link map while its own references still have to be pointed back at its real
/// functions (see [`settle_runtime`]); null otherwise.
static PENDING_RUNTIME: AtomicPtr<LinkMap> = AtomicPtr::new(core::ptr::null_mut());

/// The same for `libhsa-runtime64` and its `hsa_queue_create`.
static PENDING_HSA: AtomicPtr<LinkMap> = AtomicPtr::new(core::ptr::null_mut());

/// Cleared once every one of the runtime's references to its own wrapped exports points at the
/// real function (see [`reentry_possible`]); set again whenever a runtime is (re)loaded.
static REENTRY_POSSIBLE: AtomicBool = AtomicBool::new(true);

/// Whether the runtime can still reach a wrapper from inside a real function (its own slots
/// are not all settled, or its definitions could not be redirected): the wrappers then keep
/// their per-thread re-entrancy guard. One relaxed load.
#[inline]
pub fn reentry_possible() -> bool {
    REENTRY_POSSIBLE.load(Ordering::Relaxed)
}

/// Set when the runtime's relocations could not be read to fix its own references.
static OWN_UNREADABLE: AtomicBool = AtomicBool::new(false);

/// Outcome of redirecting the runtime's definitions (see [`encode`]).
static REDIRECT_FAILURE: AtomicUsize = AtomicUsize::new(NOT_TRIED);

/// Outcome of redirecting libc's `getenv`/`secure_getenv`.
static LIBC_FAILURE: AtomicUsize = AtomicUsize::new(NOT_TRIED);

/// Outcome of redirecting `libhsa-runtime64`'s `hsa_queue_create`.
static HSA_FAILURE: AtomicUsize = AtomicUsize::new(NOT_TRIED);

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

/// Redirects the runtime's, libc's and HSA's wrapped definitions as they are mapped; asks the
/// loader for no binding callbacks.
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
                // SAFETY: the runtime was just mapped and nothing is relocated against it yet;
                // the loader holds its lock while it calls us.
                let outcome = unsafe {
                    crate::redirect::redirect(
                        map_ref,
                        symbols::WRAPPED_COUNT,
                        |i| symbols::NAMES[i],
                        |i| symbols::wrapper(symbols::ALL[i]).unwrap_or(0),
                        |i, real| symbols::note_redirected(symbols::ALL[i], real),
                    )
                };
                match outcome {
                    Ok(_) => {
                        REDIRECT_FAILURE.store(NO_FAILURE, Ordering::Relaxed);
                        REENTRY_POSSIBLE.store(true, Ordering::Relaxed);
                        PENDING_RUNTIME.store(map, Ordering::Release);
                    }
                    Err(failure) => REDIRECT_FAILURE.store(encode(failure), Ordering::Relaxed),
                }
            }
            0
        }
        ObjectKind::Libc if lmid == LM_ID_BASE => {
            if LIBC_COOKIE
                .compare_exchange(0, cookie as usize, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: as for the runtime: just mapped, not yet relocated against.
                let outcome = unsafe {
                    crate::redirect::redirect(
                        map_ref,
                        crate::hooks::env::NAMES.len(),
                        |i| crate::hooks::env::NAMES[i],
                        crate::hooks::env::wrapper,
                        crate::hooks::env::note_real,
                    )
                };
                if let Err(failure) = outcome {
                    LIBC_FAILURE.store(encode(failure), Ordering::Relaxed);
                }
            }
            0
        }
        ObjectKind::Hsa => {
            if HSA_COOKIE
                .compare_exchange(0, cookie as usize, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                crate::hooks::hsa::set_library(map_ref.l_addr, map_ref.l_ld);
                // SAFETY: as for the runtime: just mapped, not yet relocated against.
                let outcome = unsafe {
                    crate::redirect::redirect(
                        map_ref,
                        1,
                        |_| crate::hooks::hsa::QUEUE_CREATE,
                        |_| crate::hooks::hsa::wrapper(),
                        |_, real| crate::hooks::hsa::note_real(real),
                    )
                };
                match outcome {
                    Ok(_) => PENDING_HSA.store(map, Ordering::Release),
                    Err(failure) => HSA_FAILURE.store(encode(failure), Ordering::Relaxed),
                }
            }
            0
        }
        ObjectKind::Loader | ObjectKind::Libc | ObjectKind::Caller => 0,
    }
}

/// `REDIRECT_FAILURE` / `LIBC_FAILURE` values: not tried yet, worked, or a [`Failure`].
const NOT_TRIED: usize = 0;
const NO_FAILURE: usize = 1;

fn encode(failure: Failure) -> usize {
    match failure {
        Failure::NoTables => 2,
        Failure::NoHeaders => 3,
        Failure::TooMany => 4,
        Failure::Outside => 5,
        Failure::Protect(errno) => 0x100 + errno.clamp(0, 0xffff) as usize,
    }
}

fn decode(code: usize) -> Option<Failure> {
    match code {
        2 => Some(Failure::NoTables),
        3 => Some(Failure::NoHeaders),
        4 => Some(Failure::TooMany),
        5 => Some(Failure::Outside),
        c if c >= 0x100 => Some(Failure::Protect((c - 0x100) as i32)),
        _ => None,
    }
}

/// Whether redirecting the runtime's definitions failed, and why (for the log at
/// initialisation: loader callbacks cannot log).
pub fn runtime_redirect_failure() -> Option<Failure> {
    decode(REDIRECT_FAILURE.load(Ordering::Relaxed))
}

/// Whether redirecting libc's `getenv`/`secure_getenv` failed, and why.
pub fn libc_redirect_failure() -> Option<Failure> {
    decode(LIBC_FAILURE.load(Ordering::Relaxed))
}

/// Whether redirecting `libhsa-runtime64`'s `hsa_queue_create` failed, and why.
pub fn hsa_redirect_failure() -> Option<Failure> {
    decode(HSA_FAILURE.load(Ordering::Relaxed))
}

/// Whether the runtime's own references could not be pointed back at its real functions
/// (so its internal calls may be counted twice); for the log at initialisation.
pub fn own_slots_unreadable() -> bool {
    OWN_UNREADABLE.load(Ordering::Relaxed)
}

/// Points the references the runtime (and `libhsa-runtime64`) make to their own redirected
/// exports back at the real functions, once they are relocated, so that the runtime's
/// internal calls are not counted as the program's. Cheap when there is nothing to do (two
/// atomic loads). Called from `la_preinit`, later loader events and the first use of each
/// real function; safe from a wrapper (no allocation, no lock).
pub fn settle_runtime() {
    let runtime = PENDING_RUNTIME.load(Ordering::Acquire);
    if !runtime.is_null() {
        let interposed = interposed_names(runtime);
        let decide = |name: *const c_char| -> Option<(usize, usize)> {
            // SAFETY: `name` is NUL-terminated (from the runtime's string table).
            let sym = unsafe { symbols::find_c(name) }?;
            if interposed & (1u64 << sym as u32) != 0 {
                // An object ahead of the runtime in the lookup order (an LD_PRELOAD tracer)
                // defines this name: the loader binds the runtime's own references to it, and
                // so do we (by leaving them alone).
                return None;
            }
            let real = symbols::redirected(sym);
            (real != 0).then_some((symbols::wrapper(sym)?, real))
        };
        if settle(&PENDING_RUNTIME, runtime, decide) == Fixed::Done
            && interposed == 0
            && PENDING_RUNTIME.load(Ordering::Acquire).is_null()
        {
            // Every own slot now holds the real function: nothing in the runtime leads back
            // into a wrapper.
            REENTRY_POSSIBLE.store(false, Ordering::Relaxed);
        }
    }
    let hsa = PENDING_HSA.load(Ordering::Acquire);
    if !hsa.is_null() {
        let decide = |name: *const c_char| -> Option<(usize, usize)> {
            // SAFETY: `name` is NUL-terminated (from the library's string table).
            match unsafe { short_name(name) } {
                Some(n) if n == crate::hooks::hsa::QUEUE_CREATE => {
                    let real = crate::hooks::hsa::real_queue_create();
                    (real != 0).then_some((crate::hooks::hsa::wrapper(), real))
                }
                _ => None,
            }
        };
        let _ = settle(&PENDING_HSA, hsa, decide);
    }
}

/// The wrapped names (bit `Sym as u32`) that an object ahead of `runtime` in the base
/// namespace's search list defines: the main program or an `LD_PRELOAD`ed interposer, which the
/// loader's default lookup finds first. Reads only symbol tables (loader callback or cold path).
fn interposed_names(runtime: *mut LinkMap) -> u64 {
    const _: () = assert!(symbols::WRAPPED_COUNT <= 64);
    let mut mask = 0u64;
    let mut map = MAIN_MAP.load(Ordering::Acquire);
    // Bounded: the list is finite, but a bound costs nothing if it were ever corrupt.
    for _ in 0..4096 {
        if map.is_null() || map == runtime {
            break;
        }
        // SAFETY: the base namespace's list is kept consistent by the loader; its objects stay
        // mapped while they are on it (this runs at la_preinit, at loader events, or from a
        // wrapper, none of which races an unload of an object ahead of the runtime).
        let object = unsafe { &*map };
        // SAFETY: as above: l_ld is the object's dynamic section.
        if let Some(tables) = unsafe { crate::elf::DynamicTables::read(object.l_addr, object.l_ld) }
        {
            for (i, name) in symbols::NAMES[..symbols::WRAPPED_COUNT].iter().enumerate() {
                // SAFETY: the tables belong to a mapped object (see above).
                if unsafe { tables.lookup(name) }.is_some() {
                    mask |= 1 << i;
                }
            }
        }
        map = object.l_next;
    }
    mask
}

/// Fixes one pending object's own slots; clears `pending` once there is nothing left to do.
fn settle(
    pending: &AtomicPtr<LinkMap>,
    map: *mut LinkMap,
    decide: impl Fn(*const c_char) -> Option<(usize, usize)>,
) -> Fixed {
    // SAFETY: a pending map is live: la_objclose clears it before the object goes away.
    let outcome = unsafe { crate::got::fix_own_slots(map, decide) };
    match outcome {
        Fixed::Done | Fixed::Partial | Fixed::Unreadable => {
            if outcome == Fixed::Unreadable {
                OWN_UNREADABLE.store(true, Ordering::Relaxed);
            }
            let _ = pending.compare_exchange(
                map,
                core::ptr::null_mut(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
        Fixed::NotRelocated | Fixed::Busy => {}
    }
    outcome
}

/// Patches the GOT of every relocated program object of the base namespace (see
/// [`crate::got::patch_object`]); only needed when the runtime's definitions could not be
/// redirected.
fn patch_loaded_objects() {
    let main = MAIN_MAP.load(Ordering::Acquire);
    if main.is_null()
        || RUNTIME_COOKIE.load(Ordering::Acquire) == 0
        || runtime_redirect_failure().is_none()
    {
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

/// All start-up objects are loaded and relocated: point the runtime's own references back at
/// its real functions (and, only if redirecting failed, patch the program's GOT slots).
///
/// # Safety
/// Called by the loader.
#[no_mangle]
pub unsafe extern "C" fn la_preinit(_cookie: *mut usize) {
    STARTED.store(1, Ordering::Release);
    settle_runtime();
    patch_loaded_objects();
}

/// Settles a runtime loaded by `dlopen` at the loader's namespace events after start-up: at
/// `LA_ACT_ADD` (a new `dlopen` begins, so every object of the previous one is relocated by
/// now) and at `LA_ACT_CONSISTENT` (the `dlopen` has mapped its objects; glibc relocates them
/// only afterwards, so a runtime it brought stays pending until its first wrapper call or
/// the next event).
///
/// # Safety
/// Called by the loader.
#[no_mangle]
pub unsafe extern "C" fn la_activity(_cookie: *mut usize, flag: c_uint) {
    if (flag == LA_ACT_CONSISTENT || flag == LA_ACT_ADD) && STARTED.load(Ordering::Acquire) != 0 {
        settle_runtime();
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
            PENDING_HSA.store(core::ptr::null_mut(), Ordering::Release);
            HSA_FAILURE.store(NOT_TRIED, Ordering::Relaxed);
            crate::hooks::hsa::forget_library();
        }
        if RUNTIME_COOKIE
            .compare_exchange(cookie as usize, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            // The runtime itself is unloaded: a later dlopen of it (at another address) must
            // be recognised, redirected and looked up again.
            PENDING_RUNTIME.store(core::ptr::null_mut(), Ordering::Release);
            REDIRECT_FAILURE.store(NOT_TRIED, Ordering::Relaxed);
            symbols::forget_runtime();
        }
    }
    0
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
