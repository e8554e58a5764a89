//! The simulator's process state: configuration, device counters and the allocation registry.
//!
//! The registry is a test oracle, not a product: one `Mutex` guards everything, including the
//! per-device [`Arena`]s that device memory is carved from, so `hipMalloc`+`hipFree` take the
//! lock once each. Fork: a child inherits the parent's registry but none of its device memory
//! (as with a real GPU, where the child has its own context), so the first call in a child
//! starts from an empty registry (and fresh, not yet reserved, arenas), and the exit hook only
//! returns the bytes of the process that allocated them.

use crate::arena::Arena;
use crate::config::{self, Config};
use crate::memory;
use crate::usage::Usage;
use hip_sys::*;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// What an address-keyed allocation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocKind {
    /// hipMalloc and everything built on it (pitched, 3D, ExtMallocWithFlags).
    Linear,
    /// hipMallocManaged: host-backed, never charged to a device.
    Managed,
    /// hipMallocAsync / hipMallocFromPoolAsync: belongs to the pool with this handle.
    Pool(usize),
}

#[derive(Debug, Clone, Copy)]
pub struct Alloc {
    pub bytes: usize,
    pub device: usize,
    pub kind: AllocKind,
}

/// An array or mipmapped array: its handle owns `base..base+bytes`.
#[derive(Debug)]
pub struct DevArray {
    pub _token: Box<u64>,
    pub base: usize,
    pub bytes: usize,
    pub device: usize,
}

#[derive(Debug)]
pub struct Pool {
    pub _token: Box<u64>,
    pub device: usize,
    pub is_default: bool,
    /// Freed blocks kept charged to the device until a synchronisation or hipMemPoolTrimTo.
    pub cache: Vec<(usize, usize)>,
}

#[derive(Debug)]
pub struct Stream {
    pub _token: Box<u64>,
    pub device: usize,
    pub cu_mask: Option<Vec<u32>>,
    /// The stream's HSA queue (0: none, see `crate::hsa`).
    pub queue: usize,
}

#[derive(Debug)]
pub struct VmmHandle {
    pub _token: Box<u64>,
    pub fd: libc::c_int,
    pub bytes: usize,
    pub device: usize,
    pub released: bool,
    pub mappings: usize,
}

#[derive(Debug, Clone, Copy)]
pub struct Mapping {
    pub bytes: usize,
    pub handle: usize,
    pub prot: libc::c_int,
}

/// Hashes an address with one multiply, folding the high half down: addresses of device
/// memory are page-aligned, so their low bits alone would put everything in a few buckets.
/// SipHash's resistance to chosen keys buys nothing here and costs tens of nanoseconds per
/// `hipMalloc`/`hipFree`.
#[derive(Debug, Default)]
pub struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        let mixed = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        mixed ^ (mixed >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)) ^ (self.0 >> 56);
        }
    }

    fn write_usize(&mut self, value: usize) {
        self.0 = value as u64;
    }
}

pub type AddressMap<V> = HashMap<usize, V, BuildHasherDefault<AddressHasher>>;

#[derive(Debug, Default)]
pub struct Registry {
    pub owner_pid: u32,
    pub allocs: AddressMap<Alloc>,
    /// Where this process carves each device's memory from (index: device).
    pub arenas: Vec<Arena>,
    pub arrays: HashMap<usize, DevArray>,
    pub mipmaps: HashMap<usize, DevArray>,
    pub pools: HashMap<usize, Pool>,
    pub default_pools: Vec<usize>,
    pub streams: HashMap<usize, Stream>,
    pub vmm: HashMap<usize, VmmHandle>,
    /// VMM reservations: base -> size.
    pub reservations: BTreeMap<usize, usize>,
    /// VMM mappings: base -> mapping.
    pub mappings: BTreeMap<usize, Mapping>,
    pub managed_count: usize,
    pub managed_bytes: usize,
    pub last_cu_mask: Option<Vec<u32>>,
}

pub fn token_addr(token: &u64) -> usize {
    token as *const u64 as usize
}

impl Registry {
    fn new(config: &Config) -> Registry {
        let devices = config.devices;
        let vram = usize::try_from(config.vram).unwrap_or(usize::MAX);
        let mut r = Registry {
            owner_pid: current_pid(),
            arenas: (0..devices).map(|_| Arena::new(vram)).collect(),
            ..Registry::default()
        };
        for device in 0..devices {
            let token = Box::new(0u64);
            let handle = token_addr(&token);
            r.pools.insert(
                handle,
                Pool {
                    _token: token,
                    device,
                    is_default: true,
                    cache: Vec::new(),
                },
            );
            r.default_pools.push(handle);
        }
        r
    }

    /// Finds the device allocation containing `[addr, addr + len)`: linear, managed, pool or
    /// array memory, or a VMM mapping with access `need` (PROT_READ or PROT_WRITE).
    pub fn covers(&self, addr: usize, len: usize, need: libc::c_int) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        // A small linear scan is fine: the registry is a test oracle.
        let within = |base: usize, bytes: usize| addr >= base && end <= base + bytes;
        // Copies mostly start at an allocation's base: look that up before scanning.
        if let Some(a) = self.allocs.get(&addr) {
            if end <= addr + a.bytes {
                return true;
            }
        }
        if self.allocs.iter().any(|(&b, a)| within(b, a.bytes)) {
            return true;
        }
        if self
            .arrays
            .values()
            .chain(self.mipmaps.values())
            .any(|a| within(a.base, a.bytes))
        {
            return true;
        }
        // A VMM range may span several adjacent mappings.
        let mut cursor = addr;
        while cursor < end {
            let Some((&base, m)) = self.mappings.range(..=cursor).next_back() else {
                return false;
            };
            if cursor >= base + m.bytes || m.prot & need != need {
                return false;
            }
            cursor = base + m.bytes;
        }
        len > 0
    }

    /// Bytes this process holds on each device (allocations, arrays, pool caches, VMM handles).
    pub fn held_per_device(&self, devices: usize) -> Vec<usize> {
        let mut held = vec![0usize; devices];
        for a in self.allocs.values() {
            if a.kind != AllocKind::Managed {
                held[a.device] += a.bytes;
            }
        }
        for a in self.arrays.values().chain(self.mipmaps.values()) {
            held[a.device] += a.bytes;
        }
        for p in self.pools.values() {
            held[p.device] += p.cache.iter().map(|&(_, b)| b).sum::<usize>();
        }
        for h in self.vmm.values() {
            held[h.device] += h.bytes;
        }
        held
    }
}

/// A device's properties in both layouts, computed once: `hipGetDevicePropertiesR0600` is one
/// of the hottest HIP calls in real workloads, and the simulator is the baseline hook overhead
/// is measured against.
pub struct DeviceProps {
    pub r0000: hipDeviceProp_tR0000,
    pub r0600: hipDeviceProp_tR0600,
}

// SAFETY: the only pointer fields (hdpMemFlushCntl, hdpRegFlushCntl) are null and never
// dereferenced, and the values are never mutated after initialisation.
unsafe impl Sync for DeviceProps {}
// SAFETY: as above; moving the values between threads moves plain data and null pointers.
unsafe impl Send for DeviceProps {}

pub struct Sim {
    pub config: Config,
    pub usage: Usage,
    pub props: Vec<DeviceProps>,
    registry: Mutex<Registry>,
}

static SIM: OnceLock<Result<Sim, String>> = OnceLock::new();

/// This process's pid, kept current by a `pthread_atfork` child handler: `getpid` is a system
/// call, and asking it on every registry access cost more than the rest of `hipMalloc`. (A
/// child made by a raw `clone` system call or glibc's `_Fork`, which run no fork handlers, is
/// not recognised as a new process; `fork()`, `vfork()`+`exec` and `posix_spawn` are fine.)
static PID: AtomicU32 = AtomicU32::new(0);

extern "C" fn note_fork_child() {
    // Relaxed: the child is single-threaded while fork handlers run.
    PID.store(std::process::id(), Ordering::Relaxed);
}

fn current_pid() -> u32 {
    PID.load(Ordering::Relaxed)
}

thread_local! {
    static CURRENT_DEVICE: Cell<usize> = const { Cell::new(0) };
}

/// Address of a device's context handle: stable, distinct, never dereferenced by anyone.
static CONTEXTS: [u8; config::MAX_DEVICES] = [0; config::MAX_DEVICES];

pub fn context_handle(device: usize) -> hipCtx_t {
    &CONTEXTS[device] as *const u8 as hipCtx_t
}

pub fn context_device(ctx: hipCtx_t) -> Option<usize> {
    let base = CONTEXTS.as_ptr() as usize;
    let addr = ctx as usize;
    (addr >= base && addr < base + config::MAX_DEVICES).then(|| addr - base)
}

/// The simulator, initialised on first use; `Err` carries a `hipError_t` to return.
pub fn get() -> Result<&'static Sim, hipError_t> {
    let sim = SIM.get_or_init(|| {
        PID.store(std::process::id(), Ordering::Relaxed);
        // SAFETY: note_fork_child is an extern "C" fn without arguments that never unwinds
        // (panic = abort) and only stores to a static atomic; the prepare and parent handlers
        // are absent, which pthread_atfork allows.
        unsafe { libc::pthread_atfork(None, None, Some(note_fork_child)) };
        let result = config::from_lookup(|name| std::env::var_os(name)).and_then(|config| {
            let usage = Usage::open(&config)?;
            let registry = Mutex::new(Registry::new(&config));
            let props = (0..config.devices)
                .map(|d| DeviceProps {
                    r0000: crate::doors::query::fill_r0000(&config, d),
                    r0600: crate::doors::query::fill_r0600(&config, d),
                })
                .collect();
            Ok(Sim {
                config,
                usage,
                props,
                registry,
            })
        });
        match &result {
            Ok(_) => register_exit_hook(),
            Err(why) => {
                eprintln!("hipsim: {why}; every HIP call fails with hipErrorNotInitialized")
            }
        }
        result
    });
    sim.as_ref().map_err(|_| hipErrorNotInitialized)
}

impl Sim {
    /// The registry, reset first if this process is a fork child (see the module docs).
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        let mut guard = self
            .registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let pid = current_pid();
        if guard.owner_pid != pid {
            // The memory mappings were inherited copy-on-write, but the child owns no device
            // bytes: forget the parent's records (without releasing their bytes).
            let fresh = Registry::new(&self.config);
            let inherited = std::mem::replace(&mut *guard, fresh);
            std::mem::forget(inherited);
            guard.owner_pid = pid;
        }
        guard
    }

    pub fn devices(&self) -> usize {
        self.config.devices
    }

    /// The calling thread's device. On a machine without devices every device-bound call gives
    /// `hipErrorInvalidDevice`, as the real ROCm 5.2 runtime does on a GPU-less machine
    /// (measured: only hipGetDeviceCount says `hipErrorNoDevice`).
    pub fn current_device(&self) -> Result<usize, hipError_t> {
        if self.config.devices == 0 {
            return Err(hipErrorInvalidDevice);
        }
        Ok(CURRENT_DEVICE.with(Cell::get).min(self.config.devices - 1))
    }

    pub fn set_current_device(&self, device: usize) {
        CURRENT_DEVICE.with(|d| d.set(device));
    }

    /// Validates a device ordinal from C.
    pub fn device(&self, device: libc::c_int) -> Result<usize, hipError_t> {
        usize::try_from(device)
            .ok()
            .filter(|&d| d < self.config.devices)
            .ok_or(hipErrorInvalidDevice)
    }

    /// Charges `bytes` (rounded, non-zero) to `device` and finds memory for them: from the
    /// device's arena, or a mapping of their own when the arena cannot serve them. Only the
    /// charge decides out-of-memory (and a kernel refusing the fallback mapping, as before).
    pub fn take_device_memory(
        &self,
        reg: &mut Registry,
        device: usize,
        bytes: usize,
    ) -> Result<usize, hipError_t> {
        self.charge(device, bytes)?;
        self.place_charged(reg, device, bytes)
    }

    /// The first half of [`Sim::take_device_memory`], which hot doors call before locking the
    /// registry: the device counter is shared by every thread (and process), and updating it
    /// under the lock would make threads queue for both.
    pub fn charge(&self, device: usize, bytes: usize) -> Result<(), hipError_t> {
        if self.usage.reserve(device, bytes as u64) {
            Ok(())
        } else {
            Err(hipErrorOutOfMemory)
        }
    }

    /// The second half of [`Sim::take_device_memory`]: memory for `bytes` already charged,
    /// uncharged again if none can be found.
    pub fn place_charged(
        &self,
        reg: &mut Registry,
        device: usize,
        bytes: usize,
    ) -> Result<usize, hipError_t> {
        match reg.arenas[device]
            .take(bytes)
            .or_else(|| memory::map_device(bytes))
        {
            Some(addr) => Ok(addr),
            None => {
                self.usage.release(device, bytes as u64);
                Err(hipErrorOutOfMemory)
            }
        }
    }

    /// Returns and uncharges memory taken by [`Sim::take_device_memory`].
    pub fn give_back_device_memory(
        &self,
        reg: &mut Registry,
        device: usize,
        addr: usize,
        bytes: usize,
    ) {
        Self::unplace(reg, device, addr, bytes);
        self.usage.release(device, bytes as u64);
    }

    /// Returns memory without uncharging it; the caller releases the charge (after unlocking
    /// the registry, see [`Sim::charge`]).
    pub fn unplace(reg: &mut Registry, device: usize, addr: usize, bytes: usize) {
        if !reg.arenas[device].give_back(addr, bytes) {
            memory::unmap(addr, bytes);
        }
    }
}

extern "C" fn release_on_exit() {
    let Some(Ok(sim)) = SIM.get() else { return };
    // Never block exit: if another thread holds the registry, leave the bytes charged.
    let Ok(registry) = sim.registry.try_lock() else {
        return;
    };
    if registry.owner_pid != std::process::id() {
        return; // a fork child exiting: it owns none of the recorded bytes
    }
    for (device, bytes) in registry
        .held_per_device(sim.config.devices)
        .into_iter()
        .enumerate()
    {
        if bytes > 0 {
            sim.usage.release(device, bytes as u64);
        }
    }
}

fn register_exit_hook() {
    // SAFETY: release_on_exit is an extern "C" fn without arguments that never unwinds (panic
    // = abort) and only touches state that outlives exit handlers (statics).
    unsafe { libc::atexit(release_on_exit) };
}
