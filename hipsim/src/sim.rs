//! The simulator's process state: configuration, device counters and the allocation registry.
//!
//! The registry is a test oracle, not a product, but `hipMalloc`+`hipFree` from several
//! threads must not queue behind one lock (the real runtime does not serialise plain device
//! allocations, and a convoy would swamp what a hook adds). So the state is split:
//!
//! - [`SHARDS`] [`Shard`]s, each behind its own `Mutex`, hold the address-keyed allocations
//!   (linear, managed, pool) and each device's small-block arena part ([`Small`]). An address
//!   belongs to shard [`shard_of`]`(addr)`; a thread carves small blocks from its home shard's
//!   chunks, so `hipMalloc` and `hipFree` of a small block take just that shard's lock.
//! - one [`Space`] per device, behind its own `Mutex`: the device's reservation and big region.
//! - the [`Registry`] behind one `Mutex`: everything else (arrays, pools, streams, VMM).
//!
//! Lock order: registry, then shards in ascending index, then a device's space. Nothing holds
//! a shard while locking the registry, or a space while locking a shard.
//!
//! Fork: a child inherits the parent's state but none of its device memory (as with a real
//! GPU, where the child has its own context), so each of these structures starts empty (and
//! the spaces fresh, not yet reserved) the first time a child locks it, and the exit hook only
//! returns the bytes of the process that allocated them.

use crate::arena::{shard_of, Small, Space};
use crate::config::{self, Config};
use crate::memory;
use crate::usage::Usage;
use hip_sys::sim::LARGE_ALLOCATION_ALIGNMENT;
use hip_sys::*;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
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

/// Number of shards: threads get home shards round-robin, so up to this many threads allocate
/// without ever meeting on a lock.
pub const SHARDS: usize = 16;

/// One shard: the address-keyed allocations whose [`shard_of`] is this shard, and this
/// shard's part of each device's small region.
#[derive(Debug)]
pub struct Shard {
    owner_pid: u32,
    pub allocs: AddressMap<Alloc>,
    /// Managed allocations among `allocs`, and their bytes.
    pub managed_count: usize,
    pub managed_bytes: usize,
    /// Index: device.
    small: Vec<SmallSlot>,
}

#[derive(Debug)]
enum SmallSlot {
    /// Not asked yet for a block of this device.
    Untried,
    /// The device has no reservation: blocks are mapped one by one.
    Unavailable,
    Ready(Small),
}

impl Shard {
    fn new(devices: usize) -> Shard {
        Shard {
            owner_pid: current_pid(),
            allocs: AddressMap::default(),
            managed_count: 0,
            managed_bytes: 0,
            small: (0..devices).map(|_| SmallSlot::Untried).collect(),
        }
    }

    /// A small block of `device` from this shard (shard `index`), or `None`.
    #[inline]
    fn take_small(
        &mut self,
        sim: &Sim,
        index: usize,
        device: usize,
        bytes: usize,
    ) -> Option<usize> {
        let slot = &mut self.small[device];
        if let SmallSlot::Untried = slot {
            *slot = match sim.space(device).small_region() {
                Some((base, len)) => SmallSlot::Ready(Small::new(base, len, index, SHARDS)),
                None => SmallSlot::Unavailable,
            };
        }
        match slot {
            SmallSlot::Ready(small) => small.take(bytes),
            _ => None,
        }
    }

    /// Gives a block back to this shard's part of `device`'s small region; `false` if `addr`
    /// is not in that region. The caller holds the shard [`shard_of`]`(addr)`.
    #[inline]
    fn give_back_small(&mut self, device: usize, addr: usize, bytes: usize) -> bool {
        match &mut self.small[device] {
            SmallSlot::Ready(small) if small.contains(addr) => {
                small.give_back(addr, bytes);
                true
            }
            _ => false,
        }
    }

    fn add_held(&self, held: &mut [usize]) {
        for a in self.allocs.values() {
            if a.kind != AllocKind::Managed {
                held[a.device] += a.bytes;
            }
        }
    }
}

/// A device's [`Space`], with the process it belongs to (see the module docs on fork).
#[derive(Debug)]
pub struct DeviceSpace {
    owner_pid: u32,
    space: Space,
}

impl std::ops::Deref for DeviceSpace {
    type Target = Space;
    fn deref(&self) -> &Space {
        &self.space
    }
}

impl std::ops::DerefMut for DeviceSpace {
    fn deref_mut(&mut self) -> &mut Space {
        &mut self.space
    }
}

/// Keeps each lock on a cache line (pair) of its own, so threads using different shards do not
/// bounce one line between cores.
#[derive(Debug)]
#[repr(align(128))]
struct Padded<T>(T);

#[derive(Debug, Default)]
pub struct Registry {
    pub owner_pid: u32,
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
    pub last_cu_mask: Option<Vec<u32>>,
}

pub fn token_addr(token: &u64) -> usize {
    token as *const u64 as usize
}

impl Registry {
    fn new(config: &Config) -> Registry {
        let devices = config.devices;
        let mut r = Registry {
            owner_pid: current_pid(),
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

    /// Whether array memory, or VMM mappings with access `need` (PROT_READ or PROT_WRITE),
    /// contain `[addr, addr + len)` (see [`Sim::covers`] for address-keyed allocations).
    fn covers(&self, addr: usize, len: usize, need: libc::c_int) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        // A small linear scan is fine: the registry is a test oracle.
        let within = |base: usize, bytes: usize| addr >= base && end <= base + bytes;
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

    /// Adds the bytes of arrays, pool caches and VMM handles to `held` (index: device).
    fn add_held(&self, held: &mut [usize]) {
        for a in self.arrays.values().chain(self.mipmaps.values()) {
            held[a.device] += a.bytes;
        }
        for p in self.pools.values() {
            held[p.device] += p.cache.iter().map(|&(_, b)| b).sum::<usize>();
        }
        for h in self.vmm.values() {
            held[h.device] += h.bytes;
        }
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
    shards: Box<[Padded<Mutex<Shard>>]>,
    /// Index: device.
    spaces: Box<[Padded<Mutex<DeviceSpace>>]>,
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
    /// The shard this thread carves small blocks from (`usize::MAX`: not chosen yet).
    static HOME_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The next home shard to hand out.
static NEXT_HOME_SHARD: AtomicUsize = AtomicUsize::new(0);

#[inline]
fn home_shard() -> usize {
    HOME_SHARD.with(|home| match home.get() {
        usize::MAX => {
            let shard = NEXT_HOME_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
            home.set(shard);
            shard
        }
        shard => shard,
    })
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
            let shards = (0..SHARDS)
                .map(|_| Padded(Mutex::new(Shard::new(config.devices))))
                .collect();
            let vram = usize::try_from(config.vram).unwrap_or(usize::MAX);
            let spaces = (0..config.devices)
                .map(|_| {
                    Padded(Mutex::new(DeviceSpace {
                        owner_pid: current_pid(),
                        space: Space::new(vram),
                    }))
                })
                .collect();
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
                shards,
                spaces,
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
        let mut guard = lock(&self.registry);
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

    /// Shard `index`, reset first if this process is a fork child.
    #[inline]
    pub fn shard(&self, index: usize) -> MutexGuard<'_, Shard> {
        let mut guard = lock(&self.shards[index].0);
        let pid = current_pid();
        if guard.owner_pid != pid {
            // As in `registry`: forget the parent's records and small-block lists.
            let inherited = std::mem::replace(&mut *guard, Shard::new(self.config.devices));
            std::mem::forget(inherited);
        }
        guard
    }

    /// The shard holding the allocation at `addr`.
    #[inline]
    pub fn shard_for(&self, addr: usize) -> MutexGuard<'_, Shard> {
        self.shard(shard_of(addr, SHARDS))
    }

    /// Every shard, locked in ascending order (the registry, if needed, must be locked first).
    pub fn all_shards(&self) -> Vec<MutexGuard<'_, Shard>> {
        (0..SHARDS).map(|k| self.shard(k)).collect()
    }

    /// `device`'s space, fresh (nothing reserved) if this process is a fork child.
    fn space(&self, device: usize) -> MutexGuard<'_, DeviceSpace> {
        let mut guard = lock(&self.spaces[device].0);
        let pid = current_pid();
        if guard.owner_pid != pid {
            // The parent's reservation stays mapped (copy-on-write) but unused.
            let vram = usize::try_from(self.config.vram).unwrap_or(usize::MAX);
            guard.space = Space::new(vram);
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

    /// Charges `bytes` (rounded, non-zero) to `device`, finds memory for them (see
    /// [`Sim::place_charged`]) and calls `record` with the memory's shard and address.
    pub fn take_device_memory(
        &self,
        device: usize,
        bytes: usize,
        record: impl FnOnce(&mut Shard, usize),
    ) -> Result<usize, hipError_t> {
        self.charge(device, bytes)?;
        self.place_charged(device, bytes, record)
    }

    /// The first half of [`Sim::take_device_memory`]: the device counter, shared by every
    /// thread (and process).
    fn charge(&self, device: usize, bytes: usize) -> Result<(), hipError_t> {
        if self.usage.reserve(device, bytes as u64) {
            Ok(())
        } else {
            Err(hipErrorOutOfMemory)
        }
    }

    /// The second half of [`Sim::take_device_memory`]: memory for `bytes` already charged,
    /// from the device's arena (small blocks: the calling thread's home shard first, then the
    /// others; big ones: the device's big region), or a mapping of its own when the arena
    /// cannot serve it; uncharged again if none can be found. `record` runs under the lock of
    /// the shard [`shard_of`] the address names, so that the block is never seen unrecorded
    /// by a `hipFree` of that shard. Only the charge decides out-of-memory (and a kernel
    /// refusing the fallback mapping).
    fn place_charged(
        &self,
        device: usize,
        bytes: usize,
        record: impl FnOnce(&mut Shard, usize),
    ) -> Result<usize, hipError_t> {
        if bytes < LARGE_ALLOCATION_ALIGNMENT {
            let home = home_shard();
            for i in 0..SHARDS {
                let index = (home + i) % SHARDS;
                let mut shard = self.shard(index);
                if let Some(addr) = shard.take_small(self, index, device, bytes) {
                    record(&mut shard, addr);
                    return Ok(addr);
                }
            }
        } else {
            let big = self.space(device).take_big(bytes);
            if let Some(addr) = big {
                record(&mut self.shard_for(addr), addr);
                return Ok(addr);
            }
        }
        match memory::map_device(bytes) {
            Some(addr) => {
                record(&mut self.shard_for(addr), addr);
                Ok(addr)
            }
            None => {
                self.usage.release(device, bytes as u64);
                Err(hipErrorOutOfMemory)
            }
        }
    }

    /// Returns and uncharges memory taken by [`Sim::take_device_memory`].
    pub fn give_back_device_memory(&self, device: usize, addr: usize, bytes: usize) {
        self.unplace(device, addr, bytes);
        self.usage.release(device, bytes as u64);
    }

    /// Returns memory without uncharging it; the caller releases the charge.
    pub fn unplace(&self, device: usize, addr: usize, bytes: usize) {
        let mut shard = self.shard_for(addr);
        if !shard.give_back_small(device, addr, bytes) {
            drop(shard);
            self.unplace_big(device, addr, bytes);
        }
    }

    /// [`Sim::unplace`] for a caller that holds `shard`, the shard [`shard_of`]`(addr)`.
    #[inline]
    pub fn unplace_in(&self, shard: &mut Shard, device: usize, addr: usize, bytes: usize) {
        if !shard.give_back_small(device, addr, bytes) {
            self.unplace_big(device, addr, bytes);
        }
    }

    fn unplace_big(&self, device: usize, addr: usize, bytes: usize) {
        if !self.space(device).give_back_big(addr, bytes) {
            memory::unmap(addr, bytes);
        }
    }

    /// When nothing is live on `device` any more (after `hipDeviceReset`), returns every
    /// touched page of its small region to the kernel and starts carving from the beginning
    /// again, so a reset leaves no resident memory. `shards` are all shards, locked.
    pub fn reset_small_if_empty(&self, shards: &mut [MutexGuard<'_, Shard>], device: usize) {
        let space = self.space(device);
        let Some((base, _)) = space.small_region_if_reserved() else {
            return;
        };
        let smalls = || {
            shards.iter().filter_map(|s| match &s.small[device] {
                SmallSlot::Ready(small) => Some(small),
                _ => None,
            })
        };
        if space.live_big() > 0 || smalls().any(|s| s.live() > 0) {
            return;
        }
        let mut touched_end = base;
        for shard in shards.iter_mut() {
            if let SmallSlot::Ready(small) = &mut shard.small[device] {
                if let Some(end) = small.reset() {
                    touched_end = touched_end.max(end);
                }
            }
        }
        if touched_end > base {
            memory::discard(base, touched_end - base);
        }
    }

    /// Bytes this process holds on each device (allocations, arrays, pool caches, VMM handles).
    pub fn held_per_device(&self) -> Vec<usize> {
        let mut held = vec![0usize; self.devices()];
        self.registry().add_held(&mut held);
        for k in 0..SHARDS {
            self.shard(k).add_held(&mut held);
        }
        held
    }

    /// Finds the device allocation containing `[addr, addr + len)`: linear, managed, pool or
    /// array memory, or a VMM mapping with access `need` (PROT_READ or PROT_WRITE).
    pub fn covers(&self, addr: usize, len: usize, need: libc::c_int) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        // Copies mostly start at an allocation's base: look that up before scanning.
        if let Some(a) = self.shard_for(addr).allocs.get(&addr) {
            if end <= addr + a.bytes {
                return true;
            }
        }
        // A linear scan is fine: the registry is a test oracle.
        let within = |base: usize, bytes: usize| addr >= base && end <= base + bytes;
        if (0..SHARDS).any(|k| {
            self.shard(k)
                .allocs
                .iter()
                .any(|(&b, a)| within(b, a.bytes))
        }) {
            return true;
        }
        self.registry().covers(addr, len, need)
    }

    /// The charged size of the address-keyed allocation containing `addr`.
    pub fn allocation_containing(&self, addr: usize) -> Option<usize> {
        (0..SHARDS).find_map(|k| {
            self.shard(k)
                .allocs
                .iter()
                .find(|(&base, a)| addr >= base && addr - base < a.bytes)
                .map(|(_, a)| a.bytes)
        })
    }
}

#[inline]
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Poisoning cannot happen (panic = abort), and the state is consistent between calls.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

extern "C" fn release_on_exit() {
    let Some(Ok(sim)) = SIM.get() else { return };
    // Never block exit: if another thread holds the registry or a shard, leave the bytes
    // charged.
    let Ok(registry) = sim.registry.try_lock() else {
        return;
    };
    let mut shards = Vec::with_capacity(SHARDS);
    for shard in sim.shards.iter() {
        let Ok(guard) = shard.0.try_lock() else {
            return;
        };
        shards.push(guard);
    }
    // A fork child owns none of the parent's records that it never reset.
    let pid = std::process::id();
    let mut held = vec![0usize; sim.config.devices];
    if registry.owner_pid == pid {
        registry.add_held(&mut held);
    }
    for shard in shards.iter().filter(|s| s.owner_pid == pid) {
        shard.add_held(&mut held);
    }
    for (device, bytes) in held.into_iter().enumerate() {
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
