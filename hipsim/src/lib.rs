//! `hipsim`: a simulated `libamdhip64.so` for testing HIP memory hooks on machines without a GPU.
//!
//! Building this crate leaves `target/<profile>/libamdhip64.so`. A C program linked with
//! `-L target/<profile> -lamdhip64` and run with `LD_LIBRARY_PATH=target/<profile>` (or an
//! rpath) gets HIP's C signatures, error codes and symbol-version nodes, backed by a model of
//! one or more GPUs described by the environment.
//!
//! # Environment (read once, at the first HIP call)
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `HIPSIM_DEVICES` | number of devices, decimal, 0..=64 (0: hipGetDeviceCount gives 0 and `hipErrorNoDevice`, every device-bound call `hipErrorInvalidDevice`, as the real runtime on a GPU-less machine) | `1` |
//! | `HIPSIM_VRAM` | bytes per device: decimal with optional binary suffix `k`/`m`/`g`/`t` (either case), more than 0 | `64g` |
//! | `HIPSIM_ARCH` | `gcnArchName`, printable ASCII, at most 255 bytes; `major`/`minor`/`warpSize` derive from it (`gfx942` -> 9.4, warp 64; `gfx1100` -> 11.0, warp 32) | `gfx942` |
//! | `HIPSIM_CUS` | compute units (`multiProcessorCount`), 1..=65536 | `304` |
//! | `HIPSIM_STATE` | path of a state file shared by every process naming it (device-wide live/peak bytes); unset: process-local | unset |
//!
//! A bad value (e.g. `HIPSIM_VRAM=4GB`) prints one line on stderr naming the variable and the
//! problem, and then **every** HIP call returns `hipErrorNotInitialized` (3); there is never a
//! silent default. `hipRuntimeGetVersion`/`hipDriverGetVersion` still answer.
//!
//! `HIPSIM_ABI` (5, 6 or 7; default 6) is read at **build** time: it selects which symbols are
//! exported under which `hip_*` version nodes, following [`hip_sys::DOORS`]. ROCm 5 lacks
//! `hipGetDevicePropertiesR0000/R0600` and `hipGetProcAddress`; only ROCm 7 exports
//! `hipGetDriverEntryPoint`. `hipsimGetAbiMajor()` reports the choice.
//!
//! # Devices and memory
//!
//! - The current device is per thread, 0 by default; `hipSetDevice` and `hipCtxSetCurrent`
//!   change it. Bad ordinals give `hipErrorInvalidDevice`; NULL out-pointers give
//!   `hipErrorInvalidValue`; nothing crashes on bad handles or device pointers (they are looked
//!   up, never dereferenced; hipMemcpy/hipMemset check device ranges against live allocations).
//! - Every device has `HIPSIM_VRAM` bytes. An allocation that does not fit in
//!   `total - live` (device-wide, across processes sharing `HIPSIM_STATE`) fails with
//!   `hipErrorOutOfMemory` and changes nothing. Reservation is a compare-and-swap, so the
//!   device can never be over-committed, and `peak` (the most bytes live at one instant) is
//!   exact.
//! - Sizes are charged after rounding (see [`hip_sys::sim`], whose constants and functions the
//!   hook's tests can use to predict the charge exactly):
//!   - linear doors (`hipMalloc`, `hipExtMallocWithFlags`, `hipMallocAsync`,
//!     `hipMallocFromPoolAsync`): `size` rounded up to 4 KiB. Size 0: success, `*ptr = NULL`,
//!     nothing charged. A size whose rounding overflows: `hipErrorOutOfMemory`.
//!   - pitched doors (`hipMallocPitch`, `hipMemAllocPitch`, `hipMalloc3D`): pitch = width
//!     rounded up to 256 bytes; charge = `pitch * height (* depth)` rounded to 4 KiB, and it is
//!     taken by calling the exported `hipMalloc` **through the PLT** (a hook that also counts
//!     runtime-internal calls double-counts). A zero-sized result gives NULL and the pitch.
//!     `hipMemAllocPitch` requires an element size of 4, 8 or 16.
//!   - arrays (`hipMallocArray`, `hipMalloc3DArray`, `hipArrayCreate`, `hipArray3DCreate`):
//!     element bytes = sum of the channel bits / 8 (channel descriptors) or format bytes x
//!     channels (1, 2 or 4); rows of `width * element` padded to 256 bytes; height and depth of
//!     0 count as 1; total rounded to 4 KiB. Width 0 is `hipErrorInvalidValue`.
//!   - mipmapped arrays: the sum of each level's padded size (dimensions halve per level, never
//!     below 1), rounded to 4 KiB once.
//!   - `hipMallocManaged`: rounded to 4 KiB but **never charged to a device** (host-backed
//!     memory that may exceed VRAM); counted by `hipsimGetManagedCount`. Flags must be
//!     `hipMemAttachGlobal` or `hipMemAttachHost`.
//!   - VMM: `hipMemGetAllocationGranularity` reports 2 MiB (minimum and recommended);
//!     `hipMemCreate` sizes, `hipMemAddressReserve` sizes and `hipMemMap` sizes/offsets must be
//!     multiples of it. `hipMemCreate` charges the device at once; the bytes return only when the
//!     handle is released **and** unmapped everywhere, in either order. Mapped ranges are
//!     inaccessible until `hipMemSetAccess`; two mappings of one handle share bytes.
//!     `hipMemAllocationProp` is read in the built ABI's layout (ROCm 5's order when
//!     `HIPSIM_ABI=5`, else ROCm 6's; see `hip_sys::hipMemAllocationProp_R5`).
//! - Device memory is `mmap`ed address space (`MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE`):
//!   untouched pages cost nothing, so tests can allocate tens of GiB. Allocations of 2 MiB or
//!   more are 2 MiB-aligned (like real GPU allocations), smaller ones 4 KiB-aligned; live ones
//!   never overlap. `hipMemcpy` and `hipMemset` really move bytes.
//! - So that `hipMalloc`+`hipFree` cost tens of nanoseconds, not the microseconds of an
//!   `mmap`/`munmap` pair, each process reserves per device, at its first allocation there, one
//!   stretch of address space (`VRAM` for blocks under 2 MiB plus `2 x VRAM` for bigger ones,
//!   capped at 256 GiB + 512 GiB; not at all when `RLIMIT_AS` is set, e.g. by `ulimit -v`,
//!   whose budget it would eat) and carves allocations, arrays and pool blocks from it
//!   (managed memory, never charged to a device, keeps one mapping per allocation).
//!   Consequences a hook must live with, as with the real runtime:
//!   - **Addresses are reused.** A freed block under 2 MiB is handed out again to the next
//!     allocation of the same rounded size (most recently freed first) by a thread that carves
//!     from the same part of the arena: blocks under 2 MiB come from 2 MiB chunks dealt out to
//!     16 shards, each thread carves from one shard's chunks (threads get shards round-robin),
//!     and a freed block returns to the shard that carved it, so threads allocating at once do
//!     not wait for each other. Freed bigger blocks return to a best-fit free list.
//!   - **Memory is not zeroed.** A reused block under 2 MiB keeps the bytes it had (real
//!     `hipMalloc` does not zero either) and its pages stay resident; a freed block of 2 MiB or
//!     more gives its pages back to the kernel (`MADV_DONTNEED`), so it reads as zeroes when
//!     reused. `hipDeviceReset` leaving nothing live on the device gives every page back.
//!   - Out-of-memory is decided by the device counters alone, at exactly the points above:
//!     when the reservation is full, fragmented or refused by the kernel, a block gets a
//!     mapping of its own instead.
//! - Frees: `hipFree(NULL)` succeeds; freeing an unknown pointer or handle gives
//!   `hipErrorInvalidValue` and changes nothing. `hipDeviceReset` frees everything the process
//!   holds on its current device (allocations, arrays, pool caches, non-default pools, streams,
//!   VMM handles and their mappings).
//!
//! # Pools and stream-ordered allocation
//!
//! Streams are synchronous. Each device has a default pool (`hipDeviceGetDefaultMemPool`);
//! `hipMallocAsync` allocates from the stream's device's default pool. Every pool behaves as
//! with release threshold 0: `hipFreeAsync` of pool memory keeps the block cached in its pool,
//! **still charged** to the device; `hipMallocAsync`/`hipMallocFromPoolAsync` reuse a cached
//! block of exactly the same rounded size; `hipDeviceSynchronize` / `hipStreamSynchronize`
//! return every cached block of that device; `hipMemPoolTrimTo(pool, keep)` returns cached
//! blocks (most recently freed first) until at most `keep` bytes stay cached;
//! `hipMemPoolDestroy` returns its cache (the default pool cannot be destroyed).
//! `hipFreeAsync` of `hipMalloc` memory frees it at once.
//!
//! # Processes
//!
//! With `HIPSIM_STATE`, every process naming the file shares one view of each device's live
//! and peak bytes (a fixed-size file of atomics with a magic/version header). All processes
//! must agree on `HIPSIM_DEVICES` and `HIPSIM_VRAM`; a mismatch is a configuration error. At
//! normal exit a process gives back what it still holds, as a driver does. A fork child owns
//! none of its parent's device memory: its first HIP call starts from an empty registry, and
//! its exit gives nothing back. A child that makes no HIP call never touches hipsim's locks.
//! A child is recognised through a `pthread_atfork` handler, so children made by `fork()` (not
//! by a raw `clone` system call or glibc's `_Fork`, which run no handlers) get this treatment.
//!
//! # Lookups
//!
//! `hipGetProcAddress` (HIP 6.1 signature) and `hipGetDriverEntryPoint` return the addresses of
//! the exported (versioned) symbols of this build only. `hipVersion` may be `major*100+minor`
//! (601) or the `HIP_VERSION` encoding (60100000); a symbol whose node is newer than the
//! requested version gives `HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`, an unknown one
//! `HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`, both with `hipErrorInvalidValue` and `*pfn = NULL`.
//! `"hipGetDeviceProperties"` with a version >= 600 resolves to `hipGetDevicePropertiesR0600`.
//!
//! # Queries
//!
//! `hipMemGetInfo` gives the current device's `total - live` (device-wide) and `total`;
//! `hipDeviceTotalMem`, `hipDeviceGetAttribute(hipDeviceAttributeTotalGlobalMem)` (clamped to
//! `INT32_MAX`, as the real runtime does) and all three `hipGetDeviceProperties*` agree on
//! `HIPSIM_VRAM`. `hipMemPtrGetInfo` reports the charged size of the allocation containing a
//! pointer.
//!
//! # Introspection exports (not HIP)
//!
//! `hipsimGetUsage(device, *live, *peak)`, `hipsimGetProcessUsage(device, *bytes)`,
//! `hipsimGetManagedCount(*count, *bytes)`, `hipsimGetAllocationCount(*count)`,
//! `hipsimGetPoolCachedBytes(device, *bytes)`, `hipsimGetLastCuMask(words, capacity, *len)`,
//! `hipsimGetAbiMajor()`. They are unversioned and return `hipError_t`.
//! `hipsimInternalMalloc(**ptr, size)` allocates the way the runtime does for itself (its own
//! PLT-bound `hipMalloc`, from outside any door).
//! `hipsimRuntimeGetenv(name)` returns what the runtime's own `getenv` (a PLT call from this
//! library) answers.
//!
//! # HSA queues
//!
//! With `HIPSIM_HSA=<path of a libhsa-runtime64>` (the `hsasim` crate builds
//! `libhsa_runtime64.so`), every stream creation `dlopen`s it once and creates one HSA queue
//! per stream with `hsa_queue_create` (found with `dlsym`), destroyed with `hsa_queue_destroy`
//! by `hipStreamDestroy`. The real runtime links `libhsa-runtime64` instead; the simulator
//! keeps it optional and never loads one unless asked (see `src/hsa.rs`).

// HIP's C names (hipMemcpyHostToDevice, ...) are used as constants in patterns.
#![allow(non_upper_case_globals)]

mod arena;
mod config;
mod doors;
mod hsa;
mod memory;
mod sim;
mod usage;

mod exports {
    include!(concat!(env!("OUT_DIR"), "/exports.rs"));
}

pub use exports::ABI_MAJOR;
