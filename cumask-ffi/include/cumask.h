/*
 * cumask.h - C interface to cumask: safe HSA_CU_MASK slices for sharing AMD GPUs.
 *
 * Link with libcumask.so (-lcumask) or statically with libcumask.a plus
 * "-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc" (Rust's standard library needs them).
 * Hand-written; keep in step with cumask-ffi/src/lib.rs.
 *
 * Conventions for every function:
 *  - Every pointer may be NULL. A NULL required input gives CUMASK_ERR_NULL; NULL
 *    optional outputs (needed, err) are skipped. Input strings are NUL-terminated UTF-8
 *    and are only read during the call.
 *  - `out`/`out_len`: the caller's buffer and its size in bytes INCLUDING the final NUL.
 *    If the text does not fit, the status is CUMASK_ERR_BUFFER and `*needed` holds the
 *    size to allocate (including NUL); call again. Passing out = NULL, out_len = 0 is the
 *    way to ask for the size.
 *  - On every failure, if out != NULL and out_len > 0, out[0] is set to '\0': a caller
 *    that ignores the status gets an empty string, never a stale or partial mask.
 *  - `err`/`err_len`: optional buffer for a human-readable message naming the input
 *    and what is wrong (e.g. "CU list \"0-3\": XCD 4 of 8 gets no CU from the mask and
 *    would run unmasked"); truncated to fit and always NUL-terminated when err_len > 0;
 *    the empty string on success.
 *  - Buffers must not overlap each other or the input strings.
 *  - Functions keep no state and are safe to call from any thread (and from Go's cgo,
 *    where one goroutine may move between OS threads between calls).
 *
 * `target` is a gfx target as HIP reports it (hipDeviceProp_t.gcnArchName), feature
 * suffixes allowed: "gfx942:sramecc+:xnack-", "gfx90a", "gfx1100". Unknown targets are
 * an error (CUMASK_ERR_TARGET), never guessed. `cu_count` is the device's CU count
 * (HAMi's devcore, e.g. 304 on MI300X).
 *
 * CU lists use ROCr's HSA_CU_MASK grammar: ids and a-b ranges separated by commas
 * ("0-3,8,10-12"), or a hex mask ("0xff"). Lists written by this library are canonical:
 * ascending, merged ranges.
 */
#ifndef CUMASK_H
#define CUMASK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes returned by every function except where noted. */
#define CUMASK_OK          0 /* success */
#define CUMASK_ERR_NULL    1 /* a required pointer was NULL */
#define CUMASK_ERR_UTF8    2 /* an input string is not valid UTF-8 */
#define CUMASK_ERR_PARSE   3 /* a CU list / HSA_CU_MASK does not parse (or names a CU or
                                GPU the device does not have) */
#define CUMASK_ERR_INVALID 4 /* the CU set is unsafe on the device: empty, split RDNA WGP,
                                or an MI300 XCD without a CU (it would run unmasked) */
#define CUMASK_ERR_TARGET  5 /* unknown gfx target, or CU count impossible for it */
#define CUMASK_ERR_RANGE   6 /* percent not in 1..100, count 0 or above the device, bad
                                format selector */
#define CUMASK_ERR_NO_FIT  7 /* not enough free CUs (message gives requested and free) */
#define CUMASK_ERR_BUFFER  8 /* `out` too small; *needed holds the size including NUL */

/* Format selectors for cumask_format. */
#define CUMASK_FORMAT_LIST 0 /* "0-3,8" */
#define CUMASK_FORMAT_HEX  1 /* "0x10f" */

/* A buffer this size holds any CU list this library writes, NUL included: at most 1024
 * CUs, each contributing at most a 4-digit id and one separator (1024 * 5 + 1). */
#define CUMASK_LIST_MAX 5121

/*
 * HAMi's CU count for an amd.com/gpucores request:
 * *count = clamp(floor(percent * devcore / 100), 1, devcore).
 * 304 CUs: 25 -> 76, 33 -> 100, 67 -> 203.
 * Returns CUMASK_OK, CUMASK_ERR_NULL (count NULL) or CUMASK_ERR_RANGE (percent not in
 * 1..100, or devcore 0).
 */
int cumask_count_from_percent(uint32_t percent, uint32_t devcore, uint32_t *count);

/*
 * The CU count a request for `count` CUs really gets on this device, so a scheduler and
 * a device plugin agree: RDNA rounds up to whole 2-CU WGPs; multi-XCD parts (gfx942)
 * round down to a multiple of the XCD count, at least one CU per XCD (304 CUs: 76 -> 72);
 * others keep the count. Idempotent.
 * Returns CUMASK_OK, CUMASK_ERR_NULL, CUMASK_ERR_UTF8, CUMASK_ERR_TARGET, CUMASK_ERR_RANGE.
 */
int cumask_round_count(const char *target, uint32_t cu_count, uint32_t count,
                       uint32_t *rounded, char *err, size_t err_len);

/*
 * Checks that `cu_list` parses and is safe on the device.
 * Returns CUMASK_OK, CUMASK_ERR_NULL, CUMASK_ERR_UTF8, CUMASK_ERR_TARGET,
 * CUMASK_ERR_PARSE or CUMASK_ERR_INVALID.
 */
int cumask_validate(const char *target, uint32_t cu_count, const char *cu_list,
                    char *err, size_t err_len);

/*
 * Picks `count` CUs (rounded as cumask_round_count does) that are disjoint from `taken`
 * (a CU list of the CUs other tenants hold on this GPU; NULL or "" for none) and safe on
 * the device, and writes them as a canonical CU list. Deterministic: one contiguous range
 * when one fits (best fit, lowest address on a tie), else a valid union of ranges.
 * Returns CUMASK_OK, CUMASK_ERR_NULL, CUMASK_ERR_UTF8, CUMASK_ERR_TARGET,
 * CUMASK_ERR_PARSE (taken), CUMASK_ERR_RANGE (count), CUMASK_ERR_NO_FIT, CUMASK_ERR_BUFFER.
 */
int cumask_allocate(const char *target, uint32_t cu_count, const char *taken,
                    uint32_t count, char *out, size_t out_len, size_t *needed,
                    char *err, size_t err_len);

/*
 * Rewrites a CU list canonically, as a list (CUMASK_FORMAT_LIST) or as hex
 * (CUMASK_FORMAT_HEX, the form ROC_GLOBAL_CU_MASK takes). Ids must be below cu_count.
 * Returns CUMASK_OK, CUMASK_ERR_NULL, CUMASK_ERR_UTF8, CUMASK_ERR_PARSE, CUMASK_ERR_RANGE
 * (unknown format) or CUMASK_ERR_BUFFER.
 */
int cumask_format(const char *cu_list, uint32_t cu_count, int format, char *out,
                  size_t out_len, size_t *needed, char *err, size_t err_len);

/*
 * Parses a whole HSA_CU_MASK ("GPU_list:CU_list[;...]", GPU indices below gpu_count, CU
 * ids below cu_count) and writes its canonical form: one set per GPU, ascending
 * ("0:0-75;1:0-75"). Anything ROCr would reject (it then runs unmasked) is
 * CUMASK_ERR_PARSE with the byte offset in the message.
 * Returns CUMASK_OK, CUMASK_ERR_NULL, CUMASK_ERR_UTF8, CUMASK_ERR_PARSE, CUMASK_ERR_BUFFER.
 */
int cumask_parse_hsa_cu_mask(const char *text, uint32_t gpu_count, uint32_t cu_count,
                             char *out, size_t out_len, size_t *needed, char *err,
                             size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* CUMASK_H */
