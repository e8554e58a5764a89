/* envprobe: runs the steps given as arguments, one line of output per step, so a test can see
 * the environment as the program and the runtime see it and what the hook enforces.
 *
 *   get:NAME         the program's getenv(NAME)            -> "get NAME=<value>|(null)"
 *   sget:NAME        the program's secure_getenv(NAME)      -> "sget NAME=<value>|(null)"
 *   rt:NAME          the runtime's getenv (hipsim)          -> "rt NAME=<value>|(null)"
 *   set:NAME=VALUE   setenv(NAME, VALUE, 1)                 -> "set NAME"
 *   malloc:BYTES     hipMalloc                              -> "malloc <rc>"
 *   freelast         hipFree of the last hipMalloc pointer  -> "free <rc>"
 *   managed          hipsimGetManagedCount                  -> "managed <count> <bytes>"
 *   live             hipsimGetUsage(0) live bytes           -> "live <bytes>"
 *   stream           hipStreamCreate, then the priority of the newest HSA queue
 *                                                           -> "stream <rc> prio <p>"
 *   cumask:W0,W1..   hipExtStreamCreateWithCUMask, then the mask hipsim recorded
 *                                                           -> "cumask <rc> <w0> <w1> ..."
 *   spawn-clean:...  fork; the child execs this program with the steps after the colon-separated
 *                    list (`+` between steps) and an environment of only LD_AUDIT and
 *                    LD_LIBRARY_PATH; the parent waits    -> "child <exit status>"
 *   spawn-clean-as:UID:...  the same, the child switching to UID (gid UID) before the exec
 *   spawn-env:LIST:...  like spawn-clean, the child's environment also holding LIST, a
 *                    comma-separated list of NAME=VALUE (given) and NAME (this process's value)
 */
#define _GNU_SOURCE
#include "fixture.h"
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

const char *hipsimRuntimeGetenv(const char *name);

static void *last_ptr;

static int queue_priority(void) {
    const char *path = getenv("HIPSIM_HSA");
    if (!path) return -100;
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return -101;
    int (*get)(int32_t *) = (int (*)(int32_t *))dlsym(lib, "hsasimGetLastQueuePriority");
    if (!get) return -102;
    int32_t prio = -103;
    CHECK(get(&prio) == 0);
    return prio;
}

static int spawn_clean(char *self, char *steps, long uid, char *extra) {
    char *args[64];
    int n = 0;
    args[n++] = self;
    for (char *s = strtok(steps, "+"); s && n < 63; s = strtok(NULL, "+")) args[n++] = s;
    args[n] = NULL;
    static char audit[4096], libpath[4096], given[16][4096];
    snprintf(audit, sizeof audit, "LD_AUDIT=%s", getenv("LD_AUDIT") ? getenv("LD_AUDIT") : "");
    snprintf(libpath, sizeof libpath, "LD_LIBRARY_PATH=%s",
             getenv("LD_LIBRARY_PATH") ? getenv("LD_LIBRARY_PATH") : "");
    char *env[20] = {audit, libpath};
    int e = 2;
    char *save = NULL;
    for (char *v = extra ? strtok_r(extra, ",", &save) : NULL; v && e < 18;
         v = strtok_r(NULL, ",", &save)) {
        if (strchr(v, '=')) {
            snprintf(given[e], sizeof given[e], "%s", v);
        } else {
            const char *own = getenv(v);
            CHECK(own != NULL);
            snprintf(given[e], sizeof given[e], "%s=%s", v, own);
        }
        env[e] = given[e];
        e++;
    }
    env[e] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (uid >= 0 && (setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0)) _exit(126);
        execve(self, args, env);
        _exit(127);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        char *step = argv[i];
        char *arg = strchr(step, ':');
        if (arg) *arg++ = 0;
        if (strcmp(step, "get") == 0) {
            const char *v = getenv(arg);
            printf("get %s=%s\n", arg, v ? v : "(null)");
        } else if (strcmp(step, "sget") == 0) {
            const char *v = secure_getenv(arg);
            printf("sget %s=%s\n", arg, v ? v : "(null)");
        } else if (strcmp(step, "rt") == 0) {
            const char *v = hipsimRuntimeGetenv(arg);
            printf("rt %s=%s\n", arg, v ? v : "(null)");
        } else if (strcmp(step, "set") == 0) {
            char *eq = strchr(arg, '=');
            CHECK(eq != NULL);
            *eq = 0;
            CHECK(setenv(arg, eq + 1, 1) == 0);
            printf("set %s\n", arg);
        } else if (strcmp(step, "malloc") == 0) {
            void *p = NULL;
            int rc = hipMalloc(&p, strtoull(arg, NULL, 0));
            if (rc == 0) last_ptr = p;
            printf("malloc %d\n", rc);
        } else if (strcmp(step, "freelast") == 0) {
            printf("free %d\n", hipFree(last_ptr));
        } else if (strcmp(step, "managed") == 0) {
            size_t count = 0, bytes = 0;
            CHECK(hipsimGetManagedCount(&count, &bytes) == 0);
            printf("managed %zu %zu\n", count, bytes);
        } else if (strcmp(step, "live") == 0) {
            size_t live = 0, peak = 0;
            CHECK(hipsimGetUsage(0, &live, &peak) == 0);
            printf("live %zu\n", live);
        } else if (strcmp(step, "stream") == 0) {
            hipStream_t s;
            int rc = hipStreamCreate(&s);
            printf("stream %d prio %d\n", rc, queue_priority());
        } else if (strcmp(step, "cumask") == 0) {
            uint32_t words[64];
            uint32_t n = 0;
            for (char *w = strtok(arg, ","); w && n < 64; w = strtok(NULL, ","))
                words[n++] = (uint32_t)strtoul(w, NULL, 0);
            hipStream_t s;
            int rc = hipExtStreamCreateWithCUMask(&s, n, words);
            printf("cumask %d", rc);
            if (rc == 0) {
                uint32_t got[64], len = 0;
                CHECK(hipsimGetStreamCuMask(s, got, 64, &len) == 0);
                for (uint32_t k = 0; k < len && k < 64; k++) printf(" %#x", got[k]);
            }
            printf("\n");
        } else if (strcmp(step, "spawn-clean") == 0) {
            printf("child %d\n", spawn_clean(argv[0], arg, -1, NULL));
        } else if (strcmp(step, "spawn-clean-as") == 0) {
            char *rest = strchr(arg, ':');
            CHECK(rest != NULL);
            *rest++ = 0;
            printf("child %d\n", spawn_clean(argv[0], rest, strtol(arg, NULL, 10), NULL));
        } else if (strcmp(step, "spawn-env") == 0) {
            char *rest = strchr(arg, ':');
            CHECK(rest != NULL);
            *rest++ = 0;
            printf("child %d\n", spawn_clean(argv[0], rest, -1, arg));
        } else {
            fprintf(stderr, "envprobe: unknown step %s\n", step);
            return 2;
        }
    }
    return 0;
}
