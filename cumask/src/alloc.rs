//! Picking a free, topology-valid CU set for a new tenant.
//!
//! ## Rule (deterministic: same topology, taken set and count, same answer)
//!
//! 1. The count is rounded with [`Topology::round_count`].
//! 2. The usable free CUs are the device's CUs minus `taken`; on RDNA a WGP is usable only
//!    if both its CUs are free.
//! 3. **One contiguous range** if any free run is long enough: the *best fit* (the shortest
//!    free run that holds the count, the lowest-addressed one on a tie), using its lowest
//!    CUs. Best fit keeps long runs whole for later, larger requests. On multi-XCD parts a
//!    contiguous range whose length is a multiple of the XCD count is exactly balanced.
//! 4. Otherwise a **union of ranges**:
//!    * multi-XCD: on each XCD the `count / xcds` lowest free CUs of that XCD, so the slice
//!      stays balanced (free space left by earlier balanced slices comes in aligned blocks,
//!      so this picks whole blocks). If some XCD has fewer free CUs, the rest is taken
//!      from the lowest free CUs anywhere; an XCD with no free CU at all makes the request
//!      fail, since a mask that misses an XCD would run unmasked there.
//!    * otherwise: whole free runs from the longest down (lowest first on a tie) while
//!      none fits what is left, then the best fit for the rest; few pieces.
//! 5. Not enough usable free CUs: [`AllocError::DoesNotFit`] with both counts.
//!
//! Releasing a slice is `taken.difference(&slice)`: the allocator keeps no state.

use core::fmt;

use crate::mask::{HsaCuMask, MAX_GPUS};
use crate::set::CuSet;
use crate::topology::{CountError, Layout, Topology};

/// Why no CU set could be picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllocError {
    /// The count is 0 or larger than the device.
    Count(CountError),
    /// `taken` names a CU the device does not have: the caller's bookkeeping is off.
    TakenPastDevice {
        /// The first such CU.
        cu: u16,
        /// The device's CU count.
        cu_count: u32,
    },
    /// Fewer usable free CUs than the (rounded) request.
    DoesNotFit {
        /// CUs needed after rounding.
        requested: u32,
        /// Usable free CUs (on RDNA, CUs of fully free WGPs).
        free: u32,
    },
    /// Multi-XCD: enough free CUs, but none on one XCD, so no safe mask exists.
    XcdFull {
        /// The XCD with no free CU.
        xcd: u32,
        /// CUs needed after rounding.
        requested: u32,
        /// Usable free CUs.
        free: u32,
    },
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AllocError::Count(e) => e.fmt(f),
            AllocError::TakenPastDevice { cu, cu_count } => {
                write!(f, "taken CUs include CU {cu}, past the device's {cu_count} CUs")
            }
            AllocError::DoesNotFit { requested, free } => {
                write!(f, "does not fit: {requested} CUs requested, {free} free")
            }
            AllocError::XcdFull { xcd, requested, free } => write!(
                f,
                "does not fit: {requested} CUs requested, {free} free, but XCD {xcd} has no free CU and would run unmasked"
            ),
        }
    }
}

impl From<CountError> for AllocError {
    fn from(e: CountError) -> Self {
        AllocError::Count(e)
    }
}

/// Picks `count` CUs (rounded by [`Topology::round_count`]) disjoint from `taken`; see the
/// module docs for the rule. The result always passes [`Topology::validate`].
///
/// ```
/// use cumask::{allocate, CuSet, Topology};
/// let mi300x = Topology::from_target("gfx942", 304).unwrap();
/// let first = allocate(&mi300x, &CuSet::new(), 76).unwrap();
/// assert_eq!(first.to_string(), "0-71"); // 76 rounds down to 72 = 9 per XCD
/// let second = allocate(&mi300x, &first, 76).unwrap();
/// assert_eq!(second.to_string(), "72-143");
/// assert!(first.is_disjoint(&second));
/// ```
pub fn allocate(topology: &Topology, taken: &CuSet, count: u32) -> Result<CuSet, AllocError> {
    let requested = topology.round_count(count)?;
    let cu_count = topology.cu_count();
    if let Some(cu) = taken.next_set(cu_count as usize) {
        return Err(AllocError::TakenPastDevice { cu, cu_count });
    }
    let usable = usable_free(topology, taken);
    let free = usable.len() as u32;
    if free < requested {
        return Err(AllocError::DoesNotFit { requested, free });
    }
    if let Some(run) = best_fit(&usable, requested) {
        return Ok(CuSet::range(run.start, run.start + requested as u16));
    }
    match topology.layout() {
        Layout::Interleaved { xcds } => balanced_pick(&usable, requested, u32::from(xcds), free),
        _ => Ok(largest_runs_first(&usable, requested)),
    }
}

/// Free CUs that can be enabled: on RDNA, both CUs of a WGP must be free.
fn usable_free(topology: &Topology, taken: &CuSet) -> CuSet {
    let free = topology.all().difference(taken);
    if topology.layout() != Layout::WorkGroupProcessors {
        return free;
    }
    const EVEN_BITS: u64 = 0x5555_5555_5555_5555;
    let mut words = *free.words();
    for word in &mut words {
        let whole_pairs = *word & (*word >> 1) & EVEN_BITS;
        *word = whole_pairs | (whole_pairs << 1);
    }
    CuSet::from_words(words)
}

/// The shortest run of `free` with at least `needed` ids (lowest on a tie).
fn best_fit(free: &CuSet, needed: u32) -> Option<core::ops::Range<u16>> {
    let mut best: Option<core::ops::Range<u16>> = None;
    for run in free.ranges() {
        let len = u32::from(run.end - run.start);
        if len >= needed
            && best
                .as_ref()
                .map_or(true, |b| len < u32::from(b.end - b.start))
        {
            best = Some(run);
        }
    }
    best
}

/// Whole runs from the longest down, then the best fit for the remainder.
/// Precondition: `free` holds at least `needed` ids.
fn largest_runs_first(free: &CuSet, needed: u32) -> CuSet {
    let mut left = *free;
    let mut picked = CuSet::new();
    let mut remaining = needed;
    while remaining > 0 {
        if let Some(run) = best_fit(&left, remaining) {
            picked.insert_range(run.start..run.start + remaining as u16);
            break;
        }
        let mut longest: Option<core::ops::Range<u16>> = None;
        for run in left.ranges() {
            if longest
                .as_ref()
                .map_or(true, |l| run.end - run.start > l.end - l.start)
            {
                longest = Some(run);
            }
        }
        let Some(run) = longest else { break };
        let piece = CuSet::range(run.start, run.end);
        picked = picked.union(&piece);
        left = left.difference(&piece);
        remaining -= u32::from(run.end - run.start);
    }
    picked
}

/// `needed / xcds` lowest free CUs per XCD, topped up from the lowest free CUs.
fn balanced_pick(
    free: &CuSet,
    needed: u32,
    xcds: u32,
    free_count: u32,
) -> Result<CuSet, AllocError> {
    let per_xcd = needed / xcds;
    let mut taken_per_xcd = [0u32; 64];
    let mut picked = CuSet::new();
    let mut count = 0;
    for cu in free.iter() {
        let xcd = (u32::from(cu) % xcds) as usize;
        if taken_per_xcd[xcd] < per_xcd {
            taken_per_xcd[xcd] += 1;
            picked.insert(cu);
            count += 1;
        }
    }
    if let Some(xcd) = taken_per_xcd[..xcds as usize].iter().position(|&n| n == 0) {
        return Err(AllocError::XcdFull {
            xcd: xcd as u32,
            requested: needed,
            free: free_count,
        });
    }
    for cu in free.difference(&picked).iter() {
        if count == needed {
            break;
        }
        picked.insert(cu);
        count += 1;
    }
    Ok(picked)
}

/// One GPU of a multi-GPU request, in container order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuRequest {
    /// The GPU's topology.
    pub topology: Topology,
    /// CUs already given to other tenants on this GPU.
    pub taken: CuSet,
    /// CUs requested (rounded by [`Topology::round_count`]).
    pub count: u32,
}

/// Why a multi-GPU request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuAllocError {
    /// No GPU in the request: an empty `HSA_CU_MASK` would mask nothing.
    NoGpus,
    /// More GPUs than [`MAX_GPUS`].
    TooManyGpus {
        /// GPUs in the request.
        count: usize,
    },
    /// GPU `index` (container order) could not be served.
    Gpu {
        /// Container-local index.
        index: usize,
        /// Why.
        error: AllocError,
    },
}

impl fmt::Display for GpuAllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GpuAllocError::NoGpus => f.write_str("no GPU in the request"),
            GpuAllocError::TooManyGpus { count } => {
                write!(f, "{count} GPUs requested, at most {MAX_GPUS} supported")
            }
            GpuAllocError::Gpu { index, error } => write!(f, "GPU {index}: {error}"),
        }
    }
}

/// Allocates on each GPU of a container's request and returns the `HSA_CU_MASK` with
/// container-local indices (`0, 1, …` in request order, which is the order of
/// `ROCR_VISIBLE_DEVICES`). Every GPU succeeds or none does.
///
/// Format the result with `Display` into any [`fmt::Write`], or with
/// [`HsaCuMask::format_into`] into a fixed buffer.
///
/// ```
/// use cumask::{allocate_gpus, CuSet, GpuRequest, Topology};
/// let mi300x = Topology::from_target("gfx942", 304).unwrap();
/// let busy = CuSet::range(0, 72);
/// let mask = allocate_gpus(&[
///     GpuRequest { topology: mi300x, taken: busy, count: 76 },
///     GpuRequest { topology: mi300x, taken: CuSet::new(), count: 76 },
/// ])
/// .unwrap();
/// assert_eq!(mask.to_string(), "0:72-143;1:0-71");
/// let mut buf = [0u8; 64];
/// assert_eq!(mask.format_into(&mut buf), Ok("0:72-143;1:0-71"));
/// ```
pub fn allocate_gpus(requests: &[GpuRequest]) -> Result<HsaCuMask, GpuAllocError> {
    if requests.is_empty() {
        return Err(GpuAllocError::NoGpus);
    }
    if requests.len() > MAX_GPUS {
        return Err(GpuAllocError::TooManyGpus {
            count: requests.len(),
        });
    }
    let mut mask = HsaCuMask::new();
    for (index, request) in requests.iter().enumerate() {
        let set = allocate(&request.topology, &request.taken, request.count)
            .map_err(|error| GpuAllocError::Gpu { index, error })?;
        // index < MAX_GPUS and set is non-empty (round_count never returns 0).
        mask.set(index, set)
            .map_err(|_| GpuAllocError::TooManyGpus {
                count: requests.len(),
            })?;
    }
    Ok(mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::percent::cu_count_from_percent;
    use std::string::ToString;

    fn mi300x() -> Topology {
        Topology::from_target("gfx942", 304).unwrap()
    }

    #[test]
    fn four_quarter_slices_fill_mi300x_balanced() {
        let topo = mi300x();
        let count = cu_count_from_percent(25, 304).unwrap();
        let mut taken = CuSet::new();
        let mut slices = std::vec::Vec::new();
        for _ in 0..4 {
            let slice = allocate(&topo, &taken, count).unwrap();
            assert_eq!(slice.len(), 72);
            assert!(slice.is_disjoint(&taken));
            assert_eq!(topo.validate(&slice), Ok(()));
            for xcd in 0..8 {
                assert_eq!(slice.iter().filter(|&cu| topo.xcd_of(cu) == xcd).count(), 9);
            }
            taken = taken.union(&slice);
            slices.push(slice);
        }
        assert_eq!(slices[3].to_string(), "216-287");
        assert_eq!(
            allocate(&topo, &taken, count),
            Err(AllocError::DoesNotFit {
                requested: 72,
                free: 16
            })
        );
        assert_eq!(allocate(&topo, &taken, 16).unwrap().to_string(), "288-303");
    }

    #[test]
    fn best_fit_prefers_the_tightest_hole() {
        let topo = Topology::from_target("gfx90a", 104).unwrap();
        // Free: 0-19 (20), 30-39 (10), 50-103 (54).
        let taken = CuSet::range(20, 30).union(&CuSet::range(40, 50));
        assert_eq!(allocate(&topo, &taken, 10).unwrap().to_string(), "30-39");
        assert_eq!(allocate(&topo, &taken, 11).unwrap().to_string(), "0-10");
        assert_eq!(allocate(&topo, &taken, 30).unwrap().to_string(), "50-79");
        // Nothing holds 60: the 54-run whole, then the best fit for 6 (the 10-run).
        assert_eq!(
            allocate(&topo, &taken, 60).unwrap().to_string(),
            "30-35,50-103"
        );
    }

    #[test]
    fn fragmented_gfx942_stays_balanced() {
        let topo = mi300x();
        // Free blocks of 8 left between tenants: 8-15, 40-47, 96-103, 296-303.
        let mut taken = topo.all();
        for start in [8u16, 40, 96, 296] {
            taken = taken.difference(&CuSet::range(start, start + 8));
        }
        let slice = allocate(&topo, &taken, 24).unwrap();
        assert_eq!(slice.to_string(), "8-15,40-47,96-103");
        assert_eq!(topo.validate(&slice), Ok(()));
    }

    #[test]
    fn gfx942_fails_rather_than_leave_an_xcd_unmasked() {
        let topo = mi300x();
        // Every CU on XCD 3 is taken, plenty free elsewhere.
        let taken: CuSet = (0..304u16).filter(|cu| cu % 8 == 3).collect();
        let err = allocate(&topo, &taken, 8).unwrap_err();
        assert_eq!(
            err,
            AllocError::XcdFull {
                xcd: 3,
                requested: 8,
                free: 266
            }
        );
        assert!(err.to_string().contains("XCD 3 has no free CU"), "{err}");
    }

    #[test]
    fn gfx942_unbalanced_fallback_still_covers_every_xcd() {
        let topo = mi300x();
        // Only one free CU on XCD 0 (CU 0); 16 requested needs 2 per XCD.
        let taken: CuSet = (8..304u16).filter(|cu| cu % 8 == 0).collect();
        let slice = allocate(&topo, &taken, 16).unwrap();
        assert_eq!(slice.len(), 16);
        assert!(slice.is_disjoint(&taken));
        assert_eq!(topo.validate(&slice), Ok(()));
    }

    #[test]
    fn rdna_allocates_whole_wgps_around_half_taken_pairs() {
        let topo = Topology::from_target("gfx1100", 96).unwrap();
        // CU 1 taken by a foreign mask: WGP 0 is not usable.
        let taken: CuSet = [1u16].into_iter().collect();
        let slice = allocate(&topo, &taken, 5).unwrap();
        assert_eq!(slice.to_string(), "2-7");
        assert_eq!(topo.validate(&slice), Ok(()));
        let taken = CuSet::range(0, 95);
        assert_eq!(
            allocate(&topo, &taken, 1),
            Err(AllocError::DoesNotFit {
                requested: 2,
                free: 0
            })
        );
    }

    #[test]
    fn bad_inputs_are_errors() {
        let topo = mi300x();
        assert_eq!(
            allocate(&topo, &CuSet::new(), 0),
            Err(AllocError::Count(CountError::Zero))
        );
        assert_eq!(
            allocate(&topo, &CuSet::range(300, 310), 8),
            Err(AllocError::TakenPastDevice {
                cu: 304,
                cu_count: 304
            })
        );
        assert_eq!(allocate_gpus(&[]), Err(GpuAllocError::NoGpus));
        let req = GpuRequest {
            topology: topo,
            taken: topo.all(),
            count: 8,
        };
        assert_eq!(
            allocate_gpus(&[
                GpuRequest {
                    taken: CuSet::new(),
                    ..req
                },
                req
            ]),
            Err(GpuAllocError::Gpu {
                index: 1,
                error: AllocError::DoesNotFit {
                    requested: 8,
                    free: 0
                }
            })
        );
        assert_eq!(
            AllocError::DoesNotFit {
                requested: 72,
                free: 16
            }
            .to_string(),
            "does not fit: 72 CUs requested, 16 free"
        );
    }
}
