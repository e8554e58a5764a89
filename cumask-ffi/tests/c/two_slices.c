/* Two tenants each ask for 25% of a 304-CU MI300X (gfx942) through the C ABI, the way
 * a cgo scheduler would. Prints one line per fact for the Rust test to check. */
#include <stdio.h>
#include <string.h>

#include "cumask.h"

#define TARGET "gfx942:sramecc+:xnack-"

static int fail(const char *what, int status, const char *err) {
    fprintf(stderr, "%s: status %d: %s\n", what, status, err);
    return 1;
}

int main(void) {
    char err[256];
    uint32_t booked = 0, rounded = 0;
    int st = cumask_count_from_percent(25, 304, &booked);
    if (st != CUMASK_OK) return fail("percent", st, "");
    st = cumask_round_count(TARGET, 304, booked, &rounded, err, sizeof err);
    if (st != CUMASK_OK) return fail("round", st, err);
    printf("booked=%u\nrounded=%u\n", booked, rounded);

    /* Ask for the size first, as a caller with no fixed buffer would. */
    size_t needed = 0;
    st = cumask_allocate(TARGET, 304, NULL, booked, NULL, 0, &needed, err, sizeof err);
    if (st != CUMASK_ERR_BUFFER) return fail("size query", st, err);
    printf("needed=%zu\n", needed);

    char first[CUMASK_LIST_MAX], second[CUMASK_LIST_MAX];
    st = cumask_allocate(TARGET, 304, NULL, booked, first, sizeof first, NULL, err, sizeof err);
    if (st != CUMASK_OK) return fail("first", st, err);
    /* The second tenant sees the first one's CUs as taken. */
    st = cumask_allocate(TARGET, 304, first, booked, second, sizeof second, NULL, err, sizeof err);
    if (st != CUMASK_OK) return fail("second", st, err);
    printf("first=%s\nsecond=%s\n", first, second);
    printf("HSA_CU_MASK=0:%s\n", second);

    st = cumask_validate(TARGET, 304, first, err, sizeof err);
    printf("validate_first=%d\n", st);
    st = cumask_validate(TARGET, 304, "0-3", err, sizeof err);
    printf("validate_0_3=%d %s\n", st, err);

    /* NULL everywhere must be an error, never a crash. */
    printf("null_target=%d\n", cumask_allocate(NULL, 304, NULL, booked, NULL, 0, NULL, NULL, 0));
    printf("null_count=%d\n", cumask_count_from_percent(25, 304, NULL));
    return 0;
}
