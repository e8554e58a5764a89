//! The simulator's sizing rules, shared so the hook's tests can predict its accounting exactly.
//!
//! `hipsim` charges a device exactly `charged_bytes(...)` for each allocation and returns it on
//! free. Every rule returns `None` when the arithmetic overflows `usize`; the simulator answers
//! `hipErrorOutOfMemory` then (as the real runtime does for absurd sizes such as `SIZE_MAX`).

/// Linear allocations (`hipMalloc`, `hipExtMallocWithFlags`, `hipMallocManaged`, `hipMallocAsync`,
/// `hipMallocFromPoolAsync`, the pitched doors) are rounded up to a multiple of this (4 KiB).
pub const MALLOC_GRANULARITY: usize = 4096;

/// Allocations whose rounded size is at least this (2 MiB) get a 2 MiB-aligned address, as on
/// real GPUs; smaller ones are only [`MALLOC_GRANULARITY`]-aligned.
pub const LARGE_ALLOCATION_ALIGNMENT: usize = 2 << 20;

/// Row pitch alignment of pitched allocations and arrays (bytes).
pub const PITCH_ALIGNMENT: usize = 256;

/// What `hipMemGetAllocationGranularity` reports (minimum and recommended) for device memory;
/// `hipMemCreate` sizes and `hipMemMap`/`hipMemAddressReserve` sizes must be multiples of it.
pub const VMM_GRANULARITY: usize = 2 << 20;

/// Round `value` up to a multiple of `align` (a power of two), `None` on overflow.
pub const fn round_up(value: usize, align: usize) -> Option<usize> {
    match value.checked_add(align - 1) {
        Some(v) => Some(v & !(align - 1)),
        None => None,
    }
}

/// Bytes charged for a linear allocation of `size` bytes: `size` rounded up to
/// [`MALLOC_GRANULARITY`]; 0 for 0 (the runtime returns success and a NULL pointer).
pub const fn linear_bytes(size: usize) -> Option<usize> {
    round_up(size, MALLOC_GRANULARITY)
}

/// The pitch of a pitched allocation of `width` bytes per row: `width` rounded up to
/// [`PITCH_ALIGNMENT`].
pub const fn pitch_for(width: usize) -> Option<usize> {
    round_up(width, PITCH_ALIGNMENT)
}

/// Bytes charged for a pitched allocation (`hipMallocPitch`, `hipMemAllocPitch`, `hipMalloc3D`):
/// `pitch_for(width) * height * depth` rounded to [`MALLOC_GRANULARITY`] (`depth` is 1 for the 2D
/// doors). Zero when any dimension is zero.
pub fn pitched_bytes(width: usize, height: usize, depth: usize) -> Option<usize> {
    let pitch = pitch_for(width)?;
    linear_bytes(pitch.checked_mul(height)?.checked_mul(depth)?)
}

/// Bytes charged for an array of `width x height x depth` elements of `element_bytes` each
/// (`hipMallocArray`, `hipMalloc3DArray`, `hipArrayCreate`, `hipArray3DCreate`): rows are padded
/// to [`PITCH_ALIGNMENT`], a height or depth of 0 counts as 1 (1D/2D arrays), and the total is
/// rounded to [`MALLOC_GRANULARITY`]. A width of 0 is invalid (`None` is not returned for it:
/// callers reject it first).
pub fn array_bytes(
    element_bytes: usize,
    width: usize,
    height: usize,
    depth: usize,
) -> Option<usize> {
    let row = round_up(width.checked_mul(element_bytes)?, PITCH_ALIGNMENT)?;
    linear_bytes(row.checked_mul(height.max(1))?.checked_mul(depth.max(1))?)
}

/// Bytes charged for a mipmapped array with `levels` levels: the sum over level `l` of the
/// unrounded padded size of a `max(width >> l, 1) x (height >> l) x (depth >> l)` array (height
/// and depth keep 0 when they were 0, and are at least 1 otherwise), rounded once to
/// [`MALLOC_GRANULARITY`]. `levels` of 0 is treated as 1.
pub fn mipmapped_bytes(
    element_bytes: usize,
    width: usize,
    height: usize,
    depth: usize,
    levels: u32,
) -> Option<usize> {
    let shrink = |dim: usize, level: u32| -> usize {
        if dim == 0 {
            0
        } else {
            (dim.checked_shr(level).unwrap_or(0)).max(1)
        }
    };
    let mut total: usize = 0;
    for level in 0..levels.max(1) {
        let row = round_up(
            shrink(width, level).checked_mul(element_bytes)?,
            PITCH_ALIGNMENT,
        )?;
        let bytes = row
            .checked_mul(shrink(height, level).max(1))?
            .checked_mul(shrink(depth, level).max(1))?;
        total = total.checked_add(bytes)?;
    }
    linear_bytes(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_rounds_to_pages_and_keeps_zero() {
        assert_eq!(linear_bytes(0), Some(0));
        assert_eq!(linear_bytes(1), Some(4096));
        assert_eq!(linear_bytes(4096), Some(4096));
        assert_eq!(linear_bytes(4097), Some(8192));
        assert_eq!(linear_bytes(usize::MAX), None);
    }

    #[test]
    fn pitched_uses_padded_rows() {
        assert_eq!(pitch_for(100), Some(256));
        assert_eq!(pitched_bytes(100, 10, 1), Some(4096));
        assert_eq!(pitched_bytes(1000, 100, 1), Some(1024 * 100));
        assert_eq!(pitched_bytes(1000, 3, 1), Some(4096));
        assert_eq!(pitched_bytes(300, 0, 1), Some(0));
        assert_eq!(pitched_bytes(usize::MAX / 2, 4, 1), None);
    }

    #[test]
    fn arrays_pad_rows_and_treat_missing_dims_as_one() {
        assert_eq!(array_bytes(4, 1024, 0, 0), Some(4096));
        assert_eq!(array_bytes(16, 1024, 1024, 0), Some(16 << 20));
        assert_eq!(array_bytes(1, 10, 3, 2), Some(4096));
    }

    #[test]
    fn mipmaps_sum_levels() {
        // 256x256 RGBA8, three levels: 256x256, 128x128 and 64x64 texels.
        let l0 = 256 * 4 * 256;
        let l1 = 128 * 4 * 128;
        let l2 = 256 * 64;
        assert_eq!(mipmapped_bytes(4, 256, 256, 0, 3), Some(l0 + l1 + l2));
    }
}
