/*
 * hotloop: times one HIP call pattern inside the process, so that process start-up and the
 * loader never enter the figure.
 *
 *     hotloop MODE ITERATIONS THREADS
 *
 * MODE is `pair` (hipMalloc of 4 KiB then hipFree), `props` (hipGetDevicePropertiesR0600) or
 * `meminfo` (hipMemGetInfo). Every thread warms up, waits at a barrier so that all threads run
 * the timed loop together, and prints `ns <wall ns per iteration> <thread CPU ns per iteration>`
 * for itself. Thread CPU time (CLOCK_THREAD_CPUTIME_ID) leaves out the time the thread sat
 * preempted, so it is the steadier figure on a shared machine. The first line,
 * `total <bytes>`, is hipMemGetInfo's total: the limit when the hook is active.
 */
#define _GNU_SOURCE
#include <hip/hip_runtime_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern hipError_t hipGetDevicePropertiesR0600(void *prop, int device);

enum mode { PAIR, PROPS, MEMINFO };

static enum mode mode;
static long iterations;
static pthread_barrier_t start;

static int one(void) {
    switch (mode) {
    case PAIR: {
        void *p = NULL;
        if (hipMalloc(&p, 4096) != hipSuccess) return 1;
        return hipFree(p) != hipSuccess;
    }
    case PROPS: {
        static __thread unsigned char prop[2048];
        return hipGetDevicePropertiesR0600(prop, 0) != hipSuccess;
    }
    case MEMINFO: {
        size_t fr, total;
        return hipMemGetInfo(&fr, &total) != hipSuccess;
    }
    }
    return 1;
}

static double now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

struct timing {
    double wall_ns;
    double cpu_ns;
};

static void *worker(void *arg) {
    struct timing *result = arg;
    hipSetDevice(0);
    for (long i = 0; i < iterations / 10 + 100; i++)
        if (one()) {
            fprintf(stderr, "hotloop: call failed during warm-up\n");
            exit(1);
        }
    pthread_barrier_wait(&start);
    double t0 = now_ns(CLOCK_MONOTONIC);
    double c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (long i = 0; i < iterations; i++)
        if (one()) {
            fprintf(stderr, "hotloop: call failed\n");
            exit(1);
        }
    result->cpu_ns = (now_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)iterations;
    result->wall_ns = (now_ns(CLOCK_MONOTONIC) - t0) / (double)iterations;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: hotloop pair|props|meminfo ITERATIONS THREADS\n");
        return 2;
    }
    if (strcmp(argv[1], "pair") == 0) mode = PAIR;
    else if (strcmp(argv[1], "props") == 0) mode = PROPS;
    else if (strcmp(argv[1], "meminfo") == 0) mode = MEMINFO;
    else {
        fprintf(stderr, "hotloop: unknown mode %s\n", argv[1]);
        return 2;
    }
    iterations = atol(argv[2]);
    int threads = atoi(argv[3]);
    if (iterations <= 0 || threads <= 0 || threads > 64) {
        fprintf(stderr, "hotloop: bad iterations or threads\n");
        return 2;
    }
    /* The driver checks this to know the hook really was in the path (total = the limit). */
    size_t fr = 0, total = 0;
    if (hipMemGetInfo(&fr, &total) != hipSuccess) {
        fprintf(stderr, "hotloop: hipMemGetInfo failed\n");
        return 1;
    }
    printf("total %zu\n", total);
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    pthread_t tid[64];
    struct timing ns[64];
    for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, worker, &ns[t]);
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        printf("ns %.3f %.3f\n", ns[t].wall_ns, ns[t].cpu_ns);
    }
    return 0;
}
