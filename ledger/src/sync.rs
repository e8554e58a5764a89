//! The atomics the lock-free algorithms are written against: `std`'s in a
//! normal build, `loom`'s under `--cfg loom`, so the very same code is model
//! checked.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};

pub(crate) use std::sync::atomic::Ordering;

/// Back-off between retries of a contended operation. Under loom it yields so
/// the model explores the other threads' progress instead of spinning.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
