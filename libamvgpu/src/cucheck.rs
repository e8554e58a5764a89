//! The pod's CU mask: checked against the real devices at the first HIP use, and used to
//! narrow per-stream masks.
//!
//! # The check
//!
//! At the first wrapped HIP call, when the snapshot has `HSA_CU_MASK`, the hook asks the runtime
//! for every visible device's architecture and CU count (`gcnArchName` and
//! `multiProcessorCount` from the plain `hipGetDeviceProperties`, which fills the legacy
//! layout in every ROCm), parses the mask with `cumask` for those devices, and logs an error
//! naming the variable, its value and the reason when
//!
//! - ROCr would ignore it: a syntax error, a repeated GPU or CU, a GPU or CU the machine does
//!   not have (ROCr stops at the first bad set, silently, and runs the rest unmasked), or
//! - it would fail open: a GPU's set leaves an XCD without a bit (gfx940/941/942/950; that XCD
//!   runs unmasked), or enables one CU of an RDNA WGP without its partner (seen to enable the
//!   whole card).
//!
//! A device whose architecture `cumask` does not know is reported once at debug level and not
//! checked. `ROC_GLOBAL_CU_MASK` is checked for syntax against device 0's CU count the same way.
//! The check only logs: the runtime reads the variables itself and the hook cannot make ROCr
//! honour a mask it rejects.
//!
//! # Narrowing `hipExtStreamCreateWithCUMask`
//!
//! A stream's CU mask is ANDed with the pod's set for the calling thread's current device (when
//! the pod has one and the check above accepted it) before the runtime sees it, so a program
//! cannot ask for CUs outside its slice (ROCr ANDs with `HSA_CU_MASK` too, but not when the
//! global mask was rejected, and not for `ROC_GLOBAL_CU_MASK` in HIP versions that ignore it).
//!
//! - The intersection is empty: `hipErrorInvalidValue` and the runtime is not called. Nothing
//!   the program asked for is in its slice; inventing a different set would hide the mistake.
//! - The intersection is unsafe on the device (uncovered XCD, split WGP): the pod's own set is
//!   used instead, with a warning. Every CU of it is the pod's, and it is known to be safe;
//!   the unsafe set would fail open to the whole device.
//! - Otherwise the intersection.

use crate::log;
use crate::snapshot::Snapshot;
use crate::symbols::{self, Sym};
use core::ffi::c_int;
use core::sync::atomic::{AtomicPtr, Ordering};
use cumask::{CuSet, HsaCuMask, Topology};
use hip_sys::{hipDeviceProp_tR0000, hipError_t, hipSuccess};

/// What the hook knows about one device.
#[derive(Debug)]
struct Device {
    topology: Option<Topology>,
    /// The pod's CU set for this device, if the checked `HSA_CU_MASK` names it.
    pod: Option<CuSet>,
}

#[derive(Debug)]
struct Pod {
    devices: Vec<Device>,
}

static POD: AtomicPtr<Pod> = AtomicPtr::new(core::ptr::null_mut());

/// Runs the check (once per process; later calls return at once).
pub fn check_at_first_use() {
    let _ = pod();
}

fn pod() -> &'static Pod {
    // Acquire pairs with the AcqRel compare-exchange that publishes the leaked box.
    let mut pod = POD.load(Ordering::Acquire);
    if pod.is_null() {
        let built = Box::into_raw(Box::new(build()));
        pod = match POD.compare_exchange(
            core::ptr::null_mut(),
            built,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => built,
            // Another thread built the same thing first; ours stays leaked (never freed, so
            // no reader can ever see a dangling pointer).
            Err(winner) => winner,
        };
    }
    // SAFETY: POD only ever holds a leaked Box, never freed or written after publication.
    unsafe { &*pod }
}

/// (architecture, CU count) of `device` as the runtime reports it.
fn properties(device: c_int) -> Option<(String, u32)> {
    let addr = symbols::real(Sym::hipGetDeviceProperties)?;
    type GetProps = unsafe extern "C" fn(*mut hipDeviceProp_tR0000, c_int) -> hipError_t;
    // SAFETY: the plain export has the legacy (R0000) layout in every ROCm (hip-sys docs).
    let get: GetProps = unsafe { core::mem::transmute::<usize, GetProps>(addr) };
    // SAFETY: an all-zero hipDeviceProp_tR0000 is valid (integers and arrays only).
    let mut props: hipDeviceProp_tR0000 = unsafe { core::mem::zeroed() };
    // SAFETY: `props` is a valid out-pointer of the right layout for this call.
    if unsafe { get(&mut props, device) } != hipSuccess {
        return None;
    }
    let name: Vec<u8> = props
        .gcnArchName
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Some((
        String::from_utf8_lossy(&name).into_owned(),
        u32::try_from(props.multiProcessorCount).unwrap_or(0),
    ))
}

fn device_count() -> u32 {
    let Some(addr) = symbols::lookup_in_runtime(b"hipGetDeviceCount") else {
        return 0;
    };
    type GetCount = unsafe extern "C" fn(*mut c_int) -> hipError_t;
    // SAFETY: hipGetDeviceCount(int *) per the HIP headers.
    let get: GetCount = unsafe { core::mem::transmute::<usize, GetCount>(addr) };
    let mut count: c_int = 0;
    // SAFETY: a valid out-pointer.
    if unsafe { get(&mut count) } != hipSuccess {
        return 0;
    }
    u32::try_from(count).unwrap_or(0)
}

fn build() -> Pod {
    let snapshot = Snapshot::take().0;
    let hsa = snapshot.get(b"HSA_CU_MASK");
    let global = snapshot.get(b"ROC_GLOBAL_CU_MASK");
    if hsa.is_none() && global.is_none() {
        return Pod {
            devices: Vec::new(),
        };
    }
    check(hsa, global)
}

/// The check itself, out of line: its frame holds whole CU masks (over 32 KiB, every page of
/// it probed on entry), which a process without a mask variable must not pay for. Inlined into
/// `build`, it cost every hooked process eight stack page faults at its first HIP call.
#[inline(never)]
fn check(hsa: Option<&[u8]>, global: Option<&[u8]>) -> Pod {
    let count = device_count();
    let mut devices: Vec<Device> = (0..count)
        .map(|d| {
            let topology = match properties(d as c_int) {
                None => None,
                Some((arch, cus)) => match Topology::from_target(&arch, cus) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        log::debug!("device {d}: CU masks not checked: {e}");
                        None
                    }
                },
            };
            Device {
                topology,
                pod: None,
            }
        })
        .collect();
    let max_cus = devices
        .iter()
        .filter_map(|d| d.topology.map(|t| t.cu_count()))
        .max()
        .unwrap_or(cumask::CAPACITY as u32);
    if let Some(value) = hsa {
        check_hsa_cu_mask(value, &mut devices, count, max_cus);
    }
    if let Some(value) = global {
        let cus = devices
            .first()
            .and_then(|d| d.topology.map(|t| t.cu_count()))
            .unwrap_or(cumask::CAPACITY as u32);
        if let Err(e) = cumask::parse_roc_global_cu_mask(&String::from_utf8_lossy(value), cus) {
            log::error!(
                "ROC_GLOBAL_CU_MASK=\"{}\": {e}; the runtime ignores it and runs unmasked",
                log::Bytes(value)
            );
        }
    }
    Pod { devices }
}

fn check_hsa_cu_mask(value: &[u8], devices: &mut [Device], count: u32, max_cus: u32) {
    let Ok(text) = core::str::from_utf8(value) else {
        log::error!(
            "HSA_CU_MASK=\"{}\": not ASCII; ROCr ignores it and runs unmasked",
            log::Bytes(value)
        );
        return;
    };
    let mask = match HsaCuMask::parse_for(text, count, max_cus) {
        Ok(mask) => mask,
        Err(e) => {
            log::error!(
                "HSA_CU_MASK=\"{}\": {e}; ROCr stops at this error and runs the GPUs from \
                 there on unmasked",
                log::Bytes(value)
            );
            return;
        }
    };
    for (gpu, set) in mask.iter() {
        let Some(device) = devices.get_mut(gpu) else {
            continue;
        };
        let Some(topology) = device.topology else {
            continue;
        };
        match topology.validate(set) {
            Ok(()) => device.pod = Some(*set),
            Err(e) => log::error!(
                "HSA_CU_MASK=\"{}\": GPU {gpu} ({} CUs): {e}; the mask fails open there",
                log::Bytes(value),
                topology.cu_count()
            ),
        }
    }
}

/// The mask a stream on `device` gets for the program's request `words`.
#[derive(Debug, PartialEq, Eq)]
pub enum Narrowed {
    /// No pod set for this device: the request goes through unchanged.
    Unchanged,
    /// The runtime gets these words instead.
    Words(Vec<u32>),
    /// The request has no CU of the pod's set.
    Empty,
}

/// `words` (bit i of word w = CU 32w+i) as a set; bits past the set's capacity are dropped.
pub fn set_from_words(words: &[u32]) -> CuSet {
    let mut set = CuSet::new();
    for (w, &word) in words.iter().enumerate() {
        for bit in 0..32 {
            if word & (1 << bit) != 0 {
                let _ = set.try_insert((w * 32 + bit) as u32);
            }
        }
    }
    set
}

/// `set` as words of the same length as the request (at least enough for its last CU).
pub fn words_from_set(set: &CuSet, min_len: usize) -> Vec<u32> {
    let len = set
        .last()
        .map_or(0, |last| usize::from(last) / 32 + 1)
        .max(min_len);
    let mut words = vec![0u32; len];
    for cu in set.iter() {
        words[usize::from(cu) / 32] |= 1 << (cu % 32);
    }
    words
}

/// Pure narrowing rule (see the module docs).
pub fn narrow_with(pod: &CuSet, topology: &Topology, request: &[u32]) -> Result<Vec<u32>, ()> {
    let wanted = set_from_words(request);
    let granted = wanted.intersection(pod);
    if granted.is_empty() {
        return Err(());
    }
    match topology.validate(&granted) {
        Ok(()) => Ok(words_from_set(&granted, request.len())),
        Err(e) => {
            log::warn!(
                "hipExtStreamCreateWithCUMask: the request within the pod's CUs ({granted}) is \
                 unsafe: {e}; the stream gets the pod's CUs ({pod}) instead"
            );
            Ok(words_from_set(pod, request.len()))
        }
    }
}

/// Narrows a stream mask request on `device` to the pod's slice.
pub fn narrow(device: c_int, request: &[u32]) -> Narrowed {
    let pod = pod();
    let Some(found) = usize::try_from(device)
        .ok()
        .and_then(|d| pod.devices.get(d))
    else {
        return Narrowed::Unchanged;
    };
    let (Some(set), Some(topology)) = (found.pod, found.topology) else {
        return Narrowed::Unchanged;
    };
    match narrow_with(&set, &topology, request) {
        Ok(words) => Narrowed::Words(words),
        Err(()) => {
            log::warn!(
                "hipExtStreamCreateWithCUMask on device {device}: no requested CU is in the \
                 pod's CUs ({set}); refused with hipErrorInvalidValue"
            );
            Narrowed::Empty
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        let set = set_from_words(&[0x8000_0001, 0x2]);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![0, 31, 33]);
        assert_eq!(words_from_set(&set, 0), vec![0x8000_0001, 0x2]);
        assert_eq!(words_from_set(&set, 4), vec![0x8000_0001, 0x2, 0, 0]);
    }

    #[test]
    fn narrowing_keeps_the_pods_cus_refuses_nothing_and_replaces_the_unsafe() {
        let gfx942 = Topology::from_target("gfx942", 304).unwrap();
        let pod = CuSet::range(0, 16);
        // Asking for 0-31 gets 0-15.
        assert_eq!(narrow_with(&pod, &gfx942, &[u32::MAX]), Ok(vec![0xffff]));
        // Nothing of the pod's.
        assert_eq!(narrow_with(&pod, &gfx942, &[0xffff_0000]), Err(()));
        // 0-3 leaves XCDs 4..7 uncovered: the pod's set instead.
        assert_eq!(narrow_with(&pod, &gfx942, &[0xf, 0]), Ok(vec![0xffff, 0]));

        let rdna = Topology::from_target("gfx1100", 96).unwrap();
        let pod = CuSet::range(0, 8);
        assert_eq!(narrow_with(&pod, &rdna, &[0x3c]), Ok(vec![0x3c]));
        // CU 1 without CU 0 splits WGP 0.
        assert_eq!(narrow_with(&pod, &rdna, &[0x2]), Ok(vec![0xff]));
    }
}
