/*
 * wakeup-cost.c - what waking a thread that sleeps on another CPU costs
 * the thread that wakes it (bench/run reports it with every run; never
 * part of make check).
 *
 * In the loopback bench the load generator sleeps whenever the server
 * leaves it without an answer to read, and the server's next write then
 * wakes it from inside the server's own system call, on the server's CPU.
 * On bare metal that costs about a microsecond; in a virtual machine the
 * inter-processor interrupt that wakes an idle virtual CPU can cost ten
 * times that, and it is charged to whichever server left the client
 * idle.  This measures it on the machine at hand:
 *
 *   asleep   the waker writes a byte to a pipe that the other thread,
 *            on the other CPU, sleeps reading; between writes the waker
 *            spins 100 us, so that the other CPU goes idle every time;
 *   polling  the same, but the reader polls the pipe without sleeping:
 *            the write wakes nobody.
 *
 * Prints the waker's CPU nanoseconds per write for both.  Usage:
 * wakeup-cost WAKER_CPU SLEEPER_CPU [ROUNDS] (default 20000).  It asserts
 * nothing and its figures depend on the machine: it must never be a test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int pipe_fds[2];
static int sleeper_cpu;

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static double ns_of(clockid_t clock)
{
    struct timespec t;
    if (clock_gettime(clock, &t) < 0)
        return 0;
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *reader(void *arg)
{
    (void)arg;
    if (pin(sleeper_cpu) != 0)
        return (void *)"cannot pin the reader";
    char b[64];
    for (;;) {
        ssize_t n = read(pipe_fds[0], b, sizeof(b));
        if (n == 0)
            return NULL;
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return (void *)"read failed";
    }
}

/* The waker's CPU time per write, in ns, or a negative value on error. */
static double run(bool poll_mode, int waker_cpu, long rounds)
{
    if (pipe(pipe_fds) < 0)
        return -1;
    if (poll_mode && fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK) < 0)
        return -1;
    pthread_t t;
    if (pthread_create(&t, NULL, reader, NULL) != 0)
        return -1;
    double spent = -1;
    if (pin(waker_cpu) == 0) {
        spent = 0;
        for (long i = 0; i < rounds && spent >= 0; i++) {
            double until = ns_of(CLOCK_MONOTONIC) + 100000;
            while (ns_of(CLOCK_MONOTONIC) < until) {
            }
            double a = ns_of(CLOCK_THREAD_CPUTIME_ID);
            if (write(pipe_fds[1], "x", 1) != 1)
                spent = -1;
            else
                spent += ns_of(CLOCK_THREAD_CPUTIME_ID) - a;
        }
    }
    close(pipe_fds[1]);
    void *why = NULL;
    if (pthread_join(t, &why) != 0 || why)
        spent = -1;
    close(pipe_fds[0]);
    return spent < 0 ? spent : spent / (double)rounds;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: wakeup-cost WAKER_CPU SLEEPER_CPU [ROUNDS]\n");
        return 2;
    }
    int waker = atoi(argv[1]);
    sleeper_cpu = atoi(argv[2]);
    long rounds = argc == 4 ? atol(argv[3]) : 20000;
    if (waker < 0 || sleeper_cpu < 0 || waker == sleeper_cpu || rounds < 1) {
        fprintf(stderr, "wakeup-cost: two different CPUs and a positive count, please\n");
        return 2;
    }
    double asleep = run(false, waker, rounds), busy = run(true, waker, rounds);
    if (asleep < 0 || busy < 0) {
        fprintf(stderr, "wakeup-cost: %s\n", strerror(errno ? errno : EINVAL));
        return 1;
    }
    printf("asleep %.0f polling %.0f\n", asleep, busy);
    return 0;
}
