/* A minimal stand-in for libamdhip64.so, compiled INSIDE an old-glibc root (ci/old-glibc.sh).
 *
 * hipsim, the project's simulator, is built by Rust against this machine's glibc and needs
 * GLIBC_2.34 (pthread_key_create) and GLIBC_2.33 (stat64), so it cannot load on glibc 2.31.
 * The old-glibc check is about the loader and the audit module, not about the runtime, so it
 * uses this: one device of 4 GiB, linear allocations handed out from a fake address range, and
 * the simulator's hipsimGetUsage (live and peak bytes) so that the same shape.c fixture runs.
 * Build: gcc -shared -fPIC -Wl,-soname,libamdhip64.so -o libamdhip64.so minihip.c */
#include <stddef.h>
#include <stdint.h>

typedef int hipError_t;
#define VRAM ((size_t)4 << 30)
#define PAGE ((size_t)4096)

static size_t live, peak, next_address = (size_t)1 << 40;

hipError_t hipGetDeviceCount(int *count) {
    if (!count) return 1;
    *count = 1;
    return 0;
}

hipError_t hipGetDevice(int *device) {
    if (!device) return 1;
    *device = 0;
    return 0;
}

hipError_t hipSetDevice(int device) { return device == 0 ? 0 : 101; }

hipError_t hipMalloc(void **ptr, size_t size) {
    if (!ptr) return 1;
    if (size == 0) {
        *ptr = NULL;
        return 0;
    }
    if (size > VRAM) return 2;
    size_t rounded = (size + PAGE - 1) & ~(PAGE - 1);
    size_t now = __atomic_add_fetch(&live, rounded, __ATOMIC_SEQ_CST);
    if (now > VRAM) {
        __atomic_sub_fetch(&live, rounded, __ATOMIC_SEQ_CST);
        return 2;
    }
    size_t seen = __atomic_load_n(&peak, __ATOMIC_SEQ_CST);
    while (now > seen &&
           !__atomic_compare_exchange_n(&peak, &seen, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    *ptr = (void *)__atomic_fetch_add(&next_address, rounded, __ATOMIC_SEQ_CST);
    return 0;
}

/* Frees are not needed by the shapes; accept and forget. */
hipError_t hipFree(void *ptr) {
    (void)ptr;
    return 0;
}

hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total) {
    if (!free_bytes || !total) return 1;
    *total = VRAM;
    *free_bytes = VRAM - __atomic_load_n(&live, __ATOMIC_SEQ_CST);
    return 0;
}

hipError_t hipDeviceTotalMem(size_t *bytes, int device) {
    if (!bytes) return 1;
    if (device != 0) return 101;
    *bytes = VRAM;
    return 0;
}

const char *hipGetErrorName(hipError_t e) { return e == 0 ? "hipSuccess" : "hipError"; }
const char *hipGetErrorString(hipError_t e) { return hipGetErrorName(e); }

hipError_t hipsimGetUsage(int device, size_t *live_out, size_t *peak_out) {
    if (device != 0) return 101;
    *live_out = __atomic_load_n(&live, __ATOMIC_SEQ_CST);
    *peak_out = __atomic_load_n(&peak, __ATOMIC_SEQ_CST);
    return 0;
}
