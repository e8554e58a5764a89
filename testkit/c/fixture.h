/* Helpers for C test fixtures (testkit). Include this first; it includes hip_sim_api.h unless
 * FIXTURE_NO_HIP is defined (for fixtures that do not link the HIP library).
 *
 * Every CHECK prints the file, line and failing expression (with values) on stderr and exits
 * with status 1, so a Rust test sees which assertion broke. */
#ifndef TESTKIT_FIXTURE_H
#define TESTKIT_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FIXTURE_NO_HIP
#include "hip_sim_api.h"
#endif

#define CHECK(expr)                                                                   \
    do {                                                                              \
        if (!(expr)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr);  \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

/* Compare two unsigned integers (sizes, addresses), printing both on failure. */
#define CHECK_EQ_U64(actual, expected)                                                     \
    do {                                                                                   \
        unsigned long long a_ = (unsigned long long)(actual);                              \
        unsigned long long e_ = (unsigned long long)(expected);                            \
        if (a_ != e_) {                                                                    \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %llu, expected %s == %llu\n",   \
                    __FILE__, __LINE__, #actual, a_, #expected, e_);                       \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#ifndef FIXTURE_NO_HIP
/* The HIP call must return `expected` (a hipError_t). */
#define CHECK_HIP_EQ(call, expected)                                                      \
    do {                                                                                  \
        hipError_t got_ = (call);                                                         \
        hipError_t want_ = (expected);                                                    \
        if (got_ != want_) {                                                              \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n", __FILE__,   \
                    __LINE__, #call, (int)got_, hipGetErrorName(got_), (int)want_,        \
                    hipGetErrorName(want_));                                              \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* The HIP call must succeed. */
#define CHECK_HIP(call) CHECK_HIP_EQ(call, hipSuccess)

/* Device-wide live bytes on `device`, as the simulator sees them. */
static inline size_t fixture_live(int device) {
    size_t live = 0, peak = 0;
    CHECK_HIP(hipsimGetUsage(device, &live, &peak));
    return live;
}
#endif

#endif
