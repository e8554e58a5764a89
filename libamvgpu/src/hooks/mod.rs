//! The wrappers, one file per door family, and what they share.
//!
//! Every wrapper has the exact C signature of the function it replaces and starts the same
//! way: fetch the real function, then ask [`hook`] whether there is anything to do. In a
//! process without any limit `hook` is one atomic load and a predictable branch, and the call
//! goes straight to the runtime. A wrapper re-entered on the same thread (the runtime calling
//! back into a wrapped function while we are inside one) also goes straight to the runtime.

pub mod alloc;
pub mod free;
pub mod lookup;
pub mod query;

use crate::log;
use crate::state::{self, State};
use crate::symbols::{self, Sym};
use core::cell::Cell;
use core::ffi::c_int;
use hip_sys::hipError_t;

thread_local! {
    /// True while this thread runs hook logic. Const-initialised and without destructor, so it
    /// is a plain TLS slot: no allocation, no registration, nothing to tear down on exit.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Proof that this thread is inside hook logic; clears the flag when dropped.
pub(crate) struct Active {
    pub state: &'static State,
}

impl Drop for Active {
    fn drop(&mut self) {
        IN_HOOK.with(|flag| flag.set(false));
    }
}

/// The state to enforce with, or `None` when the call should go straight to the runtime: no
/// limit is configured, or this thread is already inside the hook.
#[inline]
pub(crate) fn hook() -> Option<Active> {
    let state = state::enforcing()?;
    IN_HOOK.with(|flag| {
        if flag.get() {
            None
        } else {
            flag.set(true);
            Some(Active { state })
        }
    })
}

/// Fetches the real function of a symbol as its typed pointer, or returns
/// `hipErrorNotInitialized` from the enclosing wrapper if the runtime does not export it
/// (which cannot happen for a wrapper reached through a binding to that very export).
macro_rules! real {
    ($sym:ident : $ty:ty) => {
        match $crate::symbols::real($crate::symbols::Sym::$sym) {
            // SAFETY: the address is the runtime's export of this name, whose C signature is
            // `$ty` (hip-sys documents each type from the HIP headers).
            Some(addr) => unsafe { core::mem::transmute::<usize, $ty>(addr) },
            None => return $crate::hooks::missing($crate::symbols::Sym::$sym),
        }
    };
}
pub(crate) use real;

/// What a wrapper returns when the runtime lacks the real function.
#[cold]
pub(crate) fn missing(sym: Sym) -> hipError_t {
    log::error!(
        "{} is not exported by libamdhip64; returning hipErrorNotInitialized",
        log::Bytes(symbols::NAMES[sym as usize])
    );
    hip_sys::hipErrorNotInitialized
}

/// The calling thread's current device, as the runtime sees it.
pub(crate) fn current_device() -> Result<c_int, hipError_t> {
    let Some(addr) = symbols::real(Sym::hipGetDevice) else {
        return Err(missing(Sym::hipGetDevice));
    };
    // SAFETY: the runtime's hipGetDevice has the hipGetDevice_fn signature.
    let get: hip_sys::hipGetDevice_fn = unsafe { core::mem::transmute::<usize, _>(addr) };
    let mut device: c_int = -1;
    // SAFETY: `device` is a valid out-pointer for the duration of the call.
    match unsafe { get(&mut device) } {
        hip_sys::hipSuccess => Ok(device),
        err => Err(err),
    }
}

/// Writes `value` through `out` if it is not NULL.
///
/// # Safety
/// `out` must be NULL or valid for writing a `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL and valid per the caller's guarantee.
        unsafe { out.write(value) };
    }
}

/// Reads `*ptr` if `ptr` is not NULL.
///
/// # Safety
/// `ptr` must be NULL or valid for reading a `T`.
pub(crate) unsafe fn read_in<T: Copy>(ptr: *const T) -> Option<T> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: non-NULL and valid per the caller's guarantee.
        Some(unsafe { ptr.read() })
    }
}
