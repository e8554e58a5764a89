//! Device-wide live/peak byte counters, process-local or shared through `HIPSIM_STATE`.
//!
//! The shared file is a fixed-size array of atomics mapped `MAP_SHARED` by every process naming
//! it, so `hipMemGetInfo` reports device-wide free memory as real hardware does. Reservations
//! are a compare-and-swap on `live` that never exceeds `total`, so two processes can never both
//! get the last bytes; `peak` is then raised with `fetch_max` of the value this CAS installed,
//! which is exact: every value `live` ever held was installed by some successful CAS.

use crate::config::{Config, MAX_DEVICES};
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// "HIPSIMv1" as a little-endian u64.
const MAGIC: u64 = u64::from_le_bytes(*b"HIPSIMv1");
/// Claimed by the process that is filling in a fresh file.
const INITIALIZING: u64 = 1;
const LAYOUT_VERSION: u32 = 1;

#[repr(C)]
pub struct DeviceSlot {
    total: AtomicU64,
    live: AtomicU64,
    peak: AtomicU64,
    _reserved: AtomicU64,
}

/// The layout of the shared file (and of the process-local block).
#[repr(C)]
pub struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    devices: AtomicU32,
    _reserved: [AtomicU64; 6],
    slots: [DeviceSlot; MAX_DEVICES],
}

pub const STATE_FILE_BYTES: usize = std::mem::size_of::<Header>();
const _: () = assert!(STATE_FILE_BYTES == 64 + 32 * MAX_DEVICES);

/// The counters of every simulated device.
pub struct Usage {
    header: &'static Header,
}

impl std::fmt::Debug for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Usage")
            .field("devices", &self.header.devices.load(Ordering::Relaxed))
            .finish()
    }
}

impl Usage {
    pub fn open(config: &Config) -> Result<Usage, String> {
        let header: &'static Header = match &config.state {
            None => {
                // SAFETY: Header is only atomics, for which all-zero is a valid value.
                let boxed: Box<Header> = Box::new(unsafe { std::mem::zeroed() });
                Box::leak(boxed)
            }
            Some(path) => map_state_file(path)?,
        };
        let usage = Usage { header };
        usage.initialise(config, config.state.as_deref())?;
        Ok(usage)
    }

    fn initialise(&self, config: &Config, path: Option<&Path>) -> Result<(), String> {
        let h = self.header;
        let name = || match path {
            Some(p) => format!("HIPSIM_STATE={:?}", p.display().to_string()),
            None => "process-local state".to_string(),
        };
        // Acquire pairs with the creator's Release store of MAGIC below, making its writes of
        // version/devices/totals visible before we compare them.
        match h
            .magic
            .compare_exchange(0, INITIALIZING, Ordering::Acquire, Ordering::Acquire)
        {
            Ok(_) => {
                h.version.store(LAYOUT_VERSION, Ordering::Relaxed);
                h.devices.store(config.devices as u32, Ordering::Relaxed);
                for slot in &h.slots[..config.devices] {
                    slot.total.store(config.vram, Ordering::Relaxed);
                }
                h.magic.store(MAGIC, Ordering::Release);
            }
            Err(_) => {
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    match h.magic.load(Ordering::Acquire) {
                        MAGIC => break,
                        INITIALIZING if Instant::now() < deadline => std::thread::yield_now(),
                        INITIALIZING => {
                            return Err(format!(
                                "{}: another process started initialising it and never finished \
                                 (delete the file)",
                                name()
                            ))
                        }
                        other => {
                            return Err(format!(
                                "{}: not a hipsim state file (magic {other:#x})",
                                name()
                            ))
                        }
                    }
                }
                let version = h.version.load(Ordering::Relaxed);
                if version != LAYOUT_VERSION {
                    return Err(format!(
                        "{}: layout version {version}, this hipsim writes {LAYOUT_VERSION}",
                        name()
                    ));
                }
                let devices = h.devices.load(Ordering::Relaxed) as usize;
                let total = h.slots[0].total.load(Ordering::Relaxed);
                if devices != config.devices
                    || (devices > 0
                        && h.slots[..devices]
                            .iter()
                            .any(|s| s.total.load(Ordering::Relaxed) != config.vram))
                {
                    return Err(format!(
                        "{}: created for {devices} device(s) of {total} bytes, but this process \
                         has HIPSIM_DEVICES={} HIPSIM_VRAM={}",
                        name(),
                        config.devices,
                        config.vram
                    ));
                }
            }
        }
        Ok(())
    }

    fn slot(&self, device: usize) -> &DeviceSlot {
        &self.header.slots[device]
    }

    pub fn total(&self, device: usize) -> u64 {
        self.slot(device).total.load(Ordering::Relaxed)
    }

    pub fn live(&self, device: usize) -> u64 {
        self.slot(device).live.load(Ordering::Relaxed)
    }

    pub fn peak(&self, device: usize) -> u64 {
        self.slot(device).peak.load(Ordering::Relaxed)
    }

    /// Takes `bytes` of `device`, or returns false (out of memory) without changing anything.
    pub fn reserve(&self, device: usize, bytes: u64) -> bool {
        let slot = self.slot(device);
        let total = slot.total.load(Ordering::Relaxed);
        // Relaxed suffices: the counters order nothing but themselves, and each CAS is atomic.
        let result = slot
            .live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                live.checked_add(bytes).filter(|&next| next <= total)
            });
        match result {
            Ok(before) => {
                // `peak` only grows, so a value loaded is a lower bound of it: when that already
                // covers ours, `fetch_max` would change nothing, and skipping it spares a
                // read-modify-write of the line every thread (and process) allocating here
                // contends for.
                let live = before + bytes;
                if slot.peak.load(Ordering::Relaxed) < live {
                    slot.peak.fetch_max(live, Ordering::Relaxed);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Gives back `bytes` of `device` taken by [`Usage::reserve`].
    pub fn release(&self, device: usize, bytes: u64) {
        let slot = self.slot(device);
        let result = slot
            .live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                Some(live.saturating_sub(bytes))
            });
        debug_assert!(
            matches!(result, Ok(before) if before >= bytes),
            "released more than taken"
        );
    }
}

fn map_state_file(path: &Path) -> Result<&'static Header, String> {
    let name = format!("HIPSIM_STATE={:?}", path.display().to_string());
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("{name}: cannot open: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("{name}: cannot stat: {e}"))?
        .len();
    if len != STATE_FILE_BYTES as u64 {
        if len != 0 {
            return Err(format!(
                "{name}: {len} bytes, a hipsim state file has {STATE_FILE_BYTES} (delete it)"
            ));
        }
        // Concurrent creators all extend to the same size, which is idempotent.
        file.set_len(STATE_FILE_BYTES as u64)
            .map_err(|e| format!("{name}: cannot size: {e}"))?;
    }
    // SAFETY: mapping a regular file we opened read-write, for its whole (fixed) size, with a
    // null hint; the kernel picks the address. The result is checked against MAP_FAILED.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STATE_FILE_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(format!(
            "{name}: cannot map: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the mapping is STATE_FILE_BYTES long, page-aligned (so aligned for Header), never
    // unmapped (it lives for the process), and Header consists of atomics only, for which any
    // bit pattern (including the zeroes of a fresh file) is valid; concurrent access by other
    // processes goes through the same atomics.
    Ok(unsafe { &*(addr as *const Header) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(devices: usize, vram: u64, state: Option<std::path::PathBuf>) -> Config {
        Config {
            devices,
            vram,
            arch: "gfx942".into(),
            cus: 304,
            state,
        }
    }

    #[test]
    fn reserve_never_exceeds_total_and_tracks_peak() {
        let u = Usage::open(&config(2, 10_000, None)).unwrap();
        assert!(u.reserve(0, 6000));
        assert!(!u.reserve(0, 5000));
        assert!(u.reserve(1, 5000));
        assert_eq!(u.live(0), 6000);
        u.release(0, 6000);
        assert!(u.reserve(0, 3000));
        assert_eq!((u.live(0), u.peak(0)), (3000, 6000));
        assert!(!u.reserve(0, u64::MAX));
    }

    #[test]
    fn shared_file_is_one_view_and_rejects_other_machines() {
        let dir = std::env::temp_dir().join(format!("hipsim-usage-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let _ = std::fs::remove_file(&path);
        let a = Usage::open(&config(1, 1 << 20, Some(path.clone()))).unwrap();
        let b = Usage::open(&config(1, 1 << 20, Some(path.clone()))).unwrap();
        assert!(a.reserve(0, 1 << 19));
        assert_eq!(b.live(0), 1 << 19);
        assert!(!b.reserve(0, (1 << 19) + 1));
        let err = Usage::open(&config(2, 1 << 20, Some(path.clone()))).unwrap_err();
        assert!(
            err.contains("created for 1 device(s)") && err.contains("HIPSIM_DEVICES=2"),
            "{err}"
        );
        std::fs::write(dir.join("junk"), b"hello").unwrap();
        let err = Usage::open(&config(1, 1 << 20, Some(dir.join("junk")))).unwrap_err();
        assert!(err.contains("5 bytes"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
