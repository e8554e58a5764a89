/* One program shape per build: the way a program reaches hipMalloc is chosen at compile time
 * (-DSHAPE_*), so each binary holds only the relocations of its shape (a PLT call, a GOT-only
 * GLOB_DAT, an absolute data pointer, a dlsym, ...). Every shape runs the same workload under
 * HIP_DEVICE_MEMORY_LIMIT=8m and prints one line per result, which compat.rs checks:
 *
 *   first <rc>                   hipMalloc 6 MiB (must be 0)
 *   second <rc>                  hipMalloc 4 MiB (must be 2, hipErrorOutOfMemory)
 *   meminfo <rc> <free> <total>  (must be 0, 2 MiB, 8 MiB)
 *   usage <rc> <live> <peak>     the simulator's device-wide bookkeeping
 *
 * Shapes that need more (threads, fork+exec, mixing bindings, namespaces) print more lines,
 * described where they are built. */
#define _GNU_SOURCE
#include "fixture.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

typedef hipError_t (*malloc_fn)(void **, size_t);
typedef hipError_t (*meminfo_fn)(size_t *, size_t *);
typedef hipError_t (*usage_fn)(int, size_t *, size_t *);

struct doors {
    malloc_fn alloc;
    meminfo_fn meminfo;
    usage_fn usage;
};

__attribute__((unused)) static void run_workload(const struct doors *d) {
    void *a = NULL, *b = NULL;
    printf("first %d\n", (int)d->alloc(&a, 6 * MIB));
    printf("second %d\n", (int)d->alloc(&b, 4 * MIB));
    size_t free_bytes = 0, total = 0;
    int rc = (int)d->meminfo(&free_bytes, &total);
    printf("meminfo %d %zu %zu\n", rc, free_bytes, total);
    size_t live = 0, peak = 0;
    rc = (int)d->usage(0, &live, &peak);
    printf("usage %d %zu %zu\n", rc, live, peak);
}

__attribute__((unused)) static void *must_dlsym(void *handle, const char *name) {
    void *sym = dlsym(handle, name);
    if (sym == NULL) {
        fprintf(stderr, "dlsym(%s): %s\n", name, dlerror());
        exit(1);
    }
    return sym;
}

#if defined(SHAPE_DIRECT)
/* A plain call: a PLT call by default; with -fno-plt an indirect call through a GLOB_DAT slot;
 * with -z now or LD_BIND_NOW=1 a JUMP_SLOT bound at start-up. */
static hipError_t call_malloc(void **p, size_t n) { return hipMalloc(p, n); }
static hipError_t call_meminfo(size_t *f, size_t *t) { return hipMemGetInfo(f, t); }
int main(void) {
    struct doors d = {call_malloc, call_meminfo, hipsimGetUsage};
    run_workload(&d);
    return 0;
}

#elif defined(SHAPE_POINTER)
/* The address of hipMalloc is taken and never called directly: in PIE code the address comes
 * from a GLOB_DAT slot; the initialised table below is an absolute (R_X86_64_64) data
 * relocation. argv[1] "table" uses the table, anything else the taken pointer. */
malloc_fn const program_table[] = {hipMalloc, NULL};
int main(int argc, char **argv) {
    malloc_fn volatile taken = hipMalloc;
    struct doors d = {taken, hipMemGetInfo, hipsimGetUsage};
    if (argc > 1 && strcmp(argv[1], "table") == 0) {
        /* An index the compiler cannot know keeps the load from the table. */
        d.alloc = program_table[argc - 2];
    }
    run_workload(&d);
    return 0;
}

#elif defined(SHAPE_TABLE_LIB)
/* Built as a shared library: a const dispatch table of HIP function pointers (absolute data
 * relocations in RELRO), the way some libraries select a backend. */
malloc_fn const doors_table[] = {hipMalloc, NULL};
meminfo_fn const info_table[] = {hipMemGetInfo, NULL};
/* An index the compiler cannot know keeps the loads from the tables. */
static volatile int backend = 0;
hipError_t table_alloc(void **p, size_t n) { return doors_table[backend](p, n); }
hipError_t table_meminfo(size_t *f, size_t *t) { return info_table[backend](f, t); }

#elif defined(SHAPE_TABLE_USER)
/* Uses the dispatch-table library above (linked at start-up); never names hipMalloc itself. */
hipError_t table_alloc(void **p, size_t n);
hipError_t table_meminfo(size_t *f, size_t *t);
int main(void) {
    struct doors d = {table_alloc, table_meminfo, hipsimGetUsage};
    run_workload(&d);
    return 0;
}

#elif defined(SHAPE_PITCH)
/* hipMallocPitch, which the simulated runtime implements by calling its exported hipMalloc
 * through its own PLT: 6 MiB as 6144 rows of 1 KiB, then 4 MiB the same way. */
static hipError_t pitch_alloc(void **p, size_t n) {
    size_t pitch = 0;
    return hipMallocPitch(p, &pitch, 1024, n / 1024);
}
static hipError_t call_meminfo(size_t *f, size_t *t) { return hipMemGetInfo(f, t); }
int main(void) {
    struct doors d = {pitch_alloc, call_meminfo, hipsimGetUsage};
    run_workload(&d);
    return 0;
}

#elif defined(SHAPE_INTERPOSER)
/* An LD_PRELOAD tracer, as profiling shims are built: defines hipMalloc, counts the call and
 * forwards to the next definition (RTLD_NEXT). Reports its count on stderr at exit:
 *   interposer: <n> hipMalloc calls */
static int interposed_calls;
hipError_t hipMalloc(void **p, size_t n) {
    static malloc_fn next;
    if (next == NULL) next = (malloc_fn)must_dlsym(RTLD_NEXT, "hipMalloc");
    __atomic_add_fetch(&interposed_calls, 1, __ATOMIC_RELAXED);
    return next(p, n);
}
__attribute__((destructor)) static void interposer_report(void) {
    fprintf(stderr, "interposer: %d hipMalloc calls\n", interposed_calls);
}

#elif defined(SHAPE_USER_LIB)
/* Built as a shared library that a program dlopens: calls HIP directly (PLT, or GOT with
 * -fno-plt). */
hipError_t user_alloc(void **p, size_t n) { return hipMalloc(p, n); }
hipError_t user_meminfo(size_t *f, size_t *t) { return hipMemGetInfo(f, t); }
hipError_t user_usage(int dev, size_t *l, size_t *p) { return hipsimGetUsage(dev, l, p); }

#elif defined(SHAPE_DLOPEN)
/* Not linked against libamdhip64. argv[1] is the library to dlopen after start-up: either the
 * runtime itself (as Python's ctypes does: RTLD_NOW, local), whose hipMalloc is looked up by
 * dlsym, or a user library (argv[2] "user") whose user_* functions call HIP, or the
 * dispatch-table library (argv[2] "table"). argv[3], if
 * given, is another library opened before the workload runs (a later loader event). */
static int deep_bind;
static void *must_dlopen(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | deep_bind);
    if (h == NULL) {
        fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
        exit(1);
    }
    return h;
}
int main(int argc, char **argv) {
    CHECK(argc >= 2);
    /* RTLD_DEEPBIND (as some plugin loaders use) when the environment says so. */
    if (getenv("SHAPE_DEEPBIND") != NULL) {
        deep_bind = RTLD_DEEPBIND;
    }
    void *h = must_dlopen(argv[1]);
    if (argc > 3) {
        must_dlopen(argv[3]);
    }
    struct doors d;
    if (argc > 2 && strcmp(argv[2], "user") == 0) {
        d.alloc = (malloc_fn)must_dlsym(h, "user_alloc");
        d.meminfo = (meminfo_fn)must_dlsym(h, "user_meminfo");
        d.usage = (usage_fn)must_dlsym(h, "user_usage");
    } else if (argc > 2 && strcmp(argv[2], "table") == 0) {
        /* The dispatch-table library: HIP only through data relocations. */
        d.alloc = (malloc_fn)must_dlsym(h, "table_alloc");
        d.meminfo = (meminfo_fn)must_dlsym(h, "table_meminfo");
        d.usage = (usage_fn)must_dlsym(h, "hipsimGetUsage");
    } else {
        d.alloc = (malloc_fn)must_dlsym(h, "hipMalloc");
        d.meminfo = (meminfo_fn)must_dlsym(h, "hipMemGetInfo");
        d.usage = (usage_fn)must_dlsym(h, "hipsimGetUsage");
    }
    run_workload(&d);
    return 0;
}

#elif defined(SHAPE_PROCADDR)
/* Triton's way: every HIP entry point comes from hipGetProcAddress (HIP 6.1). */
int main(void) {
    void *alloc = NULL, *info = NULL;
    hipDriverProcAddressQueryResult status;
    CHECK_HIP(hipGetProcAddress("hipMalloc", &alloc, 601, 0, &status));
    CHECK_HIP(hipGetProcAddress("hipMemGetInfo", &info, 601, 0, &status));
    struct doors d = {(malloc_fn)alloc, (meminfo_fn)info, hipsimGetUsage};
    run_workload(&d);
    return 0;
}

#elif defined(SHAPE_THREADS)
/* Eight threads exist before the process's first HIP call; released together by a barrier,
 * each allocates 1 MiB blocks until refused. Prints
 *   thread <i> <blocks> <last rc>    per thread
 *   blocks <sum>
 * then the meminfo and usage lines. */
#define THREADS 8
static pthread_barrier_t start;
static int blocks[THREADS];
static int last_rc[THREADS];
static void *grab(void *arg) {
    int i = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    for (;;) {
        void *p = NULL;
        hipError_t rc = hipMalloc(&p, MIB);
        if (rc != hipSuccess) {
            last_rc[i] = (int)rc;
            return NULL;
        }
        blocks[i]++;
    }
}
int main(void) {
    pthread_t t[THREADS];
    CHECK(pthread_barrier_init(&start, NULL, THREADS) == 0);
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_create(&t[i], NULL, grab, (void *)(intptr_t)i) == 0);
    }
    int sum = 0;
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        printf("thread %d %d %d\n", i, blocks[i], last_rc[i]);
        sum += blocks[i];
    }
    printf("blocks %d\n", sum);
    size_t free_bytes = 0, total = 0;
    int rc = (int)hipMemGetInfo(&free_bytes, &total);
    printf("meminfo %d %zu %zu\n", rc, free_bytes, total);
    size_t live = 0, peak = 0;
    rc = (int)hipsimGetUsage(0, &live, &peak);
    printf("usage %d %zu %zu\n", rc, live, peak);
    return 0;
}

#elif defined(SHAPE_FORK_EXEC)
/* argv[1] "parent": hold 5 MiB, fork, and exec this program as "child" (argv[2] "strip" removes
 * LD_AUDIT from the child's environment first), wait, then try 4 MiB more. The child tries
 * 3 MiB and then 1 MiB more. Prints
 *   parent-first <rc>
 *   child-first <rc> / child-second <rc> / child-meminfo <rc> <free> <total>
 *   child-exit <status>
 *   parent-second <rc>
 *   usage <rc> <live> <peak> */
extern char **environ;
int main(int argc, char **argv) {
    CHECK(argc >= 2);
    void *p = NULL;
    if (strcmp(argv[1], "child") == 0) {
        printf("child-first %d\n", (int)hipMalloc(&p, 3 * MIB));
        printf("child-second %d\n", (int)hipMalloc(&p, MIB));
        size_t free_bytes = 0, total = 0;
        int rc = (int)hipMemGetInfo(&free_bytes, &total);
        printf("child-meminfo %d %zu %zu\n", rc, free_bytes, total);
        fflush(stdout);
        return 0;
    }
    printf("parent-first %d\n", (int)hipMalloc(&p, 5 * MIB));
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char *args[] = {argv[0], "child", NULL};
        if (argc > 2 && strcmp(argv[2], "strip") == 0) {
            unsetenv("LD_AUDIT");
        }
        execve(argv[0], args, environ);
        perror("execve");
        _exit(127);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    printf("child-exit %d\n", status);
    printf("parent-second %d\n", (int)hipMalloc(&p, 4 * MIB));
    size_t live = 0, peak = 0;
    int rc = (int)hipsimGetUsage(0, &live, &peak);
    printf("usage %d %zu %zu\n", rc, live, peak);
    return 0;
}

#elif defined(SHAPE_MIXED)
/* The same function reached through this program's PLT slot and through the dispatch-table
 * library's absolute slot (both resolve to the redirected definition): 6 MiB by call, 2 MiB
 * through the table, then 1 MiB through the table must be refused. (Within one object GNU ld
 * routes a PLT call through the GLOB_DAT slot once the address is taken, so the two bindings
 * live in two objects.) Prints
 *   call <rc> / pointer <rc> / third <rc> / meminfo ... / usage ... */
hipError_t table_alloc(void **p, size_t n);
int main(void) {
    void *p = NULL;
    printf("call %d\n", (int)hipMalloc(&p, 6 * MIB));
    printf("pointer %d\n", (int)table_alloc(&p, 2 * MIB));
    printf("third %d\n", (int)table_alloc(&p, MIB));
    size_t free_bytes = 0, total = 0;
    int rc = (int)hipMemGetInfo(&free_bytes, &total);
    printf("meminfo %d %zu %zu\n", rc, free_bytes, total);
    size_t live = 0, peak = 0;
    rc = (int)hipsimGetUsage(0, &live, &peak);
    printf("usage %d %zu %zu\n", rc, live, peak);
    return 0;
}

#elif defined(SHAPE_DLMOPEN)
/* Linked against the runtime (6 MiB through it), then a second copy of the runtime is loaded
 * into a new link-map namespace and 4 MiB asked of that copy. Prints
 *   first <rc> / second <rc> (through the new namespace) / usage ... */
int main(void) {
    void *p = NULL;
    printf("first %d\n", (int)hipMalloc(&p, 6 * MIB));
    void *h = dlmopen(LM_ID_NEWLM, "libamdhip64.so", RTLD_NOW);
    if (h == NULL) {
        fprintf(stderr, "dlmopen: %s\n", dlerror());
        return 1;
    }
    malloc_fn other = (malloc_fn)must_dlsym(h, "hipMalloc");
    printf("second %d\n", (int)other(&p, 4 * MIB));
    size_t live = 0, peak = 0;
    int rc = (int)hipsimGetUsage(0, &live, &peak);
    printf("usage %d %zu %zu\n", rc, live, peak);
    return 0;
}

#elif defined(SHAPE_MAPS)
/* Built with and without -static, not linked against HIP: prints `audit-mapped <0|1>`, whether
 * an object named libamvgpu is mapped into the process (i.e. the loader loaded the module). */
int main(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    CHECK(maps != NULL);
    char line[4096];
    int mapped = 0;
    while (fgets(line, sizeof line, maps) != NULL) {
        if (strstr(line, "libamvgpu") != NULL) {
            mapped = 1;
        }
    }
    fclose(maps);
    printf("audit-mapped %d\n", mapped);
    return 0;
}

#else
#error "choose a shape with -DSHAPE_..."
#endif
