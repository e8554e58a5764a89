/* alloc_pair ITERATIONS ROUNDS: per-pair thread-CPU nanoseconds (median of ROUNDS timed loops)
 * of hipMalloc+hipFree at several sizes, each beside an mmap+munmap pair of the same size (what
 * one allocation cost before the arena). Thread CPU time leaves out time spent preempted.
 * One line per size: `<bytes> <hip ns> <mmap ns>`. */
#define _GNU_SOURCE
#include "fixture.h"
#include <sys/mman.h>
#include <time.h>

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void hip_pair(size_t size) {
    void *p;
    CHECK_HIP(hipMalloc(&p, size));
    CHECK_HIP(hipFree(p));
}

static void mmap_pair(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(p != MAP_FAILED);
    CHECK(munmap(p, size) == 0);
}

static double median_ns(void (*pair)(size_t), size_t size, long iterations, int rounds) {
    double r[64];
    for (long i = 0; i < iterations / 10 + 1; i++) pair(size); /* warm up */
    for (int k = 0; k < rounds; k++) {
        double t0 = cpu_ns();
        for (long i = 0; i < iterations; i++) pair(size);
        r[k] = (cpu_ns() - t0) / (double)iterations;
    }
    qsort(r, (size_t)rounds, sizeof r[0], by_value);
    return r[rounds / 2];
}

int main(int argc, char **argv) {
    CHECK(argc == 3);
    long iterations = atol(argv[1]);
    int rounds = atoi(argv[2]);
    CHECK(iterations > 0 && rounds > 0 && rounds <= 64);
    size_t sizes[] = {4096, 256 << 10, 4 << 20};
    for (int i = 0; i < 3; i++) {
        double hip = median_ns(hip_pair, sizes[i], iterations, rounds);
        double map = median_ns(mmap_pair, sizes[i], iterations, rounds);
        printf("%zu %.1f %.1f\n", sizes[i], hip, map);
    }
    return 0;
}
