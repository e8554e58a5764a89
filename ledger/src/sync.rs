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

/// The store-then-load step of `reserve` (publish my request, then read
/// everyone's) needs the single total order of SeqCst. In a real build the
/// SeqCst RMW and the SeqCst loads provide it by themselves (C++20
/// [atomics.order]: all SeqCst operations form one total order consistent
/// with program order, and a SeqCst load cannot read a value older than the
/// last SeqCst modification before it in that order, so the store-buffering
/// outcome "both miss the other's add" is forbidden). Loom models SeqCst
/// loads and RMWs only as Acquire/Release, which would report that forbidden
/// outcome; it models SeqCst *fences* exactly, so the model build places one
/// here. The model is therefore checked with a guarantee equal to, not
/// stronger than, what the real build has.
#[inline(always)]
pub(crate) fn store_load_order() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}
