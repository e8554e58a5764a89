/*
 * cputime: runs a program and reports the CPU time (user + system) and wall time it took.
 *
 *     cputime PROGRAM [ARG...]
 *
 * The program's own output comes first; then one line `cputime <cpu_us> <wall_us>`. CPU time
 * comes from wait4's rusage of that child alone, so it barely moves when other processes
 * compete for the cores; wall time is what a user waits. Exits with the program's status.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long us(struct timeval tv) { return (long long)tv.tv_sec * 1000000 + tv.tv_usec; }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cputime PROGRAM [ARG...]\n");
        return 2;
    }
    fflush(stdout);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("cputime: fork");
        return 2;
    }
    if (pid == 0) {
        execv(argv[1], argv + 1);
        perror("cputime: execv");
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("cputime: wait4");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long wall = (long long)(t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000;
    printf("cputime %lld %lld\n", us(ru.ru_utime) + us(ru.ru_stime), wall);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}
