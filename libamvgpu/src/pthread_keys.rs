//! Thread-specific keys for a glibc older than 2.34, where the real ones are out of reach (see
//! `trampoline!` in `glibc_compat`). A few keys, values in a plain thread-local array,
//! destructors never run: the same policy as `glibc_compat`'s `__cxa_thread_atexit_impl`, and
//! for the same reason (no thread-local of this module has a destructor that matters; std only
//! reaches these on its panic and thread-handle paths, and a release build links no call to
//! them at all).
//!
//! Compiled into the test harness too (unlike `glibc_compat`, whose symbol definitions must
//! not reach any other binary), so the fallback is unit-tested.
#![cfg_attr(test, allow(dead_code))]

use core::cell::Cell;
use core::ffi::{c_int, c_uint, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

pub(crate) const KEYS: usize = 16;
static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Const-initialised and without destructor: a plain TLS block, no key needed.
    static VALUES: [Cell<*mut c_void>; KEYS] =
        const { [const { Cell::new(core::ptr::null_mut()) }; KEYS] };
}

/// `pthread_key_create(key, destructor)`: `EAGAIN` once every key is taken.
///
/// # Safety
/// `key` must be valid for writing a `pthread_key_t` (`c_uint`).
pub(crate) unsafe extern "C" fn key_create(key: *mut c_uint, _dtor: *mut c_void) -> c_int {
    // Relaxed: a key number only has to be unique.
    let next = NEXT.fetch_add(1, Ordering::Relaxed);
    if next >= KEYS {
        return libc::EAGAIN;
    }
    // SAFETY: caller guarantee.
    unsafe { key.write(next as c_uint) };
    0
}

/// `pthread_key_delete`: key numbers are not reused.
pub(crate) extern "C" fn key_delete(key: c_uint) -> c_int {
    if (key as usize) < KEYS {
        0
    } else {
        libc::EINVAL
    }
}

/// `pthread_setspecific` for this thread.
pub(crate) extern "C" fn set_specific(key: c_uint, value: *const c_void) -> c_int {
    VALUES.with(|values| match values.get(key as usize) {
        Some(cell) => {
            cell.set(value.cast_mut());
            0
        }
        None => libc::EINVAL,
    })
}

/// `pthread_getspecific` for this thread: NULL until set.
pub(crate) extern "C" fn get_specific(key: c_uint) -> *mut c_void {
    VALUES.with(|values| {
        values
            .get(key as usize)
            .map_or(core::ptr::null_mut(), Cell::get)
    })
}

#[cfg(test)]
mod tests {
    use super as fallback;

    use core::ffi::{c_uint, c_void};

    /// The fallback keys behave like pthread's where std relies on them: distinct keys, values
    /// per thread (NULL until set), errors for unknown keys, and `EAGAIN`, not a wrap, once all
    /// are taken. One test, because the key counter is process-wide.
    #[test]
    fn fallback_keys_hold_one_value_per_thread_and_run_out_cleanly() {
        let mut a: c_uint = c_uint::MAX;
        let mut b: c_uint = c_uint::MAX;
        // SAFETY: valid out-pointers.
        unsafe {
            assert_eq!(fallback::key_create(&mut a, core::ptr::null_mut()), 0);
            assert_eq!(fallback::key_create(&mut b, core::ptr::null_mut()), 0);
        }
        assert_ne!(a, b);
        assert!(fallback::get_specific(a).is_null());
        let (x, y) = (1usize as *const c_void, 2usize as *const c_void);
        assert_eq!(fallback::set_specific(a, x), 0);
        assert_eq!(fallback::set_specific(b, y), 0);
        std::thread::spawn(move || {
            let y = 2usize as *const c_void;
            assert!(
                fallback::get_specific(a).is_null(),
                "a new thread starts empty"
            );
            assert_eq!(fallback::set_specific(a, y), 0);
            assert_eq!(fallback::get_specific(a), y.cast_mut());
        })
        .join()
        .unwrap();
        assert_eq!(
            fallback::get_specific(a),
            x.cast_mut(),
            "another thread's value stays its own"
        );
        assert_eq!(fallback::get_specific(b), y.cast_mut());
        let unknown = fallback::KEYS as c_uint;
        assert_eq!(fallback::set_specific(unknown, x), libc::EINVAL);
        assert!(fallback::get_specific(unknown).is_null());
        assert_eq!(fallback::key_delete(unknown), libc::EINVAL);
        assert_eq!(fallback::key_delete(a), 0);
        let mut last: c_uint = 0;
        let mut refused = false;
        for _ in 0..=fallback::KEYS {
            // SAFETY: a valid out-pointer.
            match unsafe { fallback::key_create(&mut last, core::ptr::null_mut()) } {
                0 => assert!((last as usize) < fallback::KEYS),
                rc => {
                    assert_eq!(rc, libc::EAGAIN);
                    refused = true;
                }
            }
        }
        assert!(
            refused,
            "creating more than KEYS keys must fail with EAGAIN"
        );
    }
}
