//! Keeps the module loadable on glibc 2.17: no import may need a symbol version newer than that.
//!
//! The library is built on a newer glibc (2.36 here), so every libc function the link pulls in
//! binds to its *current* default version. Our own code only calls old functions, but Rust's
//! `std` (panic reporting, thread handles, file metadata) references a few that gained a new
//! version node later: `pthread_key_create`/`pthread_key_delete`/`pthread_setspecific` (moved
//! into libc proper in 2.34), `stat64`/`fstat64` (real exports since 2.33), and the weak
//! `statx` (2.28), `gettid` (2.30) and `__cxa_thread_atexit_impl` (2.18).
//!
//! A definition in an object file beats a shared library's, so this module defines those names
//! itself (hidden, never exported: the version script keeps only `la_*`), and `std`'s references
//! bind here:
//! - the pthread key functions jump to the *old* versioned libc symbols, selected with the
//!   assembler's `.symver` (x86-64: `GLIBC_2.2.5`; aarch64: `GLIBC_2.17`, its base version);
//!   before glibc 2.34 these live in `libpthread.so.0`, which is not loaded in the audit
//!   namespace, so the references are weak and fall back to a small in-module implementation;
//! - `stat64`, `fstat64`, `statx` and `gettid` make the system call directly (on both
//!   architectures the kernel's `struct stat` is glibc's `struct stat64`);
//! - `__cxa_thread_atexit_impl` registers nothing and reports success. It exists only for
//!   thread-local values with destructors; this crate has none (its one thread-local is a
//!   destructor-less `Cell<bool>`), and `std` only creates one on the panic path, which aborts
//!   the process immediately after (`panic = "abort"`), so no destructor is ever lost.
//!
//! `objdump -T libamvgpu.so | grep GLIBC_` shows the result; the integration suite checks it.

use core::ffi::{c_char, c_int, c_uint, c_void};

#[cfg(target_arch = "x86_64")]
macro_rules! old_libc_version {
    () => {
        "GLIBC_2.2.5"
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! old_libc_version {
    () => {
        "GLIBC_2.17"
    };
}

/// The trampoline's body: load the (weak) import's address from the GOT, jump to it, or to the
/// fallback when the loader left it 0.
#[cfg(target_arch = "x86_64")]
macro_rules! load_or_fallback {
    ($name:literal) => {
        concat!(
            "mov rax, qword ptr [rip + amvgpu_old_",
            $name,
            "@GOTPCREL]\n",
            "test rax, rax\n",
            "jz {fallback}\n",
            "jmp rax"
        )
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! load_or_fallback {
    ($name:literal) => {
        concat!(
            "adrp x16, :got:amvgpu_old_",
            $name,
            "\n",
            "ldr x16, [x16, :got_lo12:amvgpu_old_",
            $name,
            "]\n",
            "cbz x16, {fallback}\n",
            "br x16"
        )
    };
}

/// Defines `$name` as a hidden function that tail-jumps to `$name@<old version>` in libc, or
/// to `$fallback` when the loader found no such symbol. The reference is *weak*: on glibc 2.34+
/// libc itself carries these old versions; before 2.34 they live in `libpthread.so.0`, which is
/// not loaded in the audit namespace (the module does not make it NEEDED: loading it costs
/// 0.1-0.17 ms of every process start), so the slot stays 0 and `crate::pthread_keys` answers.
macro_rules! trampoline {
    ($name:literal, $fallback:path) => {
        core::arch::global_asm!(
            concat!(".weak amvgpu_old_", $name),
            concat!(".symver amvgpu_old_", $name, ", ", $name, "@", old_libc_version!()),
            concat!(".globl ", $name),
            concat!(".hidden ", $name),
            concat!(".type ", $name, ", %function"),
            ".p2align 4",
            concat!($name, ":"),
            load_or_fallback!($name),
            concat!(".size ", $name, ", . - ", $name),
            fallback = sym $fallback,
        );
    };
}

trampoline!("pthread_key_create", crate::pthread_keys::key_create);
trampoline!("pthread_key_delete", crate::pthread_keys::key_delete);
trampoline!("pthread_setspecific", crate::pthread_keys::set_specific);
trampoline!("pthread_getspecific", crate::pthread_keys::get_specific);

/// Defines `$name` as a hidden symbol that tail-jumps to the Rust function `$target` (whose
/// own name is mangled and unexported). Weak, because std refers to some of these names (statx,
/// gettid) weakly: under LTO a strong definition would make the linker warn that the binding
/// changed. A weak definition in the module still wins over libc's at link time, and hidden
/// makes it local to the module.
macro_rules! hidden_alias {
    ($name:literal, $target:path) => {
        core::arch::global_asm!(
            concat!(".weak ", $name),
            concat!(".hidden ", $name),
            concat!(".type ", $name, ", %function"),
            ".p2align 4",
            concat!($name, ":"),
            concat!(jump!(), " {target}"),
            concat!(".size ", $name, ", . - ", $name),
            target = sym $target,
        );
    };
}

#[cfg(target_arch = "x86_64")]
macro_rules! jump {
    () => {
        "jmp"
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! jump {
    () => {
        "b"
    };
}

hidden_alias!("stat64", stat64);
hidden_alias!("fstat64", fstat64);
hidden_alias!("statx", statx);
hidden_alias!("gettid", gettid);
hidden_alias!("__cxa_thread_atexit_impl", cxa_thread_atexit_impl);

/// `stat64(2)` without the 2.33 export.
///
/// # Safety
/// As `stat64`: `path` NUL-terminated, `buf` valid for a `struct stat`.
unsafe extern "C" fn stat64(path: *const c_char, buf: *mut c_void) -> c_int {
    // SAFETY: arguments forwarded under the caller's guarantee; newfstatat with AT_FDCWD and
    // flags 0 is stat(2).
    unsafe { libc::syscall(libc::SYS_newfstatat, libc::AT_FDCWD, path, buf, 0) as c_int }
}

/// `fstat64(2)` without the 2.33 export.
///
/// # Safety
/// As `fstat64`: `buf` valid for a `struct stat`.
unsafe extern "C" fn fstat64(fd: c_int, buf: *mut c_void) -> c_int {
    // SAFETY: arguments forwarded under the caller's guarantee.
    unsafe { libc::syscall(libc::SYS_fstat, fd, buf) as c_int }
}

/// `statx(2)` without the 2.28 export.
///
/// # Safety
/// As `statx`: `path` NUL-terminated, `buf` valid for a `struct statx`.
unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buf: *mut c_void,
) -> c_int {
    // SAFETY: arguments forwarded under the caller's guarantee; old kernels answer ENOSYS,
    // which std handles by falling back to stat64.
    unsafe { libc::syscall(libc::SYS_statx, dirfd, path, flags, mask, buf) as c_int }
}

/// `gettid(2)` without the 2.30 export.
extern "C" fn gettid() -> c_int {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as c_int }
}

/// See the module docs: registers nothing (no thread-local with a destructor outlives a panic).
///
/// # Safety
/// Never dereferences its arguments.
unsafe extern "C" fn cxa_thread_atexit_impl(
    _dtor: *mut c_void,
    _obj: *mut c_void,
    _dso: *mut c_void,
) -> c_int {
    0
}

// ---------------------------------------------------------------------------------------------
// The unwinder.
//
// `std` is prebuilt for `panic = "unwind"`, so its landing pads reference `_Unwind_Resume` and
// its backtrace code `_Unwind_Backtrace` and friends, which would make `libgcc_s.so.1` NEEDED:
// one more library for the loader to find, map and relocate in every hooked process (measured:
// about 0.1 ms of CPU per process start on the development VM, a quarter of what a minimal
// Rust audit module costs over a C one). This module never unwinds: it is built with
// `panic = "abort"`, so a panic aborts before any unwinding starts and no landing pad is ever
// entered. Defining the names here (hidden, like the ones above) lets the linker drop
// `libgcc_s` (`--as-needed`). The backtrace functions report an empty stack, so a panic
// message (printed just before the abort) has no backtrace; `_Unwind_Resume`, which only a
// landing pad calls, aborts. `exports.rs::links_no_unwinder` checks that `libgcc_s` stays out.

hidden_alias!("_Unwind_Backtrace", unwind_backtrace);
hidden_alias!("_Unwind_GetIP", unwind_get_zero);
hidden_alias!("_Unwind_GetIPInfo", unwind_get_ip_info);
hidden_alias!("_Unwind_GetDataRelBase", unwind_get_zero);
hidden_alias!("_Unwind_GetTextRelBase", unwind_get_zero);
hidden_alias!("_Unwind_GetRegionStart", unwind_get_zero);
hidden_alias!("_Unwind_GetLanguageSpecificData", unwind_get_zero);
hidden_alias!("_Unwind_SetGR", unwind_set);
hidden_alias!("_Unwind_SetIP", unwind_set);
hidden_alias!("_Unwind_Resume", unwind_resume);

/// `_URC_END_OF_STACK`: the walk ends before the first frame.
extern "C" fn unwind_backtrace(_trace: *mut c_void, _arg: *mut c_void) -> c_int {
    5
}

/// Context queries: there is never a context to ask about (no walk ever visits a frame).
extern "C" fn unwind_get_zero(_context: *mut c_void) -> usize {
    0
}

/// `_Unwind_GetIPInfo(context, *ip_before_insn)`: as above, and the flag is left alone.
extern "C" fn unwind_get_ip_info(_context: *mut c_void, _ip_before_insn: *mut c_int) -> usize {
    0
}

/// Register writes of a personality routine: never called (nothing ever unwinds).
extern "C" fn unwind_set(_context: *mut c_void, _index: usize, _value: usize) {}

/// Only a landing pad resumes unwinding, and with `panic = "abort"` none is ever entered.
extern "C" fn unwind_resume(_exception: *mut c_void) -> ! {
    std::process::abort()
}
