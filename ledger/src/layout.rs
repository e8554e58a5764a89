//! The ledger's memory layout: one header page followed by `MAX_SLOTS`
//! per-process slots. The same `repr(C)` structs describe the shared file, the
//! process-local region and (with loom atomics) the model-checked tests.

use crate::sync::{AtomicU32, AtomicU64};

/// Container-visible device indices `0..MAX_DEVICES` are accounted.
pub const MAX_DEVICES: usize = 32;

/// The first eight bytes of every ledger file.
pub(crate) const MAGIC: [u8; 8] = *b"AMVGPULG";
/// Bumped whenever a field moves or changes meaning; a file of another version
/// is refused rather than misread.
pub(crate) const LAYOUT_VERSION: u32 = 1;
/// Slot 0 starts at this offset (one page, so slots never share a page with
/// the header's rarely written fields).
pub(crate) const HEADER_SIZE: usize = 4096;
/// Processes (more precisely: `Ledger` instances) that can account at once.
pub(crate) const MAX_SLOTS: usize = 1024;
/// Slots in a process-local ledger: one per racing first-use thread is enough,
/// the spares only absorb a fork child's copy of its parent's slot.
pub(crate) const LOCAL_SLOTS: usize = 64;
pub(crate) const SLOT_SIZE: usize = core::mem::size_of::<Slot>();
pub(crate) const FILE_SIZE: usize = HEADER_SIZE + MAX_SLOTS * SLOT_SIZE;
/// Written into the header's `creator` field of files this crate creates.
pub(crate) const CREATOR: &str = concat!("amvgpu-ledger ", env!("CARGO_PKG_VERSION"));

/// The ledger file's first page. Everything up to `creator` is written once
/// (into a private temporary file, before it is linked into place) and only
/// read afterwards; `slot_high_water` and `container_peak` are live counters.
#[repr(C)]
pub(crate) struct Header {
    /// `MAGIC` read as a native-endian u64.
    pub magic: AtomicU64,
    pub layout_version: AtomicU32,
    pub header_size: AtomicU32,
    pub total_size: AtomicU64,
    pub max_slots: AtomicU32,
    pub max_devices: AtomicU32,
    pub slot_size: AtomicU32,
    pub creator_pid: AtomicU32,
    pub creator_uid: AtomicU32,
    pub _reserved0: AtomicU32,
    pub created_unix_secs: AtomicU64,
    /// Inode of the creator's `/proc/self/ns/pid` (0 if unknown): pids in the
    /// slots are only meaningful inside that PID namespace.
    pub pid_namespace: AtomicU64,
    /// NUL-padded UTF-8 naming the creating software.
    pub creator: [AtomicU64; 8],
    /// One past the highest slot index ever claimed. Only grows. Reservers sum
    /// slots below it, so it sits alone in its cache line: it is read on every
    /// reservation and written only when a process claims a new highest slot.
    pub slot_high_water: AtomicU32,
    pub _reserved1: [AtomicU32; 15],
    /// Highest container usage ever admitted, per device. Read on every
    /// successful reservation, written only when a new peak is set.
    pub container_peak: [AtomicU64; MAX_DEVICES],
}

/// One process's accounting. Written by its owner (and, once the owner is
/// dead, by the one process that reclaims it); read by every reserver.
#[repr(C)]
pub(crate) struct Slot {
    /// `status << 62 | generation << 32 | pid`, see `state`.
    pub state: AtomicU64,
    /// The owner's start time (`/proc/<pid>/stat` field 22, clock ticks since
    /// boot), so a recycled pid is not mistaken for the owner. 0 = unknown.
    pub start_time: AtomicU64,
    pub claimed_unix_secs: AtomicU64,
    pub _reserved: [AtomicU64; 5],
    /// Bytes this process holds (plus, for an instant, bytes it is trying to
    /// reserve) per device. The authoritative container usage is the sum of
    /// this field over all slots. Starts on its own cache line.
    pub used: [AtomicU64; MAX_DEVICES],
    /// Highest `used` this process reached per device.
    pub peak: [AtomicU64; MAX_DEVICES],
    /// The limit this process last enforced per device (informational).
    pub limit: [AtomicU64; MAX_DEVICES],
}

#[cfg(not(loom))]
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(offset_of!(Header, layout_version) == 0x08);
    assert!(offset_of!(Header, header_size) == 0x0c);
    assert!(offset_of!(Header, total_size) == 0x10);
    assert!(offset_of!(Header, max_slots) == 0x18);
    assert!(offset_of!(Header, max_devices) == 0x1c);
    assert!(offset_of!(Header, slot_size) == 0x20);
    assert!(offset_of!(Header, creator_pid) == 0x24);
    assert!(offset_of!(Header, creator_uid) == 0x28);
    assert!(offset_of!(Header, created_unix_secs) == 0x30);
    assert!(offset_of!(Header, pid_namespace) == 0x38);
    assert!(offset_of!(Header, creator) == 0x40);
    assert!(offset_of!(Header, slot_high_water) == 0x80);
    assert!(offset_of!(Header, container_peak) == 0xc0);
    assert!(size_of::<Header>() == 0x1c0);
    assert!(size_of::<Header>() <= HEADER_SIZE);
    assert!(offset_of!(Slot, start_time) == 0x08);
    assert!(offset_of!(Slot, claimed_unix_secs) == 0x10);
    assert!(offset_of!(Slot, used) == 0x40);
    assert!(offset_of!(Slot, peak) == 0x140);
    assert!(offset_of!(Slot, limit) == 0x240);
    assert!(size_of::<Slot>() == 0x340);
    assert!(SLOT_SIZE % 64 == 0);
    assert!(FILE_SIZE == 856_064);
};

/// Slot status, the top two bits of the state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotStatus {
    /// Unowned; `used` is all zero.
    Free,
    /// A process won the slot and is initialising it.
    Claiming,
    /// Owned by a process that accounts in it.
    Live,
    /// A process is zeroing a dead owner's counters; the pid field then names
    /// the reclaimer, so a reclaimer that dies is itself detected and replaced.
    Reclaiming,
}

pub(crate) mod state {
    use super::SlotStatus;

    pub const FREE: u64 = 0;
    pub const CLAIMING: u64 = 1;
    pub const LIVE: u64 = 2;
    pub const RECLAIMING: u64 = 3;
    const GEN_MASK: u64 = (1 << 30) - 1;

    #[inline]
    pub fn pack(status: u64, generation: u64, pid: u32) -> u64 {
        (status << 62) | ((generation & GEN_MASK) << 32) | u64::from(pid)
    }
    #[inline]
    pub fn status(word: u64) -> u64 {
        word >> 62
    }
    #[inline]
    pub fn generation(word: u64) -> u64 {
        (word >> 32) & GEN_MASK
    }
    #[inline]
    pub fn pid(word: u64) -> u32 {
        word as u32
    }
    pub fn decode(word: u64) -> SlotStatus {
        match status(word) {
            FREE => SlotStatus::Free,
            CLAIMING => SlotStatus::Claiming,
            LIVE => SlotStatus::Live,
            _ => SlotStatus::Reclaiming,
        }
    }
}

#[cfg(loom)]
fn zeroed_u64s<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(0))
}

#[cfg(loom)]
impl Header {
    pub(crate) fn new_for_model() -> Header {
        Header {
            magic: AtomicU64::new(u64::from_ne_bytes(MAGIC)),
            layout_version: AtomicU32::new(LAYOUT_VERSION),
            header_size: AtomicU32::new(HEADER_SIZE as u32),
            total_size: AtomicU64::new(0),
            max_slots: AtomicU32::new(0),
            max_devices: AtomicU32::new(MAX_DEVICES as u32),
            slot_size: AtomicU32::new(SLOT_SIZE as u32),
            creator_pid: AtomicU32::new(0),
            creator_uid: AtomicU32::new(0),
            _reserved0: AtomicU32::new(0),
            created_unix_secs: AtomicU64::new(0),
            pid_namespace: AtomicU64::new(0),
            creator: zeroed_u64s(),
            slot_high_water: AtomicU32::new(0),
            _reserved1: std::array::from_fn(|_| AtomicU32::new(0)),
            container_peak: zeroed_u64s(),
        }
    }
}

#[cfg(loom)]
impl Slot {
    pub(crate) fn new_for_model() -> Slot {
        Slot {
            state: AtomicU64::new(0),
            start_time: AtomicU64::new(0),
            claimed_unix_secs: AtomicU64::new(0),
            _reserved: zeroed_u64s(),
            used: zeroed_u64s(),
            peak: zeroed_u64s(),
            limit: zeroed_u64s(),
        }
    }
}
