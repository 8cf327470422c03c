/*
 * handoff-floor.c - what handing a request to another process costs on
 * one core, with no server around it (make bench-floor; never part of
 * make check).  Issue 20 asks the confined hello servlet to match
 * in-process servers with the server pinned to one core; every request
 * of sandlet crosses from the acceptor to a worker and back, and this
 * measures the floor of that crossing on the machine at hand:
 *
 *   same-process  a 64-byte write and read on a unix socketpair, no
 *                 other process: the two system calls alone;
 *   socketpair    two processes on the one CPU bouncing 64 bytes over a
 *                 unix socketpair (what sandlet does): per hand-off, one
 *                 write, one read, one wake-up and one context switch;
 *   futex         the same two processes bouncing a word in shared
 *                 memory, waking each other with FUTEX_WAKE and sleeping
 *                 in FUTEX_WAIT (the floor of a shared-memory ring, which
 *                 still has to wake a sleeping worker).
 *
 * Prints nanoseconds per hand-off (a round trip is two).  Usage:
 * handoff-floor [ROUNDS] (default 200000).  Run it pinned to one CPU
 * (taskset -c 1), as make bench-floor does.  It must never be a test:
 * it asserts nothing and its figures depend on the machine.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int io_all(int fd, char *buf, size_t len, int out)
{
    while (len) {
        ssize_t n = out ? write(fd, buf, len) : read(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static double same_process(long rounds)
{
    int sv[2];
    char msg[64] = {0};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return -1;
    double t0 = now_ns();
    for (long i = 0; i < rounds; i++)
        if (io_all(sv[0], msg, sizeof(msg), 1) < 0 || io_all(sv[1], msg, sizeof(msg), 0) < 0)
            return -1;
    double t = (now_ns() - t0) / (double)rounds;
    close(sv[0]);
    close(sv[1]);
    return t;
}

static double socketpair_pingpong(long rounds)
{
    int sv[2];
    char msg[64] = {0};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(sv[0]);
        for (long i = 0; i < rounds; i++)
            if (io_all(sv[1], msg, sizeof(msg), 0) < 0 || io_all(sv[1], msg, sizeof(msg), 1) < 0)
                _exit(1);
        _exit(0);
    }
    close(sv[1]);
    double t0 = now_ns();
    for (long i = 0; i < rounds; i++)
        if (io_all(sv[0], msg, sizeof(msg), 1) < 0 || io_all(sv[0], msg, sizeof(msg), 0) < 0)
            return -1;
    double t = (now_ns() - t0) / (double)rounds / 2;
    close(sv[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? t : -1;
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
    syscall(SYS_futex, w, FUTEX_WAIT, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* turn: even, the parent's move; odd, the child's. */
static double futex_pingpong(long rounds)
{
    _Atomic uint32_t *turn =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (turn == MAP_FAILED)
        return -1;
    atomic_store(turn, 0);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        for (long i = 0; i < rounds; i++) {
            uint32_t v;
            while (((v = atomic_load(turn)) & 1) == 0)
                futex_wait(turn, v);
            atomic_store(turn, v + 1);
            futex_wake(turn);
        }
        _exit(0);
    }
    double t0 = now_ns();
    for (long i = 0; i < rounds; i++) {
        atomic_fetch_add(turn, 1);
        futex_wake(turn);
        uint32_t v;
        while (((v = atomic_load(turn)) & 1) == 1)
            futex_wait(turn, v);
    }
    double t = (now_ns() - t0) / (double)rounds / 2;
    int st;
    waitpid(pid, &st, 0);
    munmap((void *)turn, 4096);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? t : -1;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
    if (rounds <= 0 || rounds > 100000000) {
        fprintf(stderr, "usage: handoff-floor [ROUNDS, 1 to 100000000]\n");
        return 2;
    }
    double a = same_process(rounds);
    double b = socketpair_pingpong(rounds);
    double c = futex_pingpong(rounds);
    if (a < 0 || b < 0 || c < 0) {
        fprintf(stderr, "handoff-floor: a measurement failed: %s\n", strerror(errno));
        return 1;
    }
    printf("| measurement | ns |\n|---|---:|\n");
    printf("| same-process write+read, 64 B unix socketpair | %.0f |\n", a);
    printf("| hand-off between two processes, unix socketpair | %.0f |\n", b);
    printf("| hand-off between two processes, futex in shared memory | %.0f |\n", c);
    return 0;
}
