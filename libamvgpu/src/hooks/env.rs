//! `getenv` and `secure_getenv` as the HIP/HSA runtime and the program see them: the pod's
//! settings survive a clean-environment child and cannot be changed by the process.
//!
//! `la_objopen` redirects the base namespace's libc definitions of `getenv` and
//! `secure_getenv` to the wrappers below ([`crate::redirect`]) and remembers the real
//! functions, so every binding to them (the program's, the runtime's, `libhsa-runtime64`'s,
//! any library's, by PLT, GOT, taken address or `dlsym`) gets the wrappers. libc's own
//! internal calls do not go through its symbol table and keep reaching libc directly.
//!
//! | name | when the process has no value | when it has one |
//! |---|---|---|
//! | `ROCR_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES` | the snapshot's (restored) | the process's |
//! | `HSA_CU_MASK`, `ROC_GLOBAL_CU_MASK`, `AMD_TASK_PRIORITY`, `HIP_OVERSUBSCRIBE`, `HIP_DEVICE_MEMORY_LIMIT`, `HIP_DEVICE_MEMORY_LIMIT_<i>`, `HIP_DEVICE_MEMORY_SHARED_CACHE` | the snapshot's | the snapshot's if it has one (pinned), else the process's |
//! | anything else | the process's | the process's |
//!
//! "The snapshot" is [`crate::snapshot`]: the initial environment, the config file and the
//! ancestors. A pinned name whose snapshot has no value is the process's own business: the pod
//! set no policy for it. Returned pointers point into the snapshot's storage, which is never
//! freed or written, so they stay valid for the life of the process.
//!
//! Cost for other names: one length-dispatched comparison against the short fixed list, then
//! the real `getenv`. `secure_getenv` answers exactly like `getenv` unless the process runs in
//! secure mode (`AT_SECURE`, e.g. setuid), where it returns what libc does (NULL): the pod's
//! values are never handed to a privileged program that asked for the secure variant.
#![allow(non_snake_case)]

use crate::snapshot::Snapshot;
use core::ffi::{c_char, c_ulong};
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// What the wrapper does for a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Answer from the snapshot only when the process has no value.
    Restore,
    /// Answer from the snapshot whenever it has a value.
    Pin,
}

/// Longest managed name (`HIP_DEVICE_MEMORY_LIMIT_31`, `HIP_DEVICE_MEMORY_SHARED_CACHE`).
const MAX_MANAGED_LEN: usize = 30;

/// The policy for `name`, `None` for every name the hook leaves alone.
pub fn policy(name: &[u8]) -> Option<Policy> {
    match name {
        b"ROCR_VISIBLE_DEVICES" | b"HIP_VISIBLE_DEVICES" => Some(Policy::Restore),
        b"HSA_CU_MASK"
        | b"ROC_GLOBAL_CU_MASK"
        | b"AMD_TASK_PRIORITY"
        | b"HIP_OVERSUBSCRIBE"
        | b"HIP_DEVICE_MEMORY_LIMIT"
        | b"HIP_DEVICE_MEMORY_SHARED_CACHE" => Some(Policy::Pin),
        _ => match name.strip_prefix(b"HIP_DEVICE_MEMORY_LIMIT_") {
            Some(index) if !index.is_empty() && index.len() <= 2 => {
                index.iter().all(u8::is_ascii_digit).then_some(Policy::Pin)
            }
            _ => None,
        },
    }
}

/// The answer for a managed name: `process` is what libc's `getenv` returned.
pub fn answer(
    policy: Policy,
    process: *mut c_char,
    snapshot: impl FnOnce() -> Option<*const c_char>,
) -> *mut c_char {
    match policy {
        Policy::Restore if !process.is_null() => process,
        _ => snapshot().map_or(process, |value| value.cast_mut()),
    }
}

static REAL_GETENV: AtomicUsize = AtomicUsize::new(0);
static REAL_SECURE_GETENV: AtomicUsize = AtomicUsize::new(0);

/// The libc functions whose definitions [`crate::redirect`] points at the wrappers below.
pub const NAMES: [&[u8]; 2] = [b"getenv", b"secure_getenv"];

/// The wrapper for `NAMES[i]`.
pub fn wrapper(i: usize) -> usize {
    if i == 0 {
        getenv as *const () as usize
    } else {
        secure_getenv as *const () as usize
    }
}

/// Records libc's real function for `NAMES[i]` (loader callback: one store).
pub fn note_real(i: usize, real: usize) {
    let slot = if i == 0 {
        &REAL_GETENV
    } else {
        &REAL_SECURE_GETENV
    };
    slot.store(real, Ordering::Relaxed);
}

type GetenvFn = unsafe extern "C" fn(*const c_char) -> *mut c_char;

/// Calls the real function in `slot`, or answers NULL if it is unknown (cannot happen: the
/// wrapper is handed out only after the slot was filled).
///
/// # Safety
/// `name` is the caller's argument (NULL or NUL-terminated).
unsafe fn call_real(slot: &AtomicUsize, name: *const c_char) -> *mut c_char {
    match slot.load(Ordering::Relaxed) {
        0 => core::ptr::null_mut(),
        addr => {
            // SAFETY: the address is libc's getenv or secure_getenv (stored by `note_real`),
            // both `char *(const char *)`.
            let real: GetenvFn = unsafe { core::mem::transmute::<usize, GetenvFn>(addr) };
            // SAFETY: forwarding the caller's argument.
            unsafe { real(name) }
        }
    }
}

/// # Safety
/// `name` is NULL or NUL-terminated (libc's contract).
unsafe fn lookup(slot: &AtomicUsize, name: *const c_char) -> *mut c_char {
    if name.is_null() {
        // SAFETY: forwarding; libc decides what NULL means.
        return unsafe { call_real(slot, name) };
    }
    // SAFETY: `name` is NUL-terminated; the read stops after MAX_MANAGED_LEN + 1 bytes.
    let len = unsafe { crate::elf::bounded_strlen(name, MAX_MANAGED_LEN + 1) };
    // SAFETY: the `len` bytes before the NUL are readable, as just established.
    let managed =
        len.and_then(|len| policy(unsafe { core::slice::from_raw_parts(name.cast(), len) }));
    // SAFETY: forwarding the caller's argument.
    let process = unsafe { call_real(slot, name) };
    let Some(policy) = managed else {
        return process;
    };
    answer(policy, process, || {
        let len = len.unwrap_or(0);
        // SAFETY: as above.
        let bytes = unsafe { core::slice::from_raw_parts(name.cast::<u8>(), len) };
        Snapshot::take().0.get_c(bytes)
    })
}

/// `getenv` for audited callers.
///
/// # Safety
/// libc's contract: `name` is a NUL-terminated string.
pub unsafe extern "C" fn getenv(name: *const c_char) -> *mut c_char {
    // SAFETY: forwarded caller guarantee.
    unsafe { lookup(&REAL_GETENV, name) }
}

/// `secure_getenv` for audited callers (see the module docs for secure mode).
///
/// # Safety
/// libc's contract: `name` is a NUL-terminated string.
pub unsafe extern "C" fn secure_getenv(name: *const c_char) -> *mut c_char {
    const AT_SECURE: c_ulong = 23;
    // SAFETY: getauxval has no preconditions (GLIBC_2.16).
    if unsafe { libc::getauxval(AT_SECURE) } != 0 {
        // SAFETY: forwarding the caller's argument to libc's own secure_getenv.
        return unsafe { call_real(&REAL_SECURE_GETENV, name) };
    }
    // SAFETY: forwarded caller guarantee.
    unsafe { lookup(&REAL_SECURE_GETENV, name) }
}

/// `HIP_OVERSUBSCRIBE` is `true` (any case) or `1`.
pub fn parse_oversubscribe(value: &[u8]) -> bool {
    value == b"1" || value.eq_ignore_ascii_case(b"true")
}

/// 0 unknown, 1 off, 2 on.
static OVERSUBSCRIBE: AtomicU8 = AtomicU8::new(0);

/// True when the pod asked for oversubscription: `hipMalloc` is then served from managed
/// memory (still counted against the limit).
#[inline]
pub fn oversubscribe() -> bool {
    // Relaxed: the answer is derived from the immutable snapshot; racing threads store the
    // same value.
    match OVERSUBSCRIBE.load(Ordering::Relaxed) {
        0 => {
            let on = Snapshot::take()
                .0
                .get(b"HIP_OVERSUBSCRIBE")
                .is_some_and(parse_oversubscribe);
            OVERSUBSCRIBE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
        state => state == 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_names_and_nothing_else() {
        assert_eq!(policy(b"ROCR_VISIBLE_DEVICES"), Some(Policy::Restore));
        assert_eq!(policy(b"HSA_CU_MASK"), Some(Policy::Pin));
        assert_eq!(policy(b"HIP_DEVICE_MEMORY_LIMIT_31"), Some(Policy::Pin));
        assert_eq!(policy(b"HIP_DEVICE_MEMORY_SHARED_CACHE"), Some(Policy::Pin));
        for other in [
            &b"PATH"[..],
            b"HIP_DEVICE_MEMORY_LIMIT_",
            b"HIP_DEVICE_MEMORY_LIMIT_123",
            b"HIP_DEVICE_MEMORY_LIMIT_x",
            b"HSA_CU_MASKS",
            b"LIBHIP_LOG_LEVEL",
            b"",
        ] {
            assert_eq!(policy(other), None, "{}", String::from_utf8_lossy(other));
        }
        let longest = [
            &b"HIP_DEVICE_MEMORY_LIMIT_31"[..],
            b"HIP_DEVICE_MEMORY_SHARED_CACHE",
        ];
        assert!(longest.iter().all(|n| n.len() <= MAX_MANAGED_LEN));
    }

    #[test]
    fn restore_fills_gaps_and_pin_overrides() {
        let mut own = *b"own\0";
        let own = own.as_mut_ptr().cast::<c_char>();
        let pod = c"pod".as_ptr();
        let null = core::ptr::null_mut();
        assert_eq!(answer(Policy::Restore, own, || Some(pod)), own);
        assert_eq!(answer(Policy::Restore, null, || Some(pod)), pod.cast_mut());
        assert_eq!(answer(Policy::Pin, own, || Some(pod)), pod.cast_mut());
        assert_eq!(answer(Policy::Pin, own, || None), own);
        assert_eq!(answer(Policy::Pin, null, || None), null);
    }

    #[test]
    fn oversubscribe_spellings() {
        for yes in [&b"true"[..], b"TRUE", b"True", b"1"] {
            assert!(parse_oversubscribe(yes));
        }
        for no in [&b"0"[..], b"false", b"yes", b"", b"true "] {
            assert!(!parse_oversubscribe(no));
        }
    }
}
