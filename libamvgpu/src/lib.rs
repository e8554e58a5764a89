//! `libamvgpu.so`: a glibc `LD_AUDIT` module that enforces a per-container limit on HIP device
//! memory and makes every memory query report that limit.
//!
//! ```text
//! LD_AUDIT=/path/libamvgpu.so HIP_DEVICE_MEMORY_LIMIT=16384m python train.py
//! ```
//!
//! # Architecture
//!
//! - `audit` (loader entry points, the only exports: `la_version`, `la_objopen`,
//!   `la_preinit`, `la_activity`, `la_objclose`; see `symbols.txt`). When `la_objopen` sees
//!   `libamdhip64.so*` (by file name or `DT_SONAME`), the base namespace's libc or
//!   `libhsa-runtime64.so*`, `redirect` rewrites the `.dynsym` entries of the wrapped names
//!   (found through a compile-time hash table, `symbols`) so that they resolve to the
//!   wrappers, after saving the real addresses. Nothing is relocated against the object yet,
//!   so every binding the loader makes from then on gets a wrapper: PLT calls (lazy or bound
//!   now), GOT-only slots (`-fno-plt`, address-taken functions, weak-symbol tests), function
//!   tables in data, `dlsym`, and libraries `dlopen`ed later, on every glibc from 2.17 on.
//!   There is no `la_symbind64` (see "Start-up cost" below). Once the runtime is relocated,
//!   `got` points its references to its own exports back at the real functions, so the
//!   runtime's internal calls are not counted as the program's.
//! - `hooks::{alloc, free, query, lookup, stream}`: the wrappers, one file per door family
//!   (`stream` records which device each stream runs on); `hooks::env` answers `getenv` for
//!   the pod's settings, `hooks::hsa` gives HSA queues the pod's priority. Each is a
//!   plain `extern "C" fn` with the door's exact signature. The real function is the runtime's
//!   export, saved when its definition was redirected or found by a lookup in
//!   `libamdhip64`'s own dynamic symbol table (`elf`; no `dlsym`), and cached in an atomic
//!   slot.
//! - `state`: built lazily on the first wrapped call (never in a loader callback): the
//!   environment snapshot, the limits, the shared ledger and the allocation trackers. In a
//!   process without any limit it records "pass-through" and every wrapper then costs one
//!   atomic load and a predictable branch before calling the runtime.
//! - `config` (pure parsing), `snapshot` (the configuration source), `log` (stderr lines).
//! - Accounting is `amvgpu_ledger`: `Ledger::reserve` before each real allocation (it never
//!   overshoots, across threads and processes, and reclaims dead processes), `release` after
//!   each successful free, and `Tracker`s from pointer/array/handle to what was reserved.
//! - `glibc_compat` (with `pthread_keys`, its fallback thread keys): keeps the import floor at GLIBC_2.17 although `std` is built against a
//!   newer glibc (hidden definitions of the few newer symbols `std` references), and keeps
//!   `libgcc_s` out of the process (hidden definitions of the unwinder entry points, which a
//!   `panic = "abort"` module never uses).
//!
//! # Variables read (once per process, into an immutable snapshot)
//!
//! The snapshot (`snapshot`) is the initial environment (`/proc/self/environ`, or, without
//! `/proc`, the environment array the program started with), then the config file
//! (`AMVGPU_CONFIG_FILE`, default `/etc/amvgpu/env`), then, only when neither names any of the
//! pod's policy settings (a child started with a clean environment), the nearest ancestor
//! process that carries them: a program's later `setenv` changes nothing, and a stripped child
//! keeps the pod's settings (`docs/environment.md` gives the exact rule).
//! `getenv`/`secure_getenv` are answered from it for the pod's names, for the program and the
//! runtime alike (`hooks::env`). `HIP_OVERSUBSCRIBE`, `AMD_TASK_PRIORITY` (`hooks::hsa`) and
//! the CU-mask check and stream-mask narrowing (`cucheck`) are described with every other
//! variable in `docs/environment.md`.
//!
//! | variable | meaning |
//! |---|---|
//! | `HIP_DEVICE_MEMORY_LIMIT` | limit for every device |
//! | `HIP_DEVICE_MEMORY_LIMIT_<i>` | limit for container-visible device `i` (0..=31); wins over the above |
//! | `HIP_DEVICE_MEMORY_SHARED_CACHE` | ledger file shared by the container's processes; default `/tmp/amvgpu/<uid>/ledger` (the hook creates `/tmp/amvgpu` mode 1777 and `<uid>` mode 0700) |
//! | `LIBHIP_LOG_LEVEL` | 0 off, 1 error, 2 warn (default), 3 info, 4 debug |
//!
//! Sizes are digits with an optional binary unit `k`, `m`, `g`, `t` (either case), optionally
//! followed by `i`, `b` or `ib`: `16384m`, `16G`, `16GiB`, `16gb`, `4GB` (= 4 GiB) and `1024`
//! (bytes) are valid.
//!
//! # What each door does under a limit
//!
//! - Allocation doors reserve the size the runtime really takes (pages; pitch × rows; padded
//!   array rows; mipmap levels; VMM handle size) on the device the memory lands on (the
//!   calling thread's current device as the runtime reports it (asked on every call when the
//!   process sees several devices; with exactly one it can only be device 0), the pool's
//!   device, or `hipMemAllocationProp.location.id`) **before** the real call, and release it
//!   if the call fails. Over the limit: `hipErrorOutOfMemory`, and the runtime is not called. Size
//!   arithmetic that overflows (`hipMalloc(SIZE_MAX)`) is `hipErrorOutOfMemory` with nothing
//!   recorded. Zero-byte requests pass through. Managed memory counts like device memory.
//! - Frees release what the allocation reserved, on the device recorded then, only if the
//!   runtime's free succeeded. Unknown pointers pass through untouched. Pools follow the
//!   runtime's model: `hipFreeAsync`ed pool blocks stay charged while cached, and are released
//!   by `hipMemPoolTrimTo`, `hipMemPoolDestroy`, `hipDeviceSynchronize`, a synchronisation of
//!   a stream whose device is known (only for pools whose release threshold is 0; a pool given
//!   a threshold through `hipMemPoolSetAttribute` keeps its cache charged), or — when a
//!   stream-ordered allocation would be refused — by the hook trimming that device's pools
//!   first. A VMM handle's bytes return when it is
//!   released and unmapped everywhere. `hipDeviceReset` releases everything the process held
//!   on the device.
//! - Queries (`hipMemGetInfo`, `hipDeviceTotalMem`, `hipDeviceGetAttribute(TotalGlobalMem)`,
//!   `hipGetDeviceProperties{,R0000,R0600}`) report total = min(limit, real total) and free =
//!   min(limit − container usage, real free); NULL out-pointers and bad device ids get the
//!   runtime's own error, untouched.
//! - `hipGetProcAddress` / `hipGetDriverEntryPoint` hand out the wrappers.
//!
//! # Failure semantics
//!
//! - An unparsable limit (`1.5G`, `-1`, empty, `16 G`, `0x10`, beyond 2^64) is logged once
//!   naming the variable and value; allocations on the devices it governs are refused and
//!   queries report 0 bytes. A limit of 0 behaves the same. Never "no limit".
//! - A device id outside 0..=31 while a limit is configured is refused (the runtime's own error
//!   if it rejects the id).
//! - A ledger file that cannot be created, opened or validated is logged with its path and
//!   reason; accounting then continues process-locally (the limit still holds per process).
//! - Without any limit variable the hook passes every call through.
//! - Loader callbacks never allocate, lock, log or panic; wrappers never panic (`panic =
//!   "abort"` in any case). An allocation, free or lookup wrapper re-entered on the same thread
//!   calls the runtime directly; query wrappers only read state, so they answer the same way
//!   either way and skip the guard on their hot path.
//! - Fork: the ledger gives a child its own (empty) usage; the hook caches no pid, and its
//!   thread-local re-entrancy flag is plain data.
//!
//! # Known limits
//!
//! - A runtime loaded by `dlopen` has its references to its own exports pointed back at the
//!   real functions at its first wrapped call or the next loader event (glibc reports nothing
//!   after relocating a `dlopen`): an allocation the runtime makes for itself from an unwrapped
//!   entry point before then is counted.
//! - The redirected `.dynsym` entries are visible to anything that reads them: `dladdr` on a
//!   wrapper names the HIP function, and a symbolizer reading the in-memory table sees the
//!   wrapper's address for it.
//! - A stream the hook did not see created (before the first wrapped call, or by an unwrapped
//!   door) is taken to run on the current device unless the runtime exports
//!   `hipStreamGetDevice`; synchronising such a stream leaves its device's cached pool blocks
//!   charged until a trim, a refusal-driven trim, a device synchronisation or a reset.
//! - `hipMemGetInfo` reports total = min(limit, real total), like the other doors, rather than
//!   the bare limit, so that all doors agree even when a limit exceeds the card.
//! - A VMM handle's mapping count is updated without a lock: mapping, unmapping or releasing
//!   the *same* handle from two threads at the same instant can lose an update (different
//!   handles are independent).
//! - Processes of different uids use different default ledger files (set
//!   `HIP_DEVICE_MEMORY_SHARED_CACHE` to a path they share).
//! - Start-up cost: as soon as an audit module defines `la_symbind64`, glibc (measured on
//!   2.36) allocates a record per PLT slot and runs its audit path on every *first* call
//!   through a lazily bound slot, whatever `la_objopen` answered: a synthetic program binding
//!   20,000 functions lazily starts about 45% slower (a 10-line C audit module that only
//!   returns `sym->st_value` costs the same). That is why this module redirects definitions
//!   instead and exports no `la_symbind64`. What remains is a fixed cost per process, about
//!   1.0 ms (1.6 ms for the process that creates the ledger file) on the development VM, of
//!   which about 0.4 ms is the audit namespace's own copy of libc, which any audit module that
//!   uses libc pays (README, "Benchmarks").
//! - Statically linked programs and musl load no audit module.

mod audit;
pub mod config;
mod cucheck;
mod elf;
#[cfg(not(test))]
mod glibc_compat;
mod got;
mod hooks;
mod log;
mod pthread_keys;
mod redirect;
mod snapshot;
mod state;
mod symbols;
