//! C ABI for [`cumask_core`] (the `cumask` crate): `libcumask.so`, `libcumask.a` and the
//! hand-written header `include/cumask.h`, which documents every function and status
//! code. This layer only translates: C strings in, canonical strings out, status codes
//! for errors, and a human-readable message on request.
//!
//! Conventions (the header repeats them for C readers):
//! * Every pointer may be NULL. A NULL required input gives `CUMASK_ERR_NULL`; a NULL
//!   optional output (`needed`, `err`) is skipped.
//! * Output buffers take `out_len` bytes including the terminating NUL. When the text
//!   does not fit, nothing but `out[0] = '\0'` is written, `*needed` receives the size
//!   including the NUL and the status is `CUMASK_ERR_BUFFER`. On every failure `out`
//!   (if non-NULL, `out_len > 0`) starts with NUL, so ignoring the status never yields a
//!   stale mask.
//! * `err`/`err_len` receive the error message, truncated to fit, always NUL-terminated
//!   when `err_len > 0`; an empty string on success.

use core::ffi::{c_char, c_int, CStr};
use core::fmt::Display;

use cumask_core::{
    allocate, cu_count_from_percent, parse_cu_list, AllocError, HsaCuMask, PercentError, Topology,
};

/// Success.
pub const CUMASK_OK: c_int = 0;
/// A required pointer was NULL.
pub const CUMASK_ERR_NULL: c_int = 1;
/// An input string was not UTF-8.
pub const CUMASK_ERR_UTF8: c_int = 2;
/// A CU list or HSA_CU_MASK did not parse.
pub const CUMASK_ERR_PARSE: c_int = 3;
/// A CU set is not safe on the device (split WGP, uncovered XCD, past the device, empty).
pub const CUMASK_ERR_INVALID: c_int = 4;
/// Unknown gfx target or impossible CU count for it.
pub const CUMASK_ERR_TARGET: c_int = 5;
/// A percentage or CU count out of range.
pub const CUMASK_ERR_RANGE: c_int = 6;
/// Not enough free CUs (or none on some XCD).
pub const CUMASK_ERR_NO_FIT: c_int = 7;
/// The output buffer is too small; `*needed` says how big it must be.
pub const CUMASK_ERR_BUFFER: c_int = 8;

/// Output format selector for [`cumask_format`]: canonical list `0-3,8`.
pub const CUMASK_FORMAT_LIST: c_int = 0;
/// Output format selector for [`cumask_format`]: hex `0x10f`.
pub const CUMASK_FORMAT_HEX: c_int = 1;

/// A failure: status code plus message.
struct Failure {
    status: c_int,
    message: String,
}

impl Failure {
    fn new(status: c_int, message: impl Display) -> Self {
        Failure {
            status,
            message: message.to_string(),
        }
    }
}

/// Reads an optional C string.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and unmodified
/// for `'a`.
unsafe fn opt_str<'a>(ptr: *const c_char, what: &str) -> Result<Option<&'a str>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, and the caller guarantees NUL termination and validity for 'a
    // (the header's contract for every `const char *` argument).
    let bytes = unsafe { CStr::from_ptr(ptr) };
    bytes
        .to_str()
        .map(Some)
        .map_err(|e| Failure::new(CUMASK_ERR_UTF8, format_args!("{what} is not UTF-8: {e}")))
}

/// Reads a required C string.
///
/// # Safety
/// As [`opt_str`].
unsafe fn req_str<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: forwarded contract.
    unsafe { opt_str(ptr, what) }?
        .ok_or_else(|| Failure::new(CUMASK_ERR_NULL, format_args!("{what} is NULL")))
}

/// A caller-owned byte buffer, or `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or valid for writes of `len` bytes for `'a`, not aliased by any other
/// argument.
unsafe fn out_buf<'a>(ptr: *mut c_char, len: usize) -> Option<&'a mut [u8]> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-NULL; the caller guarantees `len` writable bytes, exclusively ours for
    // the duration of the call.
    Some(unsafe { core::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

/// Copies `text` plus NUL into `out` if it fits; records the needed size.
fn deliver(text: &str, out: Option<&mut [u8]>, needed: Option<&mut usize>) -> Result<(), Failure> {
    let size = text.len() + 1;
    if let Some(needed) = needed {
        *needed = size;
    }
    match out {
        Some(buf) if buf.len() >= size => {
            buf[..text.len()].copy_from_slice(text.as_bytes());
            buf[text.len()] = 0;
            Ok(())
        }
        _ => Err(Failure::new(
            CUMASK_ERR_BUFFER,
            format_args!("output buffer too small: {size} bytes needed including NUL"),
        )),
    }
}

/// Writes `message` truncated (at a char boundary) plus NUL into `err`.
fn write_message(message: &str, err: Option<&mut [u8]>) {
    let Some(buf) = err else { return };
    if buf.is_empty() {
        return;
    }
    let mut len = message.len().min(buf.len() - 1);
    while !message.is_char_boundary(len) {
        len -= 1;
    }
    buf[..len].copy_from_slice(&message.as_bytes()[..len]);
    buf[len] = 0;
}

/// Runs `body`, then reports: status code, message into `err`, and on failure a leading
/// NUL in `out` so no stale text is mistaken for a mask.
fn finish(result: Result<(), Failure>, out: Option<&mut [u8]>, err: Option<&mut [u8]>) -> c_int {
    match result {
        Ok(()) => {
            write_message("", err);
            CUMASK_OK
        }
        Err(failure) => {
            if let Some(first) = out.and_then(|b| b.first_mut()) {
                *first = 0;
            }
            write_message(&failure.message, err);
            failure.status
        }
    }
}

fn topology(target: &str, cu_count: u32) -> Result<Topology, Failure> {
    Topology::from_target(target, cu_count).map_err(|e| Failure::new(CUMASK_ERR_TARGET, e))
}

/// `clamp(floor(percent * devcore / 100), 1, devcore)`; see `cumask.h`.
///
/// # Safety
/// `count` is NULL or valid for one `uint32_t` write.
#[no_mangle]
pub unsafe extern "C" fn cumask_count_from_percent(
    percent: u32,
    devcore: u32,
    count: *mut u32,
) -> c_int {
    // SAFETY: the caller passes NULL or a writable, aligned uint32_t (header contract).
    let Some(count) = (unsafe { count.as_mut() }) else {
        return CUMASK_ERR_NULL;
    };
    match cu_count_from_percent(percent, devcore) {
        Ok(n) => {
            *count = n;
            CUMASK_OK
        }
        Err(PercentError::OutOfRange { .. } | PercentError::NoCus) => CUMASK_ERR_RANGE,
    }
}

/// The CU count a request really gets on a device; see `cumask.h`.
///
/// # Safety
/// `target` is NULL or NUL-terminated; `rounded` NULL or writable; `err` NULL or
/// writable for `err_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cumask_round_count(
    target: *const c_char,
    cu_count: u32,
    count: u32,
    rounded: *mut u32,
    err: *mut c_char,
    err_len: usize,
) -> c_int {
    // SAFETY: header contract: err is NULL or err_len writable bytes.
    let err = unsafe { out_buf(err, err_len) };
    let result = (|| {
        // SAFETY: header contract: NULL or NUL-terminated.
        let target = unsafe { req_str(target, "target") }?;
        // SAFETY: header contract: NULL or a writable, aligned uint32_t.
        let rounded = unsafe { rounded.as_mut() }
            .ok_or_else(|| Failure::new(CUMASK_ERR_NULL, "rounded is NULL"))?;
        let topo = topology(target, cu_count)?;
        *rounded = topo
            .round_count(count)
            .map_err(|e| Failure::new(CUMASK_ERR_RANGE, e))?;
        Ok(())
    })();
    finish(result, None, err)
}

/// Checks that a CU list parses and is safe on the device; see `cumask.h`.
///
/// # Safety
/// `target`, `cu_list` NULL or NUL-terminated; `err` NULL or writable for `err_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cumask_validate(
    target: *const c_char,
    cu_count: u32,
    cu_list: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> c_int {
    // SAFETY: header contract: err is NULL or err_len writable bytes.
    let err = unsafe { out_buf(err, err_len) };
    let result = (|| {
        // SAFETY: header contract: NULL or NUL-terminated.
        let target = unsafe { req_str(target, "target") }?;
        // SAFETY: as above.
        let cu_list = unsafe { req_str(cu_list, "cu_list") }?;
        let topo = topology(target, cu_count)?;
        let set =
            parse_cu_list(cu_list, cu_count).map_err(|e| Failure::new(CUMASK_ERR_PARSE, e))?;
        topo.validate(&set).map_err(|e| {
            Failure::new(
                CUMASK_ERR_INVALID,
                format_args!("CU list \"{cu_list}\": {e}"),
            )
        })
    })();
    finish(result, None, err)
}

/// Allocates `count` CUs disjoint from `taken`; see `cumask.h`.
///
/// # Safety
/// String arguments NULL or NUL-terminated; `out` NULL or writable for `out_len` bytes;
/// `needed` NULL or a writable `size_t`; `err` NULL or writable for `err_len` bytes; the
/// buffers do not overlap.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cumask_allocate(
    target: *const c_char,
    cu_count: u32,
    taken: *const c_char,
    count: u32,
    out: *mut c_char,
    out_len: usize,
    needed: *mut usize,
    err: *mut c_char,
    err_len: usize,
) -> c_int {
    // SAFETY: header contract for out/err: NULL or writable for their lengths, disjoint.
    let (mut out, err) = unsafe { (out_buf(out, out_len), out_buf(err, err_len)) };
    let result = (|| {
        // SAFETY: header contract: NULL or NUL-terminated.
        let target = unsafe { req_str(target, "target") }?;
        // SAFETY: as above; NULL means nothing is taken.
        let taken = unsafe { opt_str(taken, "taken") }?.unwrap_or("");
        let topo = topology(target, cu_count)?;
        let taken_set = if taken.trim().is_empty() {
            cumask_core::CuSet::new()
        } else {
            parse_cu_list(taken, cu_count)
                .map_err(|e| Failure::new(CUMASK_ERR_PARSE, format_args!("taken: {e}")))?
        };
        let slice = allocate(&topo, &taken_set, count).map_err(|e| {
            let status = match e {
                AllocError::DoesNotFit { .. } | AllocError::XcdFull { .. } => CUMASK_ERR_NO_FIT,
                _ => CUMASK_ERR_RANGE,
            };
            Failure::new(status, e)
        })?;
        // SAFETY: header contract: NULL or a writable, aligned size_t.
        let needed = unsafe { needed.as_mut() };
        deliver(&slice.to_string(), out.as_deref_mut(), needed)
    })();
    finish(result, out, err)
}

/// Reformats a CU list canonically (list or hex); see `cumask.h`.
///
/// # Safety
/// As [`cumask_allocate`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cumask_format(
    cu_list: *const c_char,
    cu_count: u32,
    format: c_int,
    out: *mut c_char,
    out_len: usize,
    needed: *mut usize,
    err: *mut c_char,
    err_len: usize,
) -> c_int {
    // SAFETY: header contract for out/err: NULL or writable for their lengths, disjoint.
    let (mut out, err) = unsafe { (out_buf(out, out_len), out_buf(err, err_len)) };
    let result = (|| {
        // SAFETY: header contract: NULL or NUL-terminated.
        let cu_list = unsafe { req_str(cu_list, "cu_list") }?;
        let set =
            parse_cu_list(cu_list, cu_count).map_err(|e| Failure::new(CUMASK_ERR_PARSE, e))?;
        let text = match format {
            CUMASK_FORMAT_LIST => set.to_string(),
            CUMASK_FORMAT_HEX => set.hex().to_string(),
            other => {
                return Err(Failure::new(
                    CUMASK_ERR_RANGE,
                    format_args!("unknown format {other}"),
                ));
            }
        };
        // SAFETY: header contract: NULL or a writable, aligned size_t.
        let needed = unsafe { needed.as_mut() };
        deliver(&text, out.as_deref_mut(), needed)
    })();
    finish(result, out, err)
}

/// Parses a whole `HSA_CU_MASK` and writes its canonical form; see `cumask.h`.
///
/// # Safety
/// As [`cumask_allocate`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cumask_parse_hsa_cu_mask(
    text: *const c_char,
    gpu_count: u32,
    cu_count: u32,
    out: *mut c_char,
    out_len: usize,
    needed: *mut usize,
    err: *mut c_char,
    err_len: usize,
) -> c_int {
    // SAFETY: header contract for out/err: NULL or writable for their lengths, disjoint.
    let (mut out, err) = unsafe { (out_buf(out, out_len), out_buf(err, err_len)) };
    let result = (|| {
        // SAFETY: header contract: NULL or NUL-terminated.
        let text = unsafe { req_str(text, "HSA_CU_MASK") }?;
        let mask = HsaCuMask::parse_for(text, gpu_count, cu_count)
            .map_err(|e| Failure::new(CUMASK_ERR_PARSE, e))?;
        // SAFETY: header contract: NULL or a writable, aligned size_t.
        let needed = unsafe { needed.as_mut() };
        deliver(&mask.to_string(), out.as_deref_mut(), needed)
    })();
    finish(result, out, err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::ptr::{null, null_mut};

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    fn text(buf: &[u8]) -> &str {
        CStr::from_bytes_until_nul(buf).unwrap().to_str().unwrap()
    }

    #[test]
    fn percent_and_null_out() {
        let mut n = 0;
        // SAFETY: &mut n is a valid, aligned uint32_t.
        let status = unsafe { cumask_count_from_percent(25, 304, &mut n) };
        assert_eq!(status, CUMASK_OK);
        assert_eq!(n, 76);
        // SAFETY: NULL is allowed by the contract.
        let status = unsafe { cumask_count_from_percent(25, 304, null_mut()) };
        assert_eq!(status, CUMASK_ERR_NULL);
        // SAFETY: &mut n is a valid, aligned uint32_t.
        let status = unsafe { cumask_count_from_percent(101, 304, &mut n) };
        assert_eq!(status, CUMASK_ERR_RANGE);
    }

    #[test]
    fn allocate_reports_needed_size_and_clears_out_on_failure() {
        let target = c("gfx942");
        let mut needed = 0usize;
        let mut small = [b'#'; 3];
        let mut err = [0u8; 128];
        // SAFETY: all buffers are valid for their stated lengths and disjoint.
        let status = unsafe {
            cumask_allocate(
                target.as_ptr(),
                304,
                null(),
                76,
                small.as_mut_ptr().cast(),
                small.len(),
                &mut needed,
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        assert_eq!(status, CUMASK_ERR_BUFFER);
        assert_eq!(needed, 5); // "0-71" + NUL
        assert_eq!(small[0], 0);
        assert!(text(&err).contains("5 bytes"), "{}", text(&err));

        let mut out = [0u8; 5];
        let taken = c("0-71");
        // SAFETY: as above.
        let status = unsafe {
            cumask_allocate(
                target.as_ptr(),
                304,
                taken.as_ptr(),
                76,
                out.as_mut_ptr().cast(),
                out.len(),
                null_mut(),
                null_mut(),
                0,
            )
        };
        assert_eq!(status, CUMASK_ERR_BUFFER); // "72-143" needs 7
        let mut out = [0u8; 16];
        // SAFETY: as above.
        let status = unsafe {
            cumask_allocate(
                target.as_ptr(),
                304,
                taken.as_ptr(),
                76,
                out.as_mut_ptr().cast(),
                out.len(),
                null_mut(),
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        assert_eq!(status, CUMASK_OK);
        assert_eq!(text(&out), "72-143");
        assert_eq!(text(&err), "");
    }

    #[test]
    fn errors_carry_messages_and_codes() {
        let mut err = [0u8; 200];
        let target = c("gfx942");
        let list = c("0-3");
        // SAFETY: valid strings and buffer.
        let status = unsafe {
            cumask_validate(
                target.as_ptr(),
                304,
                list.as_ptr(),
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        assert_eq!(status, CUMASK_ERR_INVALID);
        assert_eq!(
            text(&err),
            "CU list \"0-3\": XCD 4 of 8 gets no CU from the mask and would run unmasked"
        );
        let bad = c("gfx9999");
        // SAFETY: as above.
        let status = unsafe {
            cumask_validate(
                bad.as_ptr(),
                304,
                list.as_ptr(),
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        assert_eq!(status, CUMASK_ERR_TARGET);
        // SAFETY: NULL list is allowed and reported.
        let status = unsafe {
            cumask_validate(
                target.as_ptr(),
                304,
                null(),
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        assert_eq!(status, CUMASK_ERR_NULL);
        assert_eq!(text(&err), "cu_list is NULL");
        // Truncated message stays NUL-terminated.
        let mut tiny = [b'#'; 4];
        // SAFETY: as above.
        unsafe {
            cumask_validate(
                target.as_ptr(),
                304,
                null(),
                tiny.as_mut_ptr().cast(),
                tiny.len(),
            )
        };
        assert_eq!(&tiny, b"cu_\0");
        let full = c("0-303");
        let mut out = [0u8; 8];
        // SAFETY: as above.
        let status = unsafe {
            cumask_allocate(
                target.as_ptr(),
                304,
                full.as_ptr(),
                8,
                out.as_mut_ptr().cast(),
                out.len(),
                null_mut(),
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        assert_eq!(status, CUMASK_ERR_NO_FIT);
        assert_eq!(text(&err), "does not fit: 8 CUs requested, 0 free");
        let not_utf8 = [0xffu8, 0];
        // SAFETY: NUL-terminated byte string.
        let status = unsafe {
            cumask_validate(
                target.as_ptr(),
                304,
                not_utf8.as_ptr().cast(),
                null_mut(),
                0,
            )
        };
        assert_eq!(status, CUMASK_ERR_UTF8);
    }

    #[test]
    fn format_and_parse_mask() {
        let mut out = [0u8; 64];
        let list = c("8-11, 0-3");
        // SAFETY: valid strings and buffers.
        let status = unsafe {
            cumask_format(
                list.as_ptr(),
                304,
                CUMASK_FORMAT_HEX,
                out.as_mut_ptr().cast(),
                out.len(),
                null_mut(),
                null_mut(),
                0,
            )
        };
        assert_eq!(status, CUMASK_OK);
        assert_eq!(text(&out), "0xf0f");
        // SAFETY: as above.
        let status = unsafe {
            cumask_format(
                list.as_ptr(),
                304,
                7,
                out.as_mut_ptr().cast(),
                out.len(),
                null_mut(),
                null_mut(),
                0,
            )
        };
        assert_eq!(status, CUMASK_ERR_RANGE);
        let mask = c("1:0x3; 0 :0-75");
        // SAFETY: as above.
        let status = unsafe {
            cumask_parse_hsa_cu_mask(
                mask.as_ptr(),
                2,
                304,
                out.as_mut_ptr().cast(),
                out.len(),
                null_mut(),
                null_mut(),
                0,
            )
        };
        assert_eq!(status, CUMASK_OK);
        assert_eq!(text(&out), "0:0-75;1:0-1");
        let bad = c("0:0-75;0:1");
        let mut err = [0u8; 128];
        // SAFETY: as above.
        let status = unsafe {
            cumask_parse_hsa_cu_mask(
                bad.as_ptr(),
                2,
                304,
                out.as_mut_ptr().cast(),
                out.len(),
                null_mut(),
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        assert_eq!(status, CUMASK_ERR_PARSE);
        assert_eq!(
            text(&err),
            "HSA_CU_MASK: at byte 7 (\"0\"): GPU 0 appears in two sets"
        );
        assert_eq!(out[0], 0);
    }
}
