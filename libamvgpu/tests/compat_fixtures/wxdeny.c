/* wxdeny: runs a program under a W^X policy, the way SELinux (execmem, execmod) or PaX MPROTECT
 * would: a seccomp filter answers EACCES to any mmap, mprotect or pkey_mprotect that asks for
 * pages both writable and executable, and lets everything else through.
 *
 *     wxdeny PROGRAM [ARGS...]
 *
 * Before it executes PROGRAM it checks that the filter is in force (an RWX mprotect must fail
 * with EACCES) and exits 3 if not, so a test can never pass because the policy was missing. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#else
#error "wxdeny: unsupported architecture"
#endif

#define WX (PROT_WRITE | PROT_EXEC)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: wxdeny PROGRAM [ARGS...]\n");
        return 2;
    }
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pkey_mprotect, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* `prot` is the third argument of all three; its low 32 bits hold every PROT_ flag. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, WX),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, WX, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {
        .len = (unsigned short)(sizeof filter / sizeof filter[0]),
        .filter = filter,
    };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        perror("wxdeny: PR_SET_NO_NEW_PRIVS");
        return 3;
    }
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("wxdeny: PR_SET_SECCOMP");
        return 3;
    }
    long page = sysconf(_SC_PAGESIZE);
    void *probe = mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe == MAP_FAILED) {
        perror("wxdeny: mmap");
        return 3;
    }
    if (mprotect(probe, (size_t)page, PROT_READ | WX) == 0 || errno != EACCES) {
        fprintf(stderr, "wxdeny: the W^X filter is not in force (%s)\n", strerror(errno));
        return 3;
    }
    munmap(probe, (size_t)page);
    execv(argv[1], argv + 1);
    fprintf(stderr, "wxdeny: exec %s: %s\n", argv[1], strerror(errno));
    return 3;
}
