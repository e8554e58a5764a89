/*
 * holdmany: keeps N small allocations live and reports how much resident memory that took,
 * plus the resident size of the audit module's own mappings.
 *
 *     holdmany N
 *
 * Prints `rss_delta <bytes>` (resident set growth across the N allocations, the pointer array
 * itself excluded: it is touched before the first reading) and `hook_rss <bytes>` (sum of Rss
 * over mappings of libamvgpu.so in /proc/self/smaps).
 */
#define _GNU_SOURCE
#include <hip/hip_runtime_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long rss_bytes(void) {
    long pages_total = 0, pages_resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL || fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) {
        fprintf(stderr, "holdmany: cannot read /proc/self/statm\n");
        exit(1);
    }
    fclose(f);
    return pages_resident * sysconf(_SC_PAGESIZE);
}

static long hook_rss(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (f == NULL) return -1;
    char line[4096];
    int in_hook = 0;
    long kb_total = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        /* mapping headers start with "lo-hi"; field lines ("Rss:", "AnonHugePages:") do not */
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in_hook = strstr(line, "libamvgpu") != NULL;
        } else if (in_hook && strncmp(line, "Rss:", 4) == 0) {
            long kb = 0;
            sscanf(line + 4, "%ld", &kb);
            kb_total += kb;
        }
    }
    fclose(f);
    return kb_total * 1024;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: holdmany N\n");
        return 2;
    }
    long n = atol(argv[1]);
    void **ptrs = malloc((size_t)n * sizeof(void *));
    if (ptrs == NULL) return 1;
    memset(ptrs, 0, (size_t)n * sizeof(void *));
    /* one allocation first so that the runtime and the hook finish their lazy start-up */
    void *first = NULL;
    if (hipMalloc(&first, 256) != hipSuccess) {
        fprintf(stderr, "holdmany: first hipMalloc failed\n");
        return 1;
    }
    long before = rss_bytes();
    for (long i = 0; i < n; i++) {
        if (hipMalloc(&ptrs[i], 256) != hipSuccess) {
            fprintf(stderr, "holdmany: hipMalloc %ld failed\n", i);
            return 1;
        }
    }
    long after = rss_bytes();
    printf("rss_delta %ld\n", after - before);
    printf("hook_rss %ld\n", hook_rss());
    for (long i = 0; i < n; i++) hipFree(ptrs[i]);
    hipFree(first);
    return 0;
}
